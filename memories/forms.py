"""Browser forms. They parse and present input; the services decide what is allowed.

Choices are built from the Principal (writable scopes, clearance rungs up to mine), so a form
never offers what the write rule forbids; the services still check every submission.
Service errors come back onto the field they concern through `attach_error`.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from django import forms
from django.conf import settings
from django.utils import timezone

from cortex_site.errors import CortexError
from memories.access import Principal, clearance_names
from memories.models import PUBLIC_DOCS_SLUG, Membership, Scope
from memories.services.denials import denial_record
from memories.services.documents import SUPPORTED_EXTENSIONS

COMMON_CATEGORIES = ("note", "decision", "policy", "incident", "runbook", "meeting", "document", "howto", "announcement")
DATETIME_LOCAL = "%Y-%m-%dT%H:%M"

# Which form field a service error belongs to; anything else is shown above the form.
FIELD_FOR_ERROR = {
    "EMPTY_CONTENT": "content",
    "CONTENT_TOO_LONG": "content",
    "INVALID_TEXT": "content",
    "TITLE_TOO_LONG": "title",
    "INVALID_TAGS": "tags",
    "INVALID_CATEGORY": "category",
    "INVALID_SOURCE_URL": "source_url",
    "UNKNOWN_SCOPE": "scope",
    "SCOPE_NOT_WRITABLE": "scope",
    "UNKNOWN_CLEARANCE": "clearance_min",
    "CLEARANCE_ABOVE_OWN": "clearance_min",
    "WEAK_PASSWORD": "password",
    "INVALID_VALIDITY_WINDOW": "valid_until",
    "INVALID_DATE": "valid_from",
    "REASON_REQUIRED": "reason",
    "REASON_TOO_LONG": "reason",
    "INVALID_NAME": "name",
    "INVALID_EXPIRY": "expires",
    "INVALID_EMAIL": "email",
    "USER_EXISTS": "password",
    "MEMBER_EXISTS": "email",
    "INVALID_SLUG": "slug",
    "SCOPE_EXISTS": "slug",
    "INVALID_VISIBILITY": "visibility",
    "PUBLIC_DOCS_FIXED": "visibility",
    "INVALID_ROLE": "role",
    "LAST_ADMIN": "role",
}


# The API's field names as people see them on a form ("valid_until must be after valid_from"
# reads "Valid until must be after Valid from").
FIELD_WORDS = {
    "valid_until": "Valid until",
    "valid_from": "Valid from",
    "source_url": "Source link",
    "clearance_min": "Minimum clearance",
    "idempotency_key": "the form's key",
}
_FIELD_WORD = re.compile(r"\b(" + "|".join(FIELD_WORDS) + r")\b")


def in_words(message: str) -> str:
    """A service message with API field names replaced by the labels people see."""
    worded = _FIELD_WORD.sub(lambda match: FIELD_WORDS[match.group(1)], message)
    return worded[:1].upper() + worded[1:]


def attach_error(form: forms.Form, exc: CortexError) -> None:
    """Put a service error next to the field it is about (or on the form when none fits), in words."""
    denial_record(exc)  # a refusal shown next to a field is still a refusal
    field = FIELD_FOR_ERROR.get(exc.error_code)
    form.add_error(field if field in form.fields else None, in_words(exc.message))


def clearance_choices(principal: Principal) -> list[tuple[str, str]]:
    """The organization's rungs up to (and including) the principal's own, lowest first."""
    ladder = clearance_names(principal.organization_id)
    return [(ladder[rank], ladder[rank]) for rank in sorted(ladder) if rank <= principal.clearance_rank]


def set_choices(form: forms.Form, name: str, choices: list[tuple[str, str]]) -> None:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField), name  # a programming error, not bad input
    field.choices = choices


def scope_choices(scopes: Any) -> list[tuple[str, str]]:
    """Scopes as people know them: "Engineering (engineering)", the bare slug only when it is the name."""
    return [(s.slug, f"{s.name} ({s.slug})" if s.name and s.name != s.slug else s.slug) for s in scopes]


def split_tags(raw: str) -> list[str]:
    return [t.strip() for t in (raw or "").replace("\n", ",").split(",") if t.strip()]


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(format=DATETIME_LOCAL, **kwargs)


def _datetime_field(label: str, help_text: str) -> forms.DateTimeField:
    return forms.DateTimeField(
        label=label,
        required=False,
        widget=DateTimeLocalInput(),
        input_formats=[DATETIME_LOCAL, "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
        help_text=help_text,
    )


class MemoryFieldsForm(forms.Form):
    """The fields of a memory a person writes: shared by Add (note) and Supersede (edit)."""

    title = forms.CharField(
        required=False,
        max_length=settings.CORTEX_MAX_TITLE_CHARS,
        help_text="A short, specific headline people would search for. Left empty, the first line is used.",
    )
    content = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 12, "data-markdown-source": ""}),
        help_text="Markdown is supported: headings, lists, links, code, tables.",
    )
    scope = forms.ChoiceField(help_text="Only scopes you can write to are listed.")
    category = forms.CharField(
        max_length=50,
        initial="note",
        widget=forms.TextInput(attrs={"list": "category-options", "autocomplete": "off"}),
        help_text="One word: decision, policy, incident, runbook…",
    )
    tags = forms.CharField(required=False, max_length=1100, help_text="Comma-separated, e.g. api, security.")
    clearance_min = forms.ChoiceField(
        label="Minimum clearance", help_text="Who can read it: this rung and above. At most your own."
    )
    source_url = forms.URLField(
        label="Source link",
        required=False,
        max_length=2000,
        assume_scheme="https",
        help_text="Where this comes from, if anywhere.",
    )
    valid_from = _datetime_field("Valid from", "When this became true (UTC). Empty means now.")
    valid_until = _datetime_field("Valid until", "When it stops applying (UTC). Empty means until superseded.")

    def __init__(self, *args: Any, principal: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.principal = principal
        scopes = principal.writable_scopes()
        set_choices(self, "scope", scope_choices(scopes))
        rungs = clearance_choices(principal)
        set_choices(self, "clearance_min", rungs)
        if not self.is_bound and "scope" not in self.initial:
            slugs = [s.slug for s in scopes]
            self.initial["scope"] = PUBLIC_DOCS_SLUG if PUBLIC_DOCS_SLUG in slugs else (slugs[0] if slugs else "")
        if not self.is_bound and "clearance_min" not in self.initial:
            self.initial["clearance_min"] = rungs[0][0] if rungs else ""

    def clean_category(self) -> str:
        return (self.cleaned_data.get("category") or "note").strip().lower()

    def draft_fields(self) -> dict[str, Any]:
        """The cleaned values as MemoryDraft keyword arguments."""
        data = self.cleaned_data
        return {
            "title": data.get("title", "").strip(),
            "content": data["content"],
            "scope": data["scope"],
            "category": data.get("category") or "note",
            "tags": split_tags(data.get("tags", "")),
            "clearance_min": data["clearance_min"],
            "source_url": data.get("source_url") or "",
            "valid_from": data.get("valid_from"),
            "valid_until": data.get("valid_until"),
        }


class NoteForm(MemoryFieldsForm):
    # A fresh key per form: a double submit, or a retry after a network error, stores one memory.
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=255)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial.setdefault("idempotency_key", f"ui-{uuid.uuid4()}")


class SupersedeForm(MemoryFieldsForm):
    """Edit as a new version: starts from the current memory's values."""

    @staticmethod
    def initial_for(memory: Any, clearance: str) -> dict[str, Any]:
        def local(moment: datetime | None) -> str:
            return timezone.localtime(moment).strftime(DATETIME_LOCAL) if moment else ""

        return {
            "title": memory.title,
            "content": memory.content,
            "scope": memory.scope.slug,
            "category": memory.category,
            "tags": ", ".join(memory.tags),
            "clearance_min": clearance,
            "source_url": memory.source_url,
            "valid_until": local(memory.valid_until),
        }


