"""The Google Drive source against a loopback Drive: first-run window, cap and continuation,
Docs export, downloaded files through Cortex's extraction, the change feed (edit → supersede;
removed, trashed, unshared, moved away → redact), failures, and an outsider who sees nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from document_files import make_docx, make_pdf
from support import principal
from support.drive_files import FakeDrive
from support.stub_server import Received, StubResponse, StubServer

from connectors.models import Connector, ConnectorItem, SyncRun
from connectors.registry import source_for
from connectors.selectors import access_connector
from connectors.services import backoff
from connectors.services.connectors import connector_create
from cortex_site.errors import NotFound
from memories.models import Memory

pytestmark = pytest.mark.django_db
FOLDER = "0AbCdEfGhIjKlUk9PVA"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def connector(
    acme: dict[str, Any], stub_server: StubServer, google_credentials: Callable[[], dict[str, str]]
) -> Callable[..., Connector]:
    def make(per_run_cap: int | None = None, **config: Any) -> Connector:
        return connector_create(
            principal=principal(acme["exec"]),
            kind="drive",
            name="Team Drive",
            config={"api_url": stub_server.url, **config},  # the root, as the setup form suggests; drive/v3/ is added
            credentials=google_credentials(),
            scope="engineering",
            per_run_cap=per_run_cap,
        ).connector

    return make


def pull(connector: Connector, checkpoint: dict[str, Any], *, limit: int = 4) -> Any:
    return source_for(connector).fetch_page(checkpoint, limit=limit, first_run_since=now() - timedelta(days=3))


def memory_of(connector: Connector, file_id: str) -> Memory:
    item = ConnectorItem.objects.get(connector=connector, external_id=file_id)
    assert item.memory_id is not None
    return Memory.objects.get(pk=item.memory_id)


def test_first_run_exports_docs_modified_in_the_last_three_days(drive: FakeDrive, connector: Callable[..., Connector]) -> None:
    drive.put("Ancient plan", "old", modified=now() - timedelta(days=10))
    doc = drive.put("Release checklist", "1. Tag\n2. Announce", modified=now() - timedelta(hours=2))
    page = pull(connector(), {})
    assert [i.external_id for i in page.items] == [doc["id"]]
    item = page.items[0]
    assert item.content == "1. Tag\n2. Announce"  # the export's byte order mark is gone
    assert item.title == "Release checklist"
    assert item.source_url == doc["webViewLink"]
    assert (item.author_name, item.author_email) == ("Ada Lovelace", "ada@acme.test")
    assert item.valid_from == datetime.fromisoformat(doc["modifiedTime"].replace("Z", "+00:00"))
    assert page.done and page.checkpoint["changes"]["mode"] == "changes"


def test_an_api_url_that_already_names_drive_v3_is_used_as_it_is(
    drive: FakeDrive, connector: Callable[..., Connector], stub_server: StubServer
) -> None:
    doc = drive.put("Spec", "v3 path", modified=now())
    page = pull(connector(api_url=f"{stub_server.url}/drive/v3/"), {})
    assert [i.external_id for i in page.items] == [doc["id"]]


def test_docx_pdf_and_markdown_files_go_through_cortex_extraction(drive: FakeDrive, connector: Callable[..., Connector]) -> None:
    drive.put("Pricing.docx", make_docx(["Enterprise tier is 40 EUR per seat."]), modified=now(), mime=DOCX)
    drive.put("Runbook.pdf", make_pdf([["Restart the queue first."]]), modified=now(), mime="application/pdf")
    drive.put("notes", "# Notes\n\nShip on Friday.", modified=now(), mime="text/markdown")
    drive.put("logo.png", b"\x89PNG", modified=now(), mime="image/png")
    texts = {i.title: i.content for i in pull(connector(), {}).items}
    assert texts == {
        "Pricing.docx": "Enterprise tier is 40 EUR per seat.",
        "Runbook.pdf": "Restart the queue first.",
        "notes": "# Notes\n\nShip on Friday.",
    }


def test_the_cap_and_checkpoint_continue_the_listing_across_pages(drive: FakeDrive, connector: Callable[..., Connector]) -> None:
    docs = [drive.put(f"Doc {n}", f"text {n}", modified=now() - timedelta(minutes=n)) for n in range(6)]
    source = connector()
    first = pull(source, {}, limit=4)
    assert len(first.items) == 4 and not first.done
    second = pull(source, first.checkpoint, limit=4)
    assert len(second.items) == 2 and second.done
    assert sorted(i.external_id for i in first.items + second.items) == sorted(d["id"] for d in docs)


def test_a_folder_filter_reads_only_that_folder(drive: FakeDrive, connector: Callable[..., Connector]) -> None:
    drive.put("Elsewhere", "x", modified=now(), folder="0OtherFolder")
    inside = drive.put("Inside", "y", modified=now())
    assert [i.external_id for i in pull(connector(folder_id=FOLDER), {}).items] == [inside["id"]]


def test_a_folder_id_with_quote_characters_is_refused(
    acme: dict[str, Any], google_credentials: Callable[[], dict[str, str]]
) -> None:
    from cortex_site.errors import Unprocessable

    with pytest.raises(Unprocessable) as caught:
        connector_create(
            principal=principal(acme["exec"]),
            kind="drive",
            name="x",
            config={"folder_id": "a' or '1'='1"},
            credentials=google_credentials(),
        )
    assert caught.value.error_code == "INVALID_FOLDER_ID"


def test_edits_supersede_and_removed_trashed_unshared_or_moved_files_redact(
    drive: FakeDrive, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    edited = drive.put("Plan", "Launch on Monday.", modified=now() - timedelta(hours=1))
    deleted = drive.put("Scratch", "temporary", modified=now() - timedelta(hours=1))
    trashed = drive.put("Old pricing", "10 EUR", modified=now() - timedelta(hours=1))
    moved = drive.put("Moved away", "stays?", modified=now() - timedelta(hours=1))
    source = connector(per_run_cap=20, folder_id=FOLDER)
    first = run_sync(source)
    assert (first.status, first.items_created) == (SyncRun.Status.SUCCEEDED, 4)
    original = memory_of(source, edited["id"])

    drive.put("Plan", "Launch on Friday.", modified=now(), file_id=edited["id"], editor=("Mo Ahmed", "mo@acme.test"))
    drive.remove(deleted["id"])
    drive.trash(trashed["id"])
    drive.move(moved["id"], "0OtherFolder")
    drive.remove("1neverSeenByCortex")  # not ours: ignored, not counted against the cap
    second = run_sync(source)
    assert second.status == SyncRun.Status.SUCCEEDED
    assert (second.items_updated, second.items_redacted, second.items_skipped) == (1, 3, 0)

    original.refresh_from_db()
    current = memory_of(source, edited["id"])
    assert original.status == Memory.Status.SUPERSEDED and original.superseded_by_id == current.pk
    assert current.content == "Launch on Friday." and current.author_name == "Mo Ahmed"
    for file in (deleted, trashed, moved):
        memory = Memory.objects.get(external_id=file["id"], organization=source.organization)
        assert memory.status == Memory.Status.REDACTED
    third = run_sync(source)
    assert (third.items_created, third.items_updated, third.items_redacted) == (0, 0, 0)


def test_a_file_too_large_is_a_failure_of_that_file_only(
    drive: FakeDrive, connector: Callable[..., Connector], settings: Any
) -> None:
    settings.CORTEX_MAX_UPLOAD_BYTES = 1000
    drive.put("Huge.txt", "x" * 5000, modified=now(), mime="text/plain")
    fine = drive.put("Small", "ok", modified=now())
    page = pull(connector(), {})
    assert [i.external_id for i in page.items] == [fine["id"]]
    assert len(page.failures) == 1 and "Huge.txt" in page.failures[0][1] and "limit" in page.failures[0][1]
    assert not any(r.path.endswith("alt=media") or r.query.get("alt") == "media" for r in drive.stub.received)


def test_a_revoked_grant_puts_the_connector_in_error_with_a_sentence(
    drive: FakeDrive, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    stub_server.route(
        "POST",
        "/token",
        StubResponse(status=400, json={"error": "invalid_grant", "error_description": "Token has been expired or revoked."}),
    )
    source = connector()
    run = run_sync(source)
    source.refresh_from_db()
    assert run.status == SyncRun.Status.FAILED
    assert source.status == Connector.Status.ERROR
    assert "reconnect the Google account" in source.last_error and "invalid_grant" in source.last_error


def test_a_429_sets_the_shared_backoff_and_the_page_waits(
    drive: FakeDrive, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    drive.put("Doc", "text", modified=now())
    stub_server.route(
        "GET",
        "/drive/v3/files",
        StubResponse(status=429, headers={"Retry-After": "30"}, json={"error": {"code": 429, "message": "Rate Limit Exceeded"}}),
    )
    source = connector()
    run = run_sync(source)
    assert run.status == SyncRun.Status.RUNNING and "Retrying in 30 s" in run.error
    assert 25 < backoff.remaining(source.pk) <= 30
    assert Memory.objects.filter(organization=source.organization, source="Google Drive").count() == 0


def test_an_outsider_sees_neither_the_connector_nor_its_memories(
    drive: FakeDrive,
    connector: Callable[..., Connector],
    run_sync: Callable[..., SyncRun],
    outsider: Any,
    api: Callable[..., Any],
) -> None:
    doc = drive.put("Board minutes", "Confidential: acquisition talks.", modified=now())
    source = connector()
    run_sync(source)
    memory = memory_of(source, doc["id"])
    with pytest.raises(NotFound):
        access_connector(principal(outsider), source.pk)
    client = api(outsider)
    assert client.get(f"/api/memories/{memory.pk}").status_code == 404
    listed = client.get("/api/memories").json()
    assert all(m["id"] != str(memory.pk) for m in listed.get("results", listed.get("memories", [])))


def test_test_connection_names_the_account(drive: FakeDrive, connector: Callable[..., Connector], acme: dict[str, Any]) -> None:
    from connectors.services.connectors import connector_test

    result = connector_test(principal=principal(acme["exec"]), connector_id=connector().pk)
    assert result.ok and result.message == "Connected to Google Drive as Ada Lovelace."


def test_a_doc_edited_three_times_between_runs_is_exported_once(drive: FakeDrive, connector: Callable[..., Connector]) -> None:
    doc = drive.put("Notes", "v1", modified=now() - timedelta(hours=1))
    source = connector()
    checkpoint = pull(source, {}).checkpoint
    for version in ("v2", "v3", "v4"):
        drive.put("Notes", version, modified=now(), file_id=doc["id"])
    exports_before = len(drive.stub.requests_to(f"/drive/v3/files/{doc['id']}/export"))
    page = pull(source, checkpoint)
    assert [(i.external_id, i.content) for i in page.items] == [(doc["id"], "v4")]
    assert len(drive.stub.requests_to(f"/drive/v3/files/{doc['id']}/export")) == exports_before + 1


def drive_error(reason: str, message: str) -> StubResponse:
    return StubResponse(
        status=403,
        json={"error": {"code": 403, "message": message, "errors": [{"domain": "global", "reason": reason, "message": message}]}},
    )


def test_a_doc_drive_will_not_export_fails_alone_with_drives_reason_not_an_access_hint(
    drive: FakeDrive, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    huge = drive.put("Annual report", "x", modified=now() - timedelta(hours=2))
    locked = drive.put("Locked contract", "y", modified=now() - timedelta(hours=2))
    fine = drive.put("Roadmap", "Ship the API in May.", modified=now() - timedelta(hours=1))
    refusals = {
        huge["id"]: drive_error("exportSizeLimitExceeded", "This file is too large to be exported."),
        locked["id"]: drive_error("cannotExportFile", "This file cannot be exported by the user."),
    }
    stub_server.route("GET", r"/drive/v3/files/[^/]+/export", lambda r: refusals.get(r.path.split("/")[-2]) or drive._export(r))
    source = connector()
    run = run_sync(source)
    assert (run.status, run.items_created, run.items_failed) == (SyncRun.Status.SUCCEEDED, 1, 2)
    assert memory_of(source, fine["id"]).content == "Ship the API in May."
    reasons = {f["external_id"]: f["reason"] for f in run.failures}
    assert "too large to be exported" in reasons[huge["id"]] and "cannot be exported" in reasons[locked["id"]]
    # The account's access is fine: the sentence must not send the admin to reconnect or re-grant it.
    assert not any("granted read access" in reason for reason in reasons.values())
    source.refresh_from_db()
    assert source.status == Connector.Status.ACTIVE
    assert run_sync(source).items_failed == 0  # not retried until the file changes


def test_a_shortcut_named_like_a_pdf_is_not_downloaded_or_failed(
    drive: FakeDrive, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    source = connector()
    run_sync(source)
    # A shortcut takes its target's name; it has no content of its own (Drive answers 403 fileNotDownloadable).
    shortcut = drive.put("Q3 plan.pdf", b"", modified=now(), mime="application/vnd.google-apps.shortcut")
    sheet = drive.put("Budget.txt", b"", modified=now(), mime="application/vnd.google-apps.spreadsheet")
    refused = drive_error("fileNotDownloadable", "Only files with binary content can be downloaded.")

    def get(request: Received) -> StubResponse:
        if request.query.get("alt") == "media" and request.path.rsplit("/", 1)[1] in {shortcut["id"], sheet["id"]}:
            return refused
        return drive._get(request)

    stub_server.route("GET", r"/drive/v3/files/[^/]+", get)
    run = run_sync(source)
    assert (run.status, run.items_created, run.items_failed, run.failures) == (SyncRun.Status.SUCCEEDED, 0, 0, [])
    assert not [r for r in stub_server.received if r.query.get("alt") == "media"]
