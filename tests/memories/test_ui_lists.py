"""The memories list: content previews, sort, a date range, the author typeahead — each only
within what the signed-in person may read."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import imported, remember, signed_in

from memories.models import Memory

pytestmark = pytest.mark.django_db


def backdate(memory: Memory, days: int) -> Memory:
    Memory.objects.filter(pk=memory.pk).update(created_at=timezone.now() - timedelta(days=days))
    memory.refresh_from_db()
    return memory


def titles(html: str) -> list[str]:
    return re.findall(r'class="item-title item-link-cover" href="[^"]*">([^<]+)</a>', html)


@pytest.fixture
def three(acme: dict[str, Any]) -> dict[str, Memory]:
    return {
        "old": backdate(
            remember(
                acme["employee"],
                "# Deploy window\n\nDeploys run Tuesday mornings only.",
                title="Deploy window",
                scope="engineering",
            ),
            300,
        ),
        "mid": backdate(
            remember(
                acme["employee"], "On-call hands over at 10:00 every Monday.", title="On-call handover", scope="engineering"
            ),
            60,
        ),
        "new": remember(
            acme["employee"], "Staging resets every night at 02:00 UTC.", title="Staging resets", scope="engineering"
        ),
    }


def test_rows_preview_the_content_without_repeating_the_title(acme: dict[str, Any], three: dict[str, Memory]) -> None:
    html = signed_in(acme["employee"]).get("/memories/").content.decode()
    assert '<p class="item-snippet">Deploys run Tuesday mornings only.</p>' in html
    assert "# Deploy window" not in html


def test_sort_newest_and_oldest_and_a_date_range(acme: dict[str, Any], three: dict[str, Memory]) -> None:
    ui = signed_in(acme["employee"])
    assert titles(ui.get("/memories/").content.decode()) == ["Staging resets", "On-call handover", "Deploy window"]
    assert titles(ui.get("/memories/?sort=oldest").content.decode()) == ["Deploy window", "On-call handover", "Staging resets"]
    since = (timezone.now() - timedelta(days=90)).date().isoformat()
    until = (timezone.now() - timedelta(days=30)).date().isoformat()
    assert titles(ui.get(f"/memories/?from={since}&to={until}").content.decode()) == ["On-call handover"]
    # Typed backwards it is the same days; a date that is not one is ignored, not an error.
    assert titles(ui.get(f"/memories/?from={until}&to={since}").content.decode()) == ["On-call handover"]
    assert ui.get("/memories/?from=yesterday&sort=sideways").status_code == 200


def test_oldest_first_pages_on_in_the_same_order(acme: dict[str, Any]) -> None:
    for day in range(25):
        backdate(
            remember(acme["employee"], f"Note number {day} about the build.", title=f"Build note {day:02d}", scope="engineering"),
            100 - day,
        )
    ui = signed_in(acme["employee"])
    first = ui.get("/memories/?sort=oldest").content.decode()
    assert titles(first)[:2] == ["Build note 00", "Build note 01"] and len(titles(first)) == 20
    following = re.search(r'href="(/memories/\?[^"]*cursor=[^"]+)"', first)
    assert following is not None
    rest = titles(ui.get(following.group(1).replace("&amp;", "&")).content.decode())
    assert rest == [f"Build note {n:02d}" for n in range(20, 25)]


def test_a_search_can_be_sorted_by_date_and_narrowed_to_a_range(acme: dict[str, Any], three: dict[str, Memory]) -> None:
    ui = signed_in(acme["employee"])
    newest = titles(ui.get("/memories/?q=deploys+on-call+staging&sort=newest").content.decode())
    dated = [t for t in newest if t in {"Staging resets", "On-call handover", "Deploy window"}]
    assert dated == sorted(dated, key=["Staging resets", "On-call handover", "Deploy window"].index)
    since = (timezone.now() - timedelta(days=7)).date().isoformat()
    assert "Deploy window" not in titles(ui.get(f"/memories/?q=deploy+window&from={since}").content.decode())


def test_the_author_typeahead_offers_members_and_readable_authors_only(
    acme: dict[str, Any], make_member: Any, outsider: Any
) -> None:
    acme["manager"].user.name = "Mo Lindqvist"
    acme["manager"].user.save(update_fields=["name"])
    outsider.user.name = "Morgan Outsider"
    outsider.user.save(update_fields=["name"])
    imported(
        acme["exec"],
        "Board minutes: the Q3 plan.",
        title="Board minutes",
        scope="engineering",
        author_name="Moira Board",
        clearance_min="Executive",
    )
    imported(acme["exec"], "Runbook: restart the queue.", title="Queue runbook", scope="engineering", author_name="Morris Ops")

    options = signed_in(acme["employee"]).get("/memories/authors/?author=mo").content.decode()
    assert "Mo Lindqvist" in options and "Morris Ops" in options
    assert "Moira Board" not in options  # only an Executive memory names her
    assert "Morgan Outsider" not in options  # another organization's member
    assert "Moira Board" in signed_in(acme["exec"]).get("/memories/authors/?author=mo").content.decode()
    # The list page carries the first suggestions, and picking one filters by that author.
    page = signed_in(acme["employee"]).get("/memories/").content.decode()
    assert 'list="f-author-options"' in page and "Mo Lindqvist" in page
    assert titles(signed_in(acme["employee"]).get("/memories/?author=Morris+Ops").content.decode()) == ["Queue runbook"]


def test_the_list_is_keyboard_ready_and_shows_scope_names(acme: dict[str, Any], three: dict[str, Memory]) -> None:
    html = signed_in(acme["employee"]).get("/memories/").content.decode()
    assert "data-keyboard-list" in html and 'id="memory-keys"' in html
    scope_select = re.search(r'<select id="f-scope".*?</select>', html, re.S)
    assert scope_select is not None and ">Engineering<" in scope_select.group(0)