class UploadOptionsForm(forms.Form):
    """Where uploaded documents land; each file becomes one memory."""

    scope = forms.ChoiceField(help_text="Only scopes you can write to are listed.")
    category = forms.CharField(
        max_length=50, initial="document", widget=forms.TextInput(attrs={"list": "category-options", "autocomplete": "off"})
    )
    tags = forms.CharField(required=False, max_length=1100, help_text="Comma-separated; added to every file.")
    clearance_min = forms.ChoiceField(label="Minimum clearance", help_text="At most your own.")

    def __init__(self, *args: Any, principal: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scopes = principal.writable_scopes()
        set_choices(self, "scope", scope_choices(scopes))
        rungs = clearance_choices(principal)
        set_choices(self, "clearance_min", rungs)
        slugs = [s.slug for s in scopes]
        if not self.is_bound:
            self.initial.setdefault("scope", PUBLIC_DOCS_SLUG if PUBLIC_DOCS_SLUG in slugs else (slugs[0] if slugs else ""))
            self.initial.setdefault("clearance_min", rungs[0][0] if rungs else "")

    def clean_category(self) -> str:
        return (self.cleaned_data.get("category") or "document").strip().lower()


class RedactForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Kept in the audit trail with your name and the time. The content is removed for everyone.",
    )
    urgent = forms.BooleanField(
        required=False,
        label="Urgent: make it final now",
        help_text="For a leaked secret or personal data. Otherwise an admin can restore it for a few days.",
    )


class RedactionRequestForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The memory's author and the admins see it with your name; one of them decides.",
    )


class RedactionDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("decline", "Decline")])
    note = forms.CharField(max_length=1000, required=False)


# -- settings ---------------------------------------------------------------------------------------


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What uses it, e.g. “CI import job” or “Claude Desktop”.")
    scopes = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave all unticked for every scope you can read. A token never sees more than you.",
    )
    read_only = forms.BooleanField(required=False, label="Read-only", help_text="Can recall and list, cannot remember.")
    expires = forms.DateField(
        required=False,
        label="Expires on",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Optional. Ends at midnight UTC.",
    )

    def __init__(self, *args: Any, principal: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        set_choices(self, "scopes", [(s.slug, s.slug) for s in principal.readable_scopes()])

    def expires_at(self) -> datetime | None:
        day = self.cleaned_data.get("expires")
        if day is None:
            return None
        return datetime(day.year, day.month, day.day, tzinfo=timezone.get_current_timezone())


class AgentTokenForm(forms.Form):
    agent = forms.CharField(
        label="Agent name", max_length=80, initial="AI agent", help_text="Shown in your token list and the audit log."
    )
    read_only = forms.BooleanField(required=False, label="Recall only", help_text="The agent can recall but not remember.")


class InviteForm(forms.Form):
    """Invite by email with everything chosen up front; the invitee sets their own password."""

    email = forms.EmailField(max_length=254)
    clearance = forms.ChoiceField(help_text="At most your own.")
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)
    read_scopes = forms.MultipleChoiceField(
        label="Can read", required=False, widget=forms.CheckboxSelectMultiple, help_text="Granted scopes they may read."
    )
    write_scopes = forms.MultipleChoiceField(
        label="Can write", required=False, widget=forms.CheckboxSelectMultiple, help_text="Write implies read."
    )

    def __init__(self, *args: Any, principal: Principal, scopes: list[Scope], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        set_choices(self, "clearance", clearance_choices(principal))
        granted = [(s.slug, s.name) for s in scopes if s.visibility == Scope.Visibility.GRANTED and s.retired_at is None]
        set_choices(self, "read_scopes", granted)
        set_choices(self, "write_scopes", granted)

    def grants(self) -> dict[str, bool]:
        chosen = dict.fromkeys(self.cleaned_data["read_scopes"], False)
        chosen.update(dict.fromkeys(self.cleaned_data["write_scopes"], True))
        return chosen


class InviteAcceptForm(forms.Form):
    name = forms.CharField(max_length=150, required=False, label="Your name")
    password = forms.CharField(
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 12 characters; not a common password, nor close to your email or name.",
    )
    password_again = forms.CharField(
        label="Password again", strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("password") and data.get("password") != data.get("password_again"):
            self.add_error("password_again", "The two passwords differ.")
        return data


class MemberUpdateForm(forms.Form):
    clearance = forms.ChoiceField()
    role = forms.ChoiceField(choices=Membership.Role.choices)

    def __init__(self, *args: Any, principal: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        set_choices(self, "clearance", clearance_choices(principal))


class ScopeForm(forms.Form):
    slug = forms.CharField(max_length=50, help_text="Lowercase letters, digits and hyphens, e.g. customer-success.")
    name = forms.CharField(max_length=150, required=False)
    visibility = forms.ChoiceField(
        choices=[(Scope.Visibility.GRANTED, "Granted — only people with a grant"), (Scope.Visibility.ALL_MEMBERS, "All members")],
        initial=Scope.Visibility.GRANTED,
    )
    members_can_write = forms.BooleanField(
        required=False, initial=True, label="Members can write", help_text="For all-member scopes: may every member add memories?"
    )


class ScopeUpdateForm(forms.Form):
    name = forms.CharField(max_length=150, required=False)
    visibility = forms.ChoiceField(choices=Scope.Visibility.choices)
    members_can_write = forms.BooleanField(required=False)


class GrantForm(forms.Form):
    member = forms.ChoiceField()
    scope = forms.ChoiceField()
    access = forms.ChoiceField(choices=[("write", "Read & write"), ("read", "Read only")], initial="write")

    def __init__(self, *args: Any, members: list[Membership], scopes: list[Scope], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        set_choices(self, "member", [(str(m.pk), m.user.email) for m in members])
        set_choices(self, "scope", scope_choices(scopes))


class DetailsForm(forms.Form):
    """Edit details: tags, category, clearance and expiry, changed in place (memory_patch, audited);
    the content and its history stay as they are."""

    category = forms.CharField(
        max_length=50,
        widget=forms.TextInput(attrs={"list": "category-options", "autocomplete": "off"}),
        help_text="One word: decision, policy, incident, runbook…",
    )
    tags = forms.CharField(required=False, max_length=1100, help_text="Comma-separated, e.g. api, security.")
    clearance_min = forms.ChoiceField(
        label="Minimum clearance", help_text="Who can read it: this rung and above. At most your own."
    )
    valid_until = _datetime_field("Valid until", "When it stops applying (UTC). Empty means until superseded.")

    def __init__(self, *args: Any, principal: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        set_choices(self, "clearance_min", clearance_choices(principal))

    @staticmethod
    def initial_for(memory: Any, clearance: str) -> dict[str, Any]:
        until = timezone.localtime(memory.valid_until).strftime(DATETIME_LOCAL) if memory.valid_until else ""
        return {"category": memory.category, "tags": ", ".join(memory.tags), "clearance_min": clearance, "valid_until": until}

    def changes(self) -> dict[str, Any]:
        """The fields as memory_patch takes them; unchanged values are sent too (the service skips them)."""
        data = self.cleaned_data
        return {
            "category": (data.get("category") or "note").strip().lower(),
            "tags": split_tags(data.get("tags", "")),
            "clearance_min": data["clearance_min"],
            "valid_until": data.get("valid_until"),
        }


class BriefForm(forms.Form):
    title = forms.CharField(
        max_length=settings.CORTEX_MAX_TITLE_CHARS, help_text="What the meeting was, e.g. “Platform sync — pricing”."
    )
    date = forms.DateField(label="Meeting date", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    attendees = forms.CharField(required=False, max_length=3000, help_text="Comma-separated names.")
    scope = forms.ChoiceField(help_text="Only scopes you can write to are listed.")
    clearance_min = forms.ChoiceField(label="Minimum clearance", help_text="Who can read it: this rung and above.")
    tags = forms.CharField(required=False, max_length=1100, help_text="Comma-separated.")
    summary = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 7}),
        help_text="What was discussed and decided, in your words.",
    )
    file = forms.FileField(
        label="Transcript file",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(SUPPORTED_EXTENSIONS)}),
        help_text="Text only: .txt, .md, .docx or .pdf with a text layer — no audio.",
    )
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=255)

    def __init__(self, *args: Any, principal: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scopes = principal.writable_scopes()
        set_choices(self, "scope", [(s.slug, s.slug) for s in scopes])
        rungs = clearance_choices(principal)
        set_choices(self, "clearance_min", rungs)
        if not self.is_bound:
            slugs = [s.slug for s in scopes]
            self.initial.setdefault("scope", PUBLIC_DOCS_SLUG if PUBLIC_DOCS_SLUG in slugs else (slugs[0] if slugs else ""))
            self.initial.setdefault("clearance_min", rungs[0][0] if rungs else "")
            self.initial.setdefault("idempotency_key", f"brief-{uuid.uuid4()}")
