"""Invisible writes move nothing: after memories are added everywhere a principal cannot read (other
scopes, higher rungs, the other organization) — with their entities and conflicts — every list, count,
facet, chart, recall score and page that principal sees is exactly what it was before.

This catches what canary strings cannot: a count or a facet that includes hidden rows, and ranking
statistics (word rarity, the pool's strongest candidate) computed over more than the reader may see.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

import pytest
from django.test import Client

from hardening.leaks.channels import rest
from hardening.leaks.world import ACME_SCOPES, RUNGS, SHARED_QUERY, World
from memories.access import Principal
from memories.services.memories import MemoryDraft, memory_create

pytestmark = pytest.mark.django_db

REST_VIEWS = [
    ("GET", "/api/memories", {"limit": 50}),
    ("GET", "/api/memories", {"limit": 50, "status": "all"}),
    ("POST", "/api/recall", {"query": SHARED_QUERY, "limit": 50}),
    ("POST", "/api/recall", {"query": "falcon codeword ticket", "limit": 50}),
    ("GET", "/api/entities", {"limit": 50}),
    ("GET", "/api/conflicts", {"status": "all"}),
    ("GET", "/api/scopes", None),
]
PAGES = [
    ("/", None),
    ("/memories/", None),
    ("/memories/", {"q": SHARED_QUERY}),
    ("/entities/", None),
    ("/conflicts/", {"status": "all"}),
    ("/activity/", None),
]
READERS = ("contractor", "employee", "manager", "mgradmin", "lonely", "dual@acme", "employee/engineering")


def _rounded(value: Any) -> Any:
    # Recency moves by ~3e-7 a second between the two readings; anything a hidden row moves is far larger.
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items() if k not in ("request_id", "took_ms", "timings")}
    return value


def _page(text: str, request_id: str) -> str:
    text = text.replace(request_id, "")
    text = re.sub(r'nonce="[^"]*"', "", text)
    text = re.sub(r'("X-CSRFToken": ")[^"]*', r"\1", text)
    text = re.sub(r'(csrfmiddlewaretoken" value=")[^"]*', r"\1", text)
    text = re.sub(r'("csrf[-_]token"[^>]*content=")[^"]*', r"\1", text)
    text = re.sub(r"(<time[^>]*>)[^<]*(</time>)", r"\1\2", text)  # "just now" becomes "1 minute ago"
    text = re.sub(r"· \d+ ms", "", text)  # how long the search took
    # The activity badge counts what is new since the activity page was last opened — which the reading does.
    # so do the activity page's "New" marks.
    text = re.sub(r'<span class="badge badge-accent">New</span>', "", text)
    return re.sub(r'<span class="badge[^"]*" data-activity-badge>.*?</span></span>', "", text)


def _reading(world: World, key: str) -> dict[str, Any]:
    who = world.principals[key]
    ask = rest(who)
    seen: dict[str, Any] = {}
    for method, path, data in REST_VIEWS:
        answer = ask((method, path, data))
        assert answer.status == 200, (path, answer.text[:300])
        seen[f"{method} {path} {data}"] = _rounded(json.loads(answer.text))
    if key in world.sessions:
        browser = Client()
        browser.force_login(world.members[f"{who.org}:{key.split('@')[0]}"].user)
        for path, query in PAGES:
            response = browser.get(path, query or {})
            assert response.status_code == 200, path
            seen[f"page {path} {query}"] = _page(response.content.decode(), response["X-Request-ID"])
    return seen


def _write_where_hidden(world: World, key: str, django_capture_on_commit_callbacks: Any) -> int:
    """As the executive (and Globex's admin): a memory at every (scope, rung) the reader cannot read, with
    the words the reader searches for, and a near-copy of a memory it can read (a conflict it cannot see)."""
    who = world.principals[key]
    writers = {"acme": Principal(world.members["acme:exec"]), "globex": Principal(world.members["globex:gadmin"])}
    written = 0
    with django_capture_on_commit_callbacks(execute=True):
        for scope in ACME_SCOPES:
            for rung, name in enumerate(RUNGS):
                if scope in who.readable and rung <= who.rung:
                    continue
                content = f"The {SHARED_QUERY} falcon codeword ticket HID-{written + 1}: hidden {scope} {name} figures."
                draft = MemoryDraft(content=content, scope=scope, clearance_min=name, tags=["falcon", "hidden"])
                memory_create(principal=writers["acme"], draft=draft)
                written += 1
        for scope, name in (("public-docs", "Contractor"), ("g-secret", "Executive")):
            draft = MemoryDraft(
                content=f"The {SHARED_QUERY} at Globex, falcon codeword ticket GLX-{written}.", scope=scope, clearance_min=name
            )
            memory_create(principal=writers["globex"], draft=draft)
            written += 1
    return written


@pytest.mark.parametrize("key", READERS)
def test_hidden_writes_move_nothing_the_reader_sees(world: World, key: str, django_capture_on_commit_callbacks: Any) -> None:
    before = _reading(world, key)
    assert _write_where_hidden(world, key, django_capture_on_commit_callbacks) > 0
    after = _reading(world, key)
    changed = {view: _difference(before[view], after[view]) for view in before if before[view] != after[view]}
    assert not changed, f"{key}: a hidden write changed {changed}"


def _difference(before: Any, after: Any) -> str:
    if isinstance(before, str):
        lines = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        return " | ".join(list(lines)[2:12])
    return f"{json.dumps(before)[:600]} -> {json.dumps(after)[:600]}"


def test_a_visible_write_does_move_what_the_reader_sees(world: World, django_capture_on_commit_callbacks: Any) -> None:
    # The control: the same kind of write, in a scope and rung the reader may read, changes its reading.
    before = _reading(world, "employee")
    with django_capture_on_commit_callbacks(execute=True):
        memory_create(
            principal=Principal(world.members["acme:exec"]),
            draft=MemoryDraft(
                content=f"The {SHARED_QUERY} falcon codeword ticket VIS-1.", scope="engineering", clearance_min="Employee"
            ),
        )
    after = _reading(world, "employee")
    assert before["GET /api/memories {'limit': 50}"] != after["GET /api/memories {'limit': 50}"]
    assert (
        before[f"POST /api/recall {{'query': '{SHARED_QUERY}', 'limit': 50}}"]
        != after[f"POST /api/recall {{'query': '{SHARED_QUERY}', 'limit': 50}}"]
    )
