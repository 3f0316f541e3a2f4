"""Browser: the conflicts queue, one conflict side by side, and people's decisions."""

from __future__ import annotations

import difflib
import re

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_POST

from cortex_site.errors import Conflict as StateConflict
from cortex_site.errors import PermissionDenied, ValidationFailed
from memories.access import Principal, clearance_names
from memories.models import Conflict, Organization
from memories.selectors.conflicts import KINDS, checked, conflict_for, visible_conflicts
from memories.services import conflicts as services
from memories.views.common import principal_view

PAGE_SIZE = 50
MAX_DIFF_CHARS = 20_000
STATUS_TABS = (("open", "Open"), ("resolved", "Resolved"), ("dismissed", "Dismissed"), ("all", "All"))
RESOLUTION_LABELS = {
    "keep_new": "Kept the new memory",
    "keep_existing": "Kept the existing memory",
    "keep_both": "Kept both",
    "dismiss": "Dismissed",
}


class ResolveForm(forms.Form):
    resolution = forms.ChoiceField(choices=Conflict.Resolution.choices)
    note = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))


class PolicyForm(forms.Form):
    policy = forms.ChoiceField(choices=Organization.ConflictPolicy.choices)


def word_diff(old: str, new: str) -> tuple[SafeString, SafeString]:
    """Both texts, escaped, with words only in `old` marked as removed and words only in `new` as added."""
    if len(old) + len(new) > MAX_DIFF_CHARS:
        return mark_safe(escape(old)), mark_safe(escape(new))  # noqa: S308 - escaped just here
    a, b = re.findall(r"\s+|\S+", old), re.findall(r"\s+|\S+", new)
    left: list[str] = []
    right: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        removed, added = escape("".join(a[i1:i2])), escape("".join(b[j1:j2]))
        if tag == "equal":
            left.append(removed)
            right.append(added)
            continue
        if removed:
            left.append(f'<del class="diff-del">{removed}</del>')
        if added:
            right.append(f'<ins class="diff-ins">{added}</ins>')
    return mark_safe("".join(left)), mark_safe("".join(right))  # noqa: S308 - every piece was escaped above


@principal_view
@require_GET
def conflict_list(request: HttpRequest, principal: Principal) -> HttpResponse:
    status = str(request.GET.get("status")) if request.GET.get("status") in dict(STATUS_TABS) else "open"
    kind = str(request.GET.get("kind")) if request.GET.get("kind") in KINDS else ""
    conflicts = visible_conflicts(principal, status=status, kind=kind or None)
    page = checked(principal, conflicts[: PAGE_SIZE + 1])
    counts = {s: visible_conflicts(principal, status=s).count() for s, _label in STATUS_TABS if s != "all"}
    context = {
        "rows": page[:PAGE_SIZE],
        "more": len(page) > PAGE_SIZE,
        "status": status,
        "kind": kind,
        "tabs": [{"value": s, "label": label, "count": counts.get(s)} for s, label in STATUS_TABS],
        "kinds": sorted(KINDS),
        "policy": principal.organization.conflict_policy,
        "policy_form": PolicyForm() if principal.is_admin and not principal.read_only else None,
    }
    return render(request, "conflicts/list.html", context)


@principal_view
@require_GET
def conflict_detail(request: HttpRequest, principal: Principal, conflict_id: str) -> HttpResponse:
    conflict = conflict_for(principal, conflict_id)
    existing_html, new_html = word_diff(conflict.existing_memory.content, conflict.new_memory.content)
    names = clearance_names(principal.organization_id)
    context = {
        "conflict": conflict,
        "sides": [
            {
                "role": "Existing",
                "memory": conflict.existing_memory,
                "html": existing_html,
                "clearance": names.get(conflict.existing_memory.clearance_rank),
            },
            {
                "role": "New",
                "memory": conflict.new_memory,
                "html": new_html,
                "clearance": names.get(conflict.new_memory.clearance_rank),
            },
        ],
        "resolution_label": RESOLUTION_LABELS.get(conflict.resolution, ""),
        "can_decide": principal.can_decide(conflict),
        "form": ResolveForm(),
    }
    return render(request, "conflicts/detail.html", context)


@principal_view
@require_POST
def conflict_resolve_view(request: HttpRequest, principal: Principal, conflict_id: str) -> HttpResponse:
    conflict = conflict_for(principal, conflict_id)  # 404 before anything else for a conflict the caller cannot see
    form = ResolveForm(request.POST)
    if not form.is_valid():
        # The field that is wrong: the choice, or the note (too long, or holding a NUL).
        wrong = "note" if "resolution" not in form.errors else "resolution"
        problem = (
            "Choose keep new, keep existing, keep both or dismiss."
            if wrong == "resolution"
            else f"Note: {form.errors['note'][0]}"
        )
        messages.error(request, problem)
        return redirect(f"/conflicts/{conflict.pk}/")
    try:
        services.conflict_resolve(
            principal=principal,
            conflict_id=conflict.pk,
            resolution=form.cleaned_data["resolution"],
            note=form.cleaned_data["note"],
        )
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None  # the page never offered it: authority says no
    except (StateConflict, ValidationFailed) as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{RESOLUTION_LABELS[form.cleaned_data['resolution']]}. The decision is in the audit log.")
    return redirect(f"/conflicts/{conflict.pk}/")


@principal_view
@require_POST
def conflict_reopen_view(request: HttpRequest, principal: Principal, conflict_id: str) -> HttpResponse:
    conflict = conflict_for(principal, conflict_id)
    note = request.POST.get("note", "").replace("\x00", "")  # PostgreSQL cannot store a NUL
    try:
        services.conflict_reopen(principal=principal, conflict_id=conflict.pk, note=note)
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except StateConflict as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, "Re-opened: the conflict is back in the queue. The memories stay as they are until someone decides."
        )
    return redirect(f"/conflicts/{conflict.pk}/")


@principal_view
@require_POST
def conflict_policy_view(request: HttpRequest, principal: Principal) -> HttpResponse:
    form = PolicyForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The conflict policy is auto or manual.")
        return redirect("/conflicts/")
    services.conflict_policy_set(
        organization=principal.organization, policy=form.cleaned_data["policy"], by=principal
    )  # 403 for non-admins
    messages.success(request, f"Conflict policy is now {form.cleaned_data['policy']}.")
    return redirect("/conflicts/")
