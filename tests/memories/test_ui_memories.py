"""The memories pages in the browser: list, filters, cursor pages, search, detail, edit (supersede) and redact.

Every page answers for the session's Principal exactly as the API does: a Contractor never
sees an Executive memory anywhere, foreign and missing ids are the same 404, and actions the
write rule forbids are not offered (and refused when posted anyway).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.test import Client
from support import imported, principal, remember, signed_in

from audit.models import AuditEvent
from memories.models import Membership, Memory
from memories.services.memories import memory_patch, memory_redact, memory_supersede

pytestmark = pytest.mark.django_db


def html_of(response: Any) -> str:
    return response.content.decode()


@pytest.fixture
def secret(acme: dict[str, Any]) -> Memory:
    return remember(
        acme["exec"],
        "Acquisition talks with Initech are paused until the audit closes.",
        title="Board: acquisition paused",
        scope="engineering",
        clearance_min="Executive",
        tags=["board"],
    )


@pytest.fixture
def policy(acme: dict[str, Any]) -> Memory:
    return remember(
        acme["employee"],
        "All external API endpoints must implement rate limiting: 1,200 requests per minute per token.",
        title="API rate limiting policy",
        scope="engineering",
        category="policy",
        source="GitHub",
        source_url="https://github.com/acme/api/pull/123",
        tags=["api", "security"],
        clearance_min="Contractor",
    )


# -- list -------------------------------------------------------------------------------------------------


def test_list_shows_each_memory_with_its_badges(acme: dict[str, Any], policy: Memory) -> None:
    response = signed_in(acme["contractor"]).get("/memories/")
    assert response.status_code == 200
    html = html_of(response)
    assert "API rate limiting policy" in html
    assert f'href="/memories/{policy.pk}/"' in html
    assert 'class="badge badge-scope"' in html and ">engineering</span>" in html
    assert "clearance-contractor" in html
    assert "source-github" in html and "GitHub" in html
    assert 'class="item-category">policy<' in html
    assert acme["employee"].user.display_name in html
    assert "<time datetime=" in html
    assert 'href="/memories/?tag=api"' in html and 'href="/memories/?tag=security"' in html


def test_contractor_never_sees_an_executive_memory_in_the_list_or_search(
    acme: dict[str, Any], secret: Memory, policy: Memory
) -> None:
    contractor = signed_in(acme["contractor"])
    for path in (
        "/memories/",
        "/memories/?status=all",
        "/memories/?q=acquisition+Initech+audit",
        "/memories/?q=board&scope=engineering",
        "/memories/?tag=board",
    ):
        html = html_of(contractor.get(path))
        assert "Board: acquisition paused" not in html and "are paused until" not in html, path
        assert str(secret.pk) not in html, path
    # The executive who wrote it does see it, in both modes.
    executive = signed_in(acme["exec"])
    assert str(secret.pk) in html_of(executive.get("/memories/"))
    assert str(secret.pk) in html_of(executive.get("/memories/?q=acquisition+Initech"))


def test_outsider_sees_nothing_of_another_organization(acme: dict[str, Any], outsider: Membership, policy: Memory) -> None:
    client = signed_in(outsider)
    html = html_of(client.get("/memories/"))
    assert "API rate limiting policy" not in html
    assert "No memories yet" in html
    search = html_of(client.get("/memories/?q=rate+limiting"))
    assert "API rate limiting policy" not in search and str(policy.pk) not in search
    assert "No matches" in search


def test_filters_narrow_the_list(acme: dict[str, Any], policy: Memory) -> None:
    remember(
        acme["employee"],
        "Deploys freeze on Fridays after 3pm.",
        title="Deploy freeze",
        scope="engineering",
        category="decision",
        source="Slack",
        tags=["deploys"],
    )
    imported(
        acme["manager"],
        "Discounts above 20% need VP sign-off.",
        title="Discount rule",
        scope="sales",
        category="policy",
        author_name="Priya Raman",
    )
    client = signed_in(acme["manager"])

    def titles(query: str) -> set[str]:
        html = html_of(client.get("/memories/" + query))
        return {t for t in ("API rate limiting policy", "Deploy freeze", "Discount rule") if t in html}

    assert titles("") == {"API rate limiting policy", "Deploy freeze", "Discount rule"}
    assert titles("?scope=sales") == {"Discount rule"}
    assert titles("?category=policy") == {"API rate limiting policy", "Discount rule"}
    assert titles("?source=slack") == {"Deploy freeze"}
    assert titles("?tag=security") == {"API rate limiting policy"}
    assert titles("?author=Priya+Raman") == {"Discount rule"}
    assert titles("?scope=sales&category=decision") == set()
    assert "No memories match these filters" in html_of(client.get("/memories/?scope=sales&category=decision"))


def test_filter_controls_offer_only_what_the_reader_can_see(acme: dict[str, Any], policy: Memory) -> None:
    remember(acme["manager"], "Quota is 1.2M for Q3.", title="Q3 quota", scope="sales", category="forecast")
    html = html_of(signed_in(acme["contractor"]).get("/memories/"))
    scope_options = re.findall(r'<option value="([^"]*)"', html.split('id="f-scope"')[1].split("</select>")[0])
    assert scope_options == ["", "engineering", "handbook", "public-docs"]
    assert "forecast" not in html  # a category that only occurs in sales


def test_status_filter_shows_history(acme: dict[str, Any], policy: Memory) -> None:
    newer = memory_supersede(
        principal=principal(acme["employee"]),
        memory_id=policy.pk,
        changes={"content": "Rate limit: 2,000 requests per minute per token."},
    ).memory
    client = signed_in(acme["employee"])
    active = html_of(client.get("/memories/"))
    assert f"/memories/{newer.pk}/" in active and f"/memories/{policy.pk}/" not in active
    history = html_of(client.get("/memories/?status=superseded"))
    assert f"/memories/{policy.pk}/" in history and "Superseded" in history
    assert f"/memories/{newer.pk}/" not in history


def test_cursor_pages_load_more_through_htmx(acme: dict[str, Any]) -> None:
    for n in range(25):
        remember(
            acme["employee"], f"Note number {n} about the release train.", title=f"Release note {n:02d}", scope="engineering"
        )
    client = signed_in(acme["employee"])
    first = html_of(client.get("/memories/"))
    assert first.count('class="item-title item-link-cover"') == 20
    assert "Release note 24" in first and "Release note 04" not in first
    match = re.search(r'hx-get="(/memories/\?cursor=[^"]+)"', first)
    assert match, "a Load more button with a cursor"
    more = client.get(match.group(1).replace("&amp;", "&"), headers={"HX-Request": "true"})
    assert more.status_code == 200
    body = html_of(more)
    assert "<html" not in body
    assert body.count('class="item-title item-link-cover"') == 5
    assert "Release note 04" in body and "Release note 00" in body and "Release note 05" not in body
    assert "load-more" not in body  # the last page
    # Without JavaScript the same URL is a full page.
    assert "<html" in html_of(client.get(match.group(1).replace("&amp;", "&")))


def test_a_cursor_that_is_not_ours_starts_at_the_top(acme: dict[str, Any], policy: Memory) -> None:
    response = signed_in(acme["employee"]).get("/memories/?cursor=not-a-cursor%00")
    assert response.status_code == 200
    assert "API rate limiting policy" in html_of(response)


# -- search (recall) --------------------------------------------------------------------------------------


def test_query_switches_to_ranked_recall_with_highlighted_snippets_and_score_breakdown(
    acme: dict[str, Any], policy: Memory
) -> None:
    remember(
        acme["employee"],
        "The cafeteria opens at 8am; breakfast is free on Fridays.",
        title="Cafeteria hours",
        scope="engineering",
    )
    response = signed_in(acme["contractor"]).get("/memories/?q=rate+limiting")
    assert response.status_code == 200
    html = html_of(response)
    assert "Ranked by 0.7 × relevance + 0.3 × recency" in html
    assert "API rate limiting policy" in html
    assert "<mark>rate</mark>" in html.lower() and "<mark>limiting</mark>" in html.lower()
    assert 'class="score-bar"' in html and "Why this rank" in html
    assert "× 0.7 =" in html and "× 0.3 =" in html
    assert AuditEvent.objects.filter(action="memory.recall", details__query="rate limiting").exists()
    first_result = html.index("API rate limiting policy")
    assert "Cafeteria hours" not in html or html.index("Cafeteria hours") > first_result


def test_a_search_matching_an_earlier_version_shows_the_current_one_and_says_why(
    acme: dict[str, Any], outsider: Membership
) -> None:
    old = remember(
        acme["employee"],
        "All customer tickets live in Zendesk; phone calls are logged by hand.",
        title="Support tooling",
        scope="engineering",
    )
    new = memory_supersede(
        principal=principal(acme["employee"]),
        memory_id=old.pk,
        changes={"title": "Support moved to Freshdesk", "content": "We are live on Freshdesk now; macros were migrated."},
    ).memory

    html = html_of(signed_in(acme["employee"]).get("/memories/?q=where+do+customer+tickets+live"))

    assert "Support moved to Freshdesk" in html and f'href="/memories/{new.pk}/"' in html
    assert "Matched an earlier version it replaced:" in html and f'href="/memories/{old.pk}/">Support tooling</a>' in html
    outsider_html = html_of(signed_in(outsider).get("/memories/?q=where+do+customer+tickets+live"))
    assert "Freshdesk" not in outsider_html and "Support tooling" not in outsider_html


def test_search_as_you_type_returns_only_the_results_fragment(acme: dict[str, Any], policy: Memory) -> None:
    response = signed_in(acme["employee"]).get(
        "/memories/?q=rate+limiting", headers={"HX-Request": "true", "HX-Target": "memory-results"}
    )
    html = html_of(response)
    assert response.status_code == 200
    assert "<html" not in html and 'class="shell"' not in html
    assert "API rate limiting policy" in html


def test_snippets_escape_content_before_highlighting(acme: dict[str, Any]) -> None:
    remember(
        acme["employee"],
        "Never paste <script>alert('x')</script> into the wiki; escaping matters.",
        title="Escaping rule",
        scope="engineering",
    )
    html = html_of(signed_in(acme["employee"]).get("/memories/?q=escaping+script"))
    assert "<script>alert" not in html
    assert "&lt;<mark>script</mark>&gt;" in html


def test_search_with_no_match_says_what_to_do(acme: dict[str, Any], policy: Memory) -> None:
    html = html_of(signed_in(acme["employee"]).get("/memories/?q=zyxwvut+qqqq"))
    assert "No matches" in html
    assert 'href="/memories/new/"' in html


def test_search_says_when_it_ignores_browse_only_filters(acme: dict[str, Any], policy: Memory) -> None:
    html = html_of(signed_in(acme["employee"]).get("/memories/?q=rate&author=someone&status=all"))
    assert "the author and status filter applies when you browse" in html


def test_search_when_the_embedder_is_down_says_to_retry(acme: dict[str, Any], use_embedder: Any) -> None:
    from cortex_site.embedded import free_port

    use_embedder("openai", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    response = signed_in(acme["employee"]).get("/memories/?q=anything")
    assert response.status_code == 200
    assert "Search failed" in html_of(response) and "Try again" in html_of(response)


# -- detail -----------------------------------------------------------------------------------------------


def test_detail_renders_markdown_safely_with_citation_tags_and_actions(acme: dict[str, Any]) -> None:
    memory = remember(
        acme["employee"],
        "# Rollout\n\n- **Canary** first\n- then "
        "`10%`\n\n<script>alert(1)</script>\n\n[docs](https://docs.acme.test) [bad](javascript:alert(1))",
        title="Rollout policy",
        scope="engineering",
        source="Slack",
        source_url="https://acme.slack.com/archives/C1/p2",
        tags=["deploys"],
    )
    response = signed_in(acme["employee"]).get(f"/memories/{memory.pk}/")
    assert response.status_code == 200
    html = html_of(response)
    assert "<h2>Rollout</h2>" in html and "<strong>Canary</strong>" in html and "<code>10%</code>" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'href="https://docs.acme.test"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert "javascript:alert" not in html.replace("[bad](javascript:alert(1))", "")
    assert 'href="https://acme.slack.com/archives/C1/p2"' in html
    assert 'href="/memories/?tag=deploys"' in html
    assert f'href="/memories/{memory.pk}/edit/"' in html
    assert 'data-dialog-open="#redact-dialog"' in html
    assert f'data-copy-text="http://testserver/memories/{memory.pk}/"' in html
    assert AuditEvent.objects.filter(action="memory.read", target_id=str(memory.pk)).exists()


def test_reader_without_write_access_is_offered_no_actions(acme: dict[str, Any], policy: Memory) -> None:
    response = signed_in(acme["contractor"]).get(f"/memories/{policy.pk}/")
    html = html_of(response)
    assert response.status_code == 200
    assert "API rate limiting policy" in html
    assert "/edit/" not in html and "redact-dialog" not in html and "Redact…" not in html
    assert "Copy link" in html
    assert "You can read it but not change it." in html
    # …and posting anyway is refused.
    contractor = signed_in(acme["contractor"])
    assert contractor.get(f"/memories/{policy.pk}/edit/").status_code == 403
    assert contractor.post(f"/memories/{policy.pk}/edit/", {"content": "hijacked"}).status_code == 403
    assert contractor.post(f"/memories/{policy.pk}/redact/", {"reason": "because"}).status_code == 403
    policy.refresh_from_db()
    assert policy.status == "active" and "hijacked" not in policy.content


def test_contractor_gets_404_for_an_executive_memory_like_for_a_missing_one(acme: dict[str, Any], secret: Memory) -> None:
    contractor = signed_in(acme["contractor"])
    forbidden = contractor.get(f"/memories/{secret.pk}/")
    missing = contractor.get(f"/memories/{uuid.uuid4()}/")
    assert forbidden.status_code == missing.status_code == 404
    assert "Initech" not in html_of(forbidden)
    assert "couldn’t find that page" in html_of(forbidden) and "couldn’t find that page" in html_of(missing)
    for suffix in ("edit/", "redact/"):
        assert contractor.get(f"/memories/{secret.pk}/{suffix}").status_code == 404
        assert contractor.post(f"/memories/{secret.pk}/{suffix}", {"reason": "x", "content": "x"}).status_code == 404


def test_outsider_gets_404_for_every_memory_page(acme: dict[str, Any], outsider: Membership, policy: Memory) -> None:
    client = signed_in(outsider)
    for path in (f"/memories/{policy.pk}/", f"/memories/{policy.pk}/edit/", f"/memories/{policy.pk}/redact/"):
        assert client.get(path).status_code == 404, path
    assert client.post(f"/memories/{policy.pk}/redact/", {"reason": "x"}).status_code == 404
    policy.refresh_from_db()
    assert policy.status == "active"


def test_signed_out_visitors_are_sent_to_sign_in(policy: Memory) -> None:
    for path in ("/memories/", f"/memories/{policy.pk}/", "/memories/new/"):
        response = Client().get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next="), path
    # An htmx request (search as you type after the session ended) reloads the whole page to sign in.
    response = Client().get("/memories/?q=rate", headers={"HX-Request": "true", "HX-Target": "memory-results"})
    assert response.status_code == 200 and response["HX-Redirect"] == "/login/?next=/memories/%3Fq%3Drate"


# -- supersede and the chain ------------------------------------------------------------------------------


def test_edit_as_new_version_supersedes_and_both_show_the_chain(acme: dict[str, Any], policy: Memory) -> None:
    client = signed_in(acme["employee"])
    form = html_of(client.get(f"/memories/{policy.pk}/edit/"))
    assert "All external API endpoints" in form and 'value="api, security"' in form
    response = client.post(
        f"/memories/{policy.pk}/edit/",
        {
            "title": "API rate limiting policy (2025)",
            "content": "Rate limit: 2,000 requests per minute per token.",
            "scope": "engineering",
            "category": "policy",
            "tags": "api, security",
            "clearance_min": "Contractor",
            "source_url": "",
            "valid_from": "",
            "valid_until": "",
        },
    )
    assert response.status_code == 302
    newer = Memory.objects.get(supersedes=policy)
    assert response["Location"] == f"/memories/{newer.pk}/"
    policy.refresh_from_db()
    assert policy.status == "superseded" and policy.superseded_by_id == newer.pk

    new_page = html_of(client.get(f"/memories/{newer.pk}/"))
    assert "Versions, oldest first" in new_page
    assert f'href="/memories/{policy.pk}/"' in new_page and "This version" in new_page
    old_page = html_of(client.get(f"/memories/{policy.pk}/"))
    assert "You are looking at an older version" in old_page and f'href="/memories/{newer.pk}/"' in old_page
    assert "/edit/" not in old_page  # only the active version is edited


def test_chain_stops_at_a_version_the_reader_cannot_see(acme: dict[str, Any], policy: Memory) -> None:
    hidden = memory_supersede(
        principal=principal(acme["manager"]),
        memory_id=policy.pk,
        changes={"content": "Manager-only revision.", "clearance_min": "Manager"},
    ).memory
    html = html_of(signed_in(acme["contractor"]).get(f"/memories/{policy.pk}/"))
    assert str(hidden.pk) not in html and "Manager-only" not in html
    assert "This is the only version" in html


def test_bad_edit_keeps_the_values_and_shows_errors_inline(acme: dict[str, Any], policy: Memory) -> None:
    response = signed_in(acme["employee"]).post(
        f"/memories/{policy.pk}/edit/",
        {
            "title": "Kept title",
            "content": "Kept content",
            "scope": "engineering",
            "category": "Not A Category!",
            "tags": "bad tag with spaces",
            "clearance_min": "Contractor",
            "valid_from": "2025-01-02T10:00",
            "valid_until": "2024-01-01T10:00",
        },
    )
    assert response.status_code == 400
    html = html_of(response)
    assert 'value="Kept title"' in html and "Kept content" in html
    assert 'id="id_category_error"' in html and "not valid" in html
    assert not Memory.objects.filter(supersedes=policy).exists()


# -- redact -----------------------------------------------------------------------------------------------


def test_redact_with_a_reason_removes_the_content_and_keeps_who_and_why(acme: dict[str, Any], policy: Memory) -> None:
    client = signed_in(acme["employee"])
    assert client.post(f"/memories/{policy.pk}/redact/", {"reason": ""}).status_code == 400
    response = client.post(f"/memories/{policy.pk}/redact/", {"reason": "Contained a customer's name"})
    assert response.status_code == 302 and response["Location"] == f"/memories/{policy.pk}/"
    html = html_of(client.get(f"/memories/{policy.pk}/"))
    assert "Redacted" in html and "Contained a customer&#x27;s name" in html
    assert "1,200 requests" not in html
    assert "Redact…" not in html and "/edit/" not in html
    assert "API rate limiting policy" not in html_of(client.get("/memories/"))


def test_redact_page_works_without_javascript(acme: dict[str, Any], policy: Memory) -> None:
    response = signed_in(acme["employee"]).get(f"/memories/{policy.pk}/redact/")
    assert response.status_code == 200
    assert 'name="reason"' in html_of(response) and 'name="csrfmiddlewaretoken"' in html_of(response)


def test_admin_may_redact_a_memory_in_a_scope_they_only_read(acme: dict[str, Any], make_member: Any) -> None:
    memory = remember(acme["exec"], "The handbook says hello.", title="Handbook hello", scope="handbook")
    reader = make_member(acme["org"], "Executive", admin=True)
    html = html_of(signed_in(reader).get(f"/memories/{memory.pk}/"))
    assert "Redact…" in html and "/edit/" not in html


def test_redacted_memory_is_already_redacted(acme: dict[str, Any], policy: Memory) -> None:
    memory_redact(principal=principal(acme["employee"]), memory_id=policy.pk, reason="old")
    response = signed_in(acme["employee"]).post(f"/memories/{policy.pk}/redact/", {"reason": "again"})
    assert response.status_code == 302


# -- every page: CSRF and no inline script --------------------------------------------------------------------


def test_pages_carry_csrf_on_every_form_and_no_inline_script(acme: dict[str, Any], policy: Memory) -> None:
    client = signed_in(acme["employee"])
    for path in (
        "/memories/",
        f"/memories/{policy.pk}/",
        f"/memories/{policy.pk}/edit/",
        f"/memories/{policy.pk}/redact/",
        "/memories/?q=rate",
    ):
        html = html_of(client.get(path))
        for form in re.findall(r"<form\b[^>]*>.*?</form>", html, re.DOTALL):
            if 'method="post"' in form:
                assert "csrfmiddlewaretoken" in form, (path, form[:200])
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), path
        assert not re.search(r"\son[a-z]+\s*=", html, re.IGNORECASE), path


def test_posts_without_csrf_are_refused(acme: dict[str, Any], policy: Memory) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(acme["employee"].user)
    assert client.post(f"/memories/{policy.pk}/redact/", {"reason": "no token"}).status_code == 403
    assert client.post("/memories/new/", {"content": "no token"}).status_code == 403
    policy.refresh_from_db()
    assert policy.status == "active"


# -- conflicts on the detail page ---------------------------------------------------------------------------


def test_detail_lists_conflicts_only_when_the_reader_can_see_both_memories(
    acme: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    from memories.models import Conflict, Organization

    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy=Organization.ConflictPolicy.MANUAL)
    with django_capture_on_commit_callbacks(execute=True):
        older = remember(
            acme["manager"],
            "The public API rate limit is 100 requests per minute per API key.",
            title="Public API rate limit",
            scope="engineering",
        )
    with django_capture_on_commit_callbacks(execute=True):
        newer = remember(
            acme["employee"],
            "The public API rate limit is 250 requests per minute per API key.",
            title="Public API rate limit (new)",
            scope="engineering",
        )
    conflict = Conflict.objects.get()
    assert {conflict.new_memory_id, conflict.existing_memory_id} == {older.pk, newer.pk}

    html = html_of(signed_in(acme["employee"]).get(f"/memories/{newer.pk}/"))
    section = html.split('id="conflicts-title"')[1]
    assert f'href="/memories/{older.pk}/"' in section and "Open" in section
    assert 'href="/conflicts/"' in section and f'href="/conflicts/{conflict.pk}/"' in section

    # Once the older memory is above the contractor's clearance, the conflict is not shown at all.
    memory_patch(principal=principal(acme["manager"]), memory_id=older.pk, changes={"clearance_min": "Manager"})
    contractor_view = html_of(signed_in(acme["contractor"]).get(f"/memories/{newer.pk}/"))
    assert str(older.pk) not in contractor_view
    assert "No conflicts involve this memory." in contractor_view
