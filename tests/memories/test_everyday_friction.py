"""Rough edges a team hits in its first week (issue 17), each fixed and pinned here."""

from __future__ import annotations

from typing import Any

from django.test import Client
from support import assert_envelope, remember, signed_in

from memories.models import Conflict, Memory, Organization, Scope
from memories.services.documents import extract_text
from memories.services.memories import MemoryDraft, memory_create
from memories.templatetags.cortex_ui import render_markdown


# -- REST -------------------------------------------------------------------------------------------
def test_rest_refuses_a_number_where_text_belongs_and_stores_nothing(acme: dict[str, Any], api: Any) -> None:
    body = assert_envelope(api(acme["employee"]).post("/api/memories", {"content": 12345, "scope": "engineering"}), 400)
    assert body["details"]["fields"]["content"] == ["Must be a string."]
    body = assert_envelope(
        api(acme["employee"]).post("/api/memories", {"content": "ok", "title": 7, "scope": "engineering"}), 400
    )
    assert set(body["details"]["fields"]) == {"title"}
    assert not Memory.objects.exists()


def test_a_cursor_this_api_did_not_hand_out_is_a_404_that_says_so(acme: dict[str, Any], api: Any, outsider: Any) -> None:
    for who in (acme["employee"], outsider):
        # Not base64 at all, and base64 of a position that is not a timestamp.
        for path in (
            "/api/memories?cursor=not-a-cursor",
            "/api/conflicts?cursor=not-a-cursor",
            "/api/memories?cursor=cD1nYXJiYWdl",
        ):
            body = assert_envelope(api(who).get(path), 404, "INVALID_CURSOR")
            assert "cursor" in body["message"]


# -- pages ------------------------------------------------------------------------------------------
def test_opening_a_form_address_gets_a_405_page_in_words(acme: dict[str, Any]) -> None:
    response = signed_in(acme["exec"]).get("/conflicts/policy/")
    assert response.status_code == 405
    assert "POST" in response["Allow"]
    text = response.content.decode()
    assert "This address is for a form, not for opening" in text
    assert "Acme Robotics" in text  # in the app shell, with its navigation
    anonymous = Client().get("/conflicts/policy/")
    assert anonymous.status_code in {302, 405}  # sign-in first, or the same page — never a blank one
    if anonymous.status_code == 405:
        assert anonymous.content


def test_a_leading_heading_that_repeats_the_title_is_shown_once(acme: dict[str, Any], outsider: Any) -> None:
    memory = remember(
        acme["employee"], "# Deploy checklist\n\nRun the migrations first.", title="Deploy checklist", scope="engineering"
    )
    page = signed_in(acme["employee"]).get(f"/memories/{memory.pk}/").content.decode()
    assert page.count("Deploy checklist</h") == 1  # the page's <h1>, not a second heading in the content
    assert "Run the migrations first." in page
    other = remember(acme["employee"], "# Background\n\nWhy we deploy on Tuesdays.", title="Deploy days", scope="engineering")
    assert "Background</h2>" in signed_in(acme["employee"]).get(f"/memories/{other.pk}/").content.decode()
    assert signed_in(outsider).get(f"/memories/{memory.pk}/").status_code == 404


def test_the_citation_links_to_the_source_instead_of_a_button_that_does_nothing(acme: dict[str, Any]) -> None:
    linked = remember(
        acme["employee"],
        "Cursor pagination for orders.",
        scope="engineering",
        source="GitHub",
        source_url="https://github.com/acme-robotics/fleet-api/pull/412",
    )
    page = signed_in(acme["employee"]).get(f"/memories/{linked.pk}/").content.decode()
    assert '<a class="btn btn-sm" href="https://github.com/acme-robotics/fleet-api/pull/412"' in page
    assert "Open in GitHub" in page
    plain = remember(acme["employee"], "A note without a link.", scope="engineering")
    page = signed_in(acme["employee"]).get(f"/memories/{plain.pk}/").content.decode()
    assert '<span class="source-label">' in page and "Open in" not in page


