"""The living style guide: every UI component on one page, for review and screenshots.

Only for development (DEBUG) and staff; everyone else gets the same 404 as any unknown URL.
It renders sample data only — nothing here reads tenant rows.
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

_CLEARANCES = [("Contractor", "Contractor"), ("Employee", "Employee"), ("Manager", "Manager"), ("Executive", "Executive")]


class _SampleMemoryForm(forms.Form):
    title = forms.CharField(max_length=300, help_text="A short, specific headline people would search for.")
    scope = forms.ChoiceField(choices=[("public-docs", "public-docs"), ("engineering", "engineering"), ("sales", "sales")])
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), help_text="Markdown is supported.")
    clearance_min = forms.ChoiceField(
        label="Minimum clearance", choices=_CLEARANCES, widget=forms.RadioSelect, initial="Employee"
    )
    source_url = forms.URLField(label="Source URL", required=False, assume_scheme="https")
    notify = forms.BooleanField(
        required=False, label="Tell the scope's members", help_text="They get a digest entry tomorrow morning."
    )


def _sample_memories() -> list[dict[str, object]]:
    now = timezone.now()
    return [
        {
            "title": "API Rate Limiting Policy",
            "snippet": "All external API endpoints must implement rate limiting: 1,200 requests per minute per token, "
            "with 429 responses carrying Retry-After. Internal services are exempt when called over the mesh.",
            "scope": "engineering",
            "source": "GitHub",
            "clearance": "Contractor",
            "author": "John Doe",
            "tags": ["api", "security"],
            "valid_from": now - timedelta(days=3),
            "score": 0.91,
            "relevance": 0.97,
            "recency": 0.78,
        },
        {
            "title": "Q3 pricing decision: no discount above 20% without VP sign-off",
            "snippet": "Agreed in the #sales-leads thread after the Northwind deal. Discounts above 20% need a VP of Sales "
            "approval recorded in the CRM before the quote goes out.",
            "scope": "sales",
            "source": "Slack",
            "clearance": "Manager",
            "author": "Priya Raman",
            "tags": ["pricing"],
            "valid_from": now - timedelta(days=26),
            "score": 0.74,
            "relevance": 0.82,
            "recency": 0.55,
        },
        {
            "title": "Board update — acquisition talks paused",
            "snippet": "Talks with Globex are paused until after the audit closes. Do not discuss externally.",
            "scope": "leadership",
            "source": "Meeting",
            "clearance": "Executive",
            "author": "Grace Hopper",
            "tags": [],
            "valid_from": now - timedelta(days=140),
            "score": 0.52,
            "relevance": 0.73,
            "recency": 0.04,
        },
    ]


def styleguide(request: HttpRequest) -> HttpResponse:
    if not (settings.DEBUG or request.user.is_staff):
        raise Http404("No style guide here")
    if request.GET.get("page") == "2":
        # The "Load more" demo: the next rows, and no further load-more block (last page).
        more = [
            dict(m, status=status, score=None) for m, status in zip(_sample_memories(), ("superseded", "redacted"), strict=False)
        ]
        return render(request, "styleguide/_more_rows.html", {"memories": more})
    invalid = _SampleMemoryForm(
        data={"title": "", "scope": "engineering", "content": "ok", "clearance_min": "Employee", "source_url": "not a url"}
    )
    invalid.is_valid()
    context = {
        "sample_form": _SampleMemoryForm(auto_id="sg_%s"),
        "invalid_form": invalid,
        "memories": _sample_memories(),
        "sources": ["GitHub", "Slack", "Gmail", "Google Drive", "Notion", "MCP", "Manual", "Meeting", "Upload", "API"],
        "clearances": [name for name, _ in _CLEARANCES] + ["Board"],
        "spark_values": [2, 5, 3, 8, 6, 9, 4, 0, 7, 11, 9, 13, 10, 15],
        "weekly": [
            (day, n, round(n / 22 * 100))
            for day, n in [("Mon", 12), ("Tue", 18), ("Wed", 9), ("Thu", 22), ("Fri", 16), ("Sat", 3), ("Sun", 1)]
        ],
        "recent": timezone.now() - timedelta(minutes=5),
        "older": timezone.now() - timedelta(days=400),
    }
    return render(request, "styleguide/index.html", context)