def test_a_conflict_page_is_headed_by_its_two_titles_and_explains_itself_in_grammar(
    acme: dict[str, Any], principal_of: Any, django_capture_on_commit_callbacks: Any, outsider: Any
) -> None:
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    for membership, content, title in (
        (acme["manager"], "The public API rate limit is 100 requests per minute per API key.", "API limits (2024)"),
        (acme["employee"], "The public API rate limit is 250 requests per minute per API key.", "Rate limit raised"),
    ):
        with django_capture_on_commit_callbacks(execute=True):
            memory_create(
                principal=principal_of(membership), draft=MemoryDraft(content=content, title=title, scope="engineering")
            )
    conflict = Conflict.objects.get()
    page = signed_in(acme["employee"]).get(f"/conflicts/{conflict.pk}/").content.decode()
    heading = page.split("<h1", 1)[1].split("</h1>", 1)[0]
    assert "API limits (2024)" in heading and "Rate limit raised" in heading
    assert f"Why this is a {conflict.kind}" not in page or conflict.kind == "contradiction"
    assert {
        "contradiction": "Why this is a contradiction",
        "stale": "Why this is stale",
        "duplicate": "Why these are duplicates",
    }[conflict.kind] in page
    assert signed_in(outsider).get(f"/conflicts/{conflict.pk}/").status_code == 404


def test_the_upload_scope_dropdown_shows_names_not_bare_slugs(acme: dict[str, Any]) -> None:
    Scope.objects.filter(organization=acme["org"], slug="engineering").update(name="Engineering")
    page = signed_in(acme["employee"]).get("/memories/new/?tab=upload").content.decode()
    assert '<option value="engineering" selected>Engineering (engineering)</option>' in page or (
        '<option value="engineering">Engineering (engineering)</option>' in page
    )


def test_settings_scopes_offer_only_what_applies(acme: dict[str, Any], outsider: Any) -> None:
    page = signed_in(acme["exec"]).get("/settings/?tab=scopes").content.decode()
    rows = {
        slug: page.split(f'action="/settings/scopes/{slug}/"', 1)[1].split("</form>", 1)[0]
        for slug in ("public-docs", "sales", "handbook")
    }
    assert 'value="granted"' not in rows["public-docs"] and "All members (always, for public-docs)" in rows["public-docs"]
    assert "Members can write" not in rows["sales"] and "Writing needs a grant" in rows["sales"]  # a granted scope
    assert "Members can write" in rows["handbook"] and 'value="granted"' in rows["handbook"]  # all members, changeable
    # Saving the public-docs row as offered works (it was refused when the form offered "Granted").
    response = signed_in(acme["exec"]).post(
        "/settings/scopes/public-docs/", {"visibility": "all_members", "members_can_write": "on"}
    )
    assert response.status_code in {200, 302}
    assert Scope.objects.get(organization=acme["org"], slug="public-docs").visibility == "all_members"
    # Nobody else may change acme's scopes: a member who is not an admin, or another organization's admin.
    for who in (acme["employee"], outsider):
        response = signed_in(who).post("/settings/scopes/sales/", {"visibility": "all_members", "members_can_write": "on"})
        assert response.status_code in {403, 404}
    assert Scope.objects.get(organization=acme["org"], slug="sales").visibility == "granted"


# -- documents and content --------------------------------------------------------------------------
def test_a_text_file_is_titled_by_its_first_line() -> None:
    document = extract_text("notes-2025-03.txt", b"\n  Quarterly planning: warehouse B  \n\nWe agreed on three things.\n")
    assert document.title == "Quarterly planning: warehouse B"
    assert extract_text("empty-first.txt", b"\n\n\nOnly line\n").title == "Only line"


def test_single_line_breaks_are_kept_so_transcript_turns_do_not_run_together() -> None:
    html = render_markdown("Priya: Let's start.\nRaj: The Wi-Fi slipped.\nLena: Martin asked why.")
    assert html.count("<br>") == 2
    assert "Raj: The Wi-Fi slipped." in html
