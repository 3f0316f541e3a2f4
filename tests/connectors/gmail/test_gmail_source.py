"""The Gmail source against the loopback mailbox: first-run window, cap and continuation, history,
expired history ids, deletions, and the failures the framework must tell apart."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import principal
from support.gmail_mailbox import FakeMailbox
from support.stub_server import StubResponse, StubServer

from connectors.errors import PermanentSourceError, RetryableSourceError
from connectors.models import Connector, ConnectorItem, SyncRun
from connectors.registry import source_for
from connectors.selectors import access_connector
from connectors.services.connectors import connector_create
from connectors.services.sync import sync_run_page
from cortex_site.errors import NotFound
from memories.models import Memory

pytestmark = pytest.mark.django_db


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def connector(
    acme: dict[str, Any], stub_server: StubServer, gmail_credentials: Callable[[], dict[str, str]]
) -> Callable[..., Connector]:
    def make(**config: Any) -> Connector:
        return connector_create(
            principal=principal(acme["exec"]),
            kind="gmail",
            name="Ada's mail",
            config={"api_url": stub_server.url, **config},
            credentials=gmail_credentials(),
            scope="engineering",
        ).connector

    return make


def memory_of(connector: Connector, thread_id: str) -> Memory:
    item = ConnectorItem.objects.get(connector=connector, external_id=thread_id)
    assert item.memory_id is not None
    return Memory.objects.get(pk=item.memory_id)


def pull(connector: Connector, checkpoint: dict[str, Any], *, limit: int = 8, days: int = 3) -> Any:
    return source_for(connector).fetch_page(checkpoint, limit=limit, first_run_since=now() - timedelta(days=days))


def test_first_run_reads_threads_of_the_last_three_days_only(mailbox: FakeMailbox, connector: Callable[..., Connector]) -> None:
    mailbox.add(text="Old news", date=now() - timedelta(days=5), subject="Old")
    recent = mailbox.add(text="Budget approved for Q3.", date=now() - timedelta(days=1), subject="Budget")
    page = pull(connector(), {})
    assert [item.external_id for item in page.items] == [recent["threadId"]]
    item = page.items[0]
    assert item.title == "Budget"
    assert "Budget approved for Q3." in item.content
    assert (item.author_name, item.author_email) == ("Ada Lovelace", "ada@acme.test")
    assert item.source_url == f"https://mail.google.com/mail/u/0/#all/{recent['threadId']}"
    assert item.valid_from is not None and abs((item.valid_from - (now() - timedelta(days=1))).total_seconds()) < 5
    assert page.done and page.checkpoint["history"]["mode"] == "history"


def test_the_cap_stops_a_page_and_the_checkpoint_continues_where_it_stopped(
    mailbox: FakeMailbox, connector: Callable[..., Connector]
) -> None:
    sent = [mailbox.add(text=f"note {n}", date=now() - timedelta(hours=n + 1), subject=f"n{n}") for n in range(11)]
    source = connector()
    first = pull(source, {}, limit=8)
    assert len(first.items) == 8 and not first.done and first.total_hint == 3
    second = pull(source, first.checkpoint, limit=8)
    assert len(second.items) == 3 and second.done
    seen = [item.external_id for item in first.items + second.items]
    assert sorted(seen) == sorted(m["threadId"] for m in sent)  # every thread once, none twice


def test_a_new_message_in_a_thread_comes_back_through_history_with_both_messages(
    mailbox: FakeMailbox, connector: Callable[..., Connector]
) -> None:
    first = mailbox.add(text="Shall we move the launch?", date=now() - timedelta(hours=5), subject="Launch")
    source = connector()
    checkpoint = pull(source, {}).checkpoint
    mailbox.add(
        text="Yes, to Friday.\n\nOn Mon, Ada wrote:\n> Shall we move the launch?",
        date=now() - timedelta(hours=1),
        thread_id=first["threadId"],
        subject="Re: Launch",
        sender="Mo <mo@acme.test>",
    )
    page = pull(source, checkpoint)
    assert [item.external_id for item in page.items] == [first["threadId"]]
    content = page.items[0].content
    assert "Shall we move the launch?" in content and "Yes, to Friday." in content
    assert content.count("Shall we move the launch?") == 1  # the quoted copy is trimmed
    assert page.items[0].title == "Launch"
    assert page.checkpoint["history"]["history_id"] == str(mailbox.history_id)
    assert pull(source, page.checkpoint).items == []  # nothing new: nothing read


def test_history_pages_are_followed_to_the_end(mailbox: FakeMailbox, connector: Callable[..., Connector]) -> None:
    source = connector()
    checkpoint = pull(source, {}).checkpoint
    added = [mailbox.add(text=f"update {n}", date=now(), subject=f"u{n}") for n in range(5)]  # 3 history pages of 2
    page = pull(source, checkpoint)
    assert sorted(i.external_id for i in page.items) == sorted(m["threadId"] for m in added)
    assert page.done


def test_an_expired_history_id_falls_back_to_a_dated_listing(mailbox: FakeMailbox, connector: Callable[..., Connector]) -> None:
    kept = mailbox.add(text="Synced before", date=now() - timedelta(hours=2), subject="Before")
    source = connector()
    checkpoint = pull(source, {}).checkpoint
    later = mailbox.add(text="Arrived while history expired", date=now(), subject="After")
    mailbox.expire_history()
    page = pull(source, checkpoint)
    ids = [item.external_id for item in page.items]
    assert later["threadId"] in ids
    # The resync reaches back a margin before the last pass; what it re-reads is the same thread
    # with the same content (the framework turns that replay into nothing), never a second id.
    assert len(ids) == len(set(ids)) and set(ids) <= {kept["threadId"], later["threadId"]}
    assert page.done and page.checkpoint["history"]["mode"] == "history"
    assert page.checkpoint["history"]["history_id"] == str(mailbox.history_id)
    assert pull(source, page.checkpoint).items == []


def test_a_deleted_or_trashed_thread_comes_back_deleted(mailbox: FakeMailbox, connector: Callable[..., Connector]) -> None:
    gone = mailbox.add(text="to be deleted", date=now() - timedelta(hours=3), subject="a")
    binned = mailbox.add(text="to be trashed", date=now() - timedelta(hours=3), subject="b")
    source = connector()
    checkpoint = pull(source, {}).checkpoint
    mailbox.delete(gone["id"])
    mailbox.trash(binned["id"])
    page = pull(source, checkpoint)
    assert {(i.external_id, i.deleted) for i in page.items} == {(gone["threadId"], True), (binned["threadId"], True)}


def test_a_label_filter_reads_only_labelled_threads(mailbox: FakeMailbox, connector: Callable[..., Connector]) -> None:
    mailbox.add(text="inbox only", date=now() - timedelta(hours=1))
    board = mailbox.add(text="for the board", date=now() - timedelta(hours=1), labels=("INBOX", "Label_7"))
    page = pull(connector(label="Label_7"), {})
    assert [i.external_id for i in page.items] == [board["threadId"]]


def test_a_query_filter_applies_to_listing_and_to_history(mailbox: FakeMailbox, connector: Callable[..., Connector]) -> None:
    mailbox.add(text="lunch plans", date=now() - timedelta(hours=1))
    invoice = mailbox.add(text="invoice 42 attached", date=now() - timedelta(hours=1))
    source = connector(query="invoice")
    page = pull(source, {})
    assert [i.external_id for i in page.items] == [invoice["threadId"]]
    mailbox.add(text="more lunch", date=now())
    assert pull(source, page.checkpoint).items == []  # read through history, checked against the query, not stored


def test_html_only_mail_is_stored_as_text(mailbox: FakeMailbox, connector: Callable[..., Connector]) -> None:
    mailbox.add(text="Prices rise in May", date=now() - timedelta(hours=1), html=True)
    item = pull(connector(), {}).items[0]
    assert "Prices rise in May" in item.content and "<div" not in item.content


def test_a_revoked_refresh_token_is_a_permanent_error_with_a_sentence(
    mailbox: FakeMailbox, connector: Callable[..., Connector]
) -> None:
    mailbox.token_status = 400
    with pytest.raises(PermanentSourceError) as caught:
        pull(connector(), {})
    assert "reconnect the Google account" in caught.value.message
    assert "stub-secret" not in caught.value.message and "1//stub-refresh" not in caught.value.message


def test_a_401_from_the_api_is_permanent(
    mailbox: FakeMailbox, connector: Callable[..., Connector], stub_server: StubServer
) -> None:
    stub_server.route(
        "GET",
        "/gmail/v1/users/me/profile",
        StubResponse(status=401, json={"error": {"code": 401, "message": "Invalid Credentials"}}),
    )
    with pytest.raises(PermanentSourceError) as caught:
        pull(connector(), {})
    assert "401" in caught.value.message


def test_429_is_retryable_with_the_servers_retry_after(
    mailbox: FakeMailbox, connector: Callable[..., Connector], stub_server: StubServer
) -> None:
    mailbox.add(text="x", date=now())
    stub_server.route(
        "GET",
        r"/gmail/v1/users/me/threads/[^/]+",
        StubResponse(status=429, headers={"Retry-After": "17"}, json={"error": {"code": 429, "message": "Too many requests"}}),
    )
    with pytest.raises(RetryableSourceError) as caught:
        pull(connector(), {})
    assert caught.value.retry_after == 17.0


def test_credentials_without_a_refresh_token_are_refused_at_setup(acme: dict[str, Any]) -> None:
    from cortex_site.errors import Unprocessable

    with pytest.raises(Unprocessable) as caught:
        connector_create(principal=principal(acme["exec"]), kind="gmail", name="x", config={}, credentials={"client_id": "c"})
    assert caught.value.error_code == "MISSING_CREDENTIALS"


# -- through the sync service: memories, supersession, redaction, errors, outsiders -------------
def test_a_reply_supersedes_the_threads_memory_and_a_deletion_redacts_it(
    mailbox: FakeMailbox, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    thread = mailbox.add(text="Can we cut the Q3 budget by 5%?", date=now() - timedelta(hours=4), subject="Q3 budget")
    other = mailbox.add(text="Lunch on Friday?", date=now() - timedelta(hours=4), subject="Lunch")
    source = connector()
    first = run_sync(source)
    assert (first.status, first.items_created) == (SyncRun.Status.SUCCEEDED, 2)
    original = memory_of(source, thread["threadId"])
    assert (original.title, original.source, original.category) == ("Q3 budget", "Gmail", "email")

    mailbox.add(
        text="Yes, approved.", date=now(), thread_id=thread["threadId"], subject="Re: Q3 budget", sender="Mo <mo@acme.test>"
    )
    mailbox.delete(other["id"])
    second = run_sync(source)
    assert (second.status, second.items_updated, second.items_redacted) == (SyncRun.Status.SUCCEEDED, 1, 1)
    original.refresh_from_db()
    current = memory_of(source, thread["threadId"])
    assert original.status == Memory.Status.SUPERSEDED and original.superseded_by_id == current.pk
    assert "Yes, approved." in current.content and "Can we cut the Q3 budget by 5%?" in current.content
    assert Memory.objects.get(organization=source.organization, external_id=other["threadId"]).status == Memory.Status.REDACTED
    third = run_sync(source)
    assert (third.items_created, third.items_updated, third.items_redacted) == (0, 0, 0)


def test_a_run_whose_worker_died_is_resumed_from_the_checkpoint_without_loss_or_doubles(
    mailbox: FakeMailbox, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], settings: Any
) -> None:
    settings.CORTEX_CONNECTOR_PAGE_SIZE = 3
    sent = [mailbox.add(text=f"status {n}", date=now() - timedelta(hours=n + 1), subject=f"s{n}") for n in range(7)]
    source = connector()
    dead = run_sync(source, pages=1)  # the worker stops after one page of 3
    assert dead.status == SyncRun.Status.RUNNING and dead.items_created == 3
    SyncRun.objects.filter(pk=dead.pk).update(heartbeat_at=now() - timedelta(hours=1))  # its lease ran out
    resumed = run_sync(source)
    assert resumed.status == SyncRun.Status.SUCCEEDED and resumed.items_created == 4
    assert SyncRun.objects.get(pk=dead.pk).status == SyncRun.Status.FAILED
    stored = ConnectorItem.objects.filter(connector=source, deleted=False).values_list("external_id", flat=True)
    assert sorted(stored) == sorted(m["threadId"] for m in sent)
    assert Memory.objects.filter(organization=source.organization, source="Gmail").count() == 7


def test_a_revoked_grant_puts_the_connector_in_error(
    mailbox: FakeMailbox, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    mailbox.token_status = 400
    source = connector()
    run = run_sync(source)
    source.refresh_from_db()
    assert run.status == SyncRun.Status.FAILED and source.status == Connector.Status.ERROR
    assert source.last_error.startswith("Google refused to refresh the connector's access to Gmail (invalid_grant)")


def test_an_outsider_sees_neither_the_connector_nor_its_mail(
    mailbox: FakeMailbox,
    connector: Callable[..., Connector],
    run_sync: Callable[..., SyncRun],
    outsider: Any,
    api: Callable[..., Any],
    acme: dict[str, Any],
) -> None:
    thread = mailbox.add(text="Offer letter for Grace", date=now(), subject="Offer")
    source = connector()
    run_sync(source)
    memory = memory_of(source, thread["threadId"])
    with pytest.raises(NotFound):
        access_connector(principal(outsider), source.pk)
    assert api(outsider).get(f"/api/memories/{memory.pk}").status_code == 404
    insider = api(acme["exec"]).get("/api/recall", {"q": "offer letter"})
    assert [hit["memory"]["id"] for hit in insider.json()["results"]] == [str(memory.pk)]
    outside = api(outsider).get("/api/recall", {"q": "offer letter"})
    assert outside.status_code == 200 and outside.json()["results"] == []


def test_test_connection_names_the_mailbox_and_an_outsider_cannot_run_it(
    mailbox: FakeMailbox, connector: Callable[..., Connector], acme: dict[str, Any], outsider: Any
) -> None:
    from connectors.services.connectors import connector_test

    source = connector()
    result = connector_test(principal=principal(acme["exec"]), connector_id=source.pk)
    assert result.ok and "ada@acme.test" in result.message
    with pytest.raises(NotFound):
        connector_test(principal=principal(outsider), connector_id=source.pk)
    mailbox.token_status = 400
    refused = connector_test(principal=principal(acme["exec"]), connector_id=source.pk)
    assert not refused.ok and "reconnect the Google account" in refused.message


def service_account_key(token_uri: str) -> dict[str, str]:
    """A real (throwaway) RSA service account key, so google-auth really signs its JWT grant."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return {
        "type": "service_account",
        "client_email": "cortex-sync@acme-project.iam.gserviceaccount.com",
        "private_key": pem,
        "private_key_id": "k1",
        "token_uri": token_uri,
    }


def test_a_service_account_with_domain_wide_delegation_reads_the_subjects_mailbox(
    mailbox: FakeMailbox, acme: dict[str, Any], stub_server: StubServer
) -> None:
    import base64
    import json

    thread = mailbox.add(text="Delegated read", date=now() - timedelta(hours=1))
    credentials = {**service_account_key(f"{stub_server.url}/token"), "subject": "ada@acme.test"}
    source = connector_create(
        principal=principal(acme["exec"]),
        kind="gmail",
        name="Ada via delegation",
        config={"api_url": stub_server.url},
        credentials=credentials,
    ).connector
    page = pull(source, {})
    assert [i.external_id for i in page.items] == [thread["threadId"]]
    grant = stub_server.requests_to("/token")[0].form()
    assert grant["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    claims = json.loads(base64.urlsafe_b64decode(grant["assertion"].split(".")[1] + "=="))
    assert (claims["iss"], claims["sub"]) == ("cortex-sync@acme-project.iam.gserviceaccount.com", "ada@acme.test")
    assert claims["scope"] == "https://www.googleapis.com/auth/gmail.readonly"


def test_a_gmail_service_account_without_a_subject_or_with_a_broken_key_is_refused(acme: dict[str, Any]) -> None:
    from cortex_site.errors import Unprocessable

    key = service_account_key("https://oauth2.googleapis.com/token")
    with pytest.raises(Unprocessable) as caught:
        connector_create(principal=principal(acme["exec"]), kind="gmail", name="x", config={}, credentials=key)
    assert caught.value.error_code == "MISSING_CREDENTIALS" and "subject" in caught.value.message
    with pytest.raises(Unprocessable) as caught:
        connector_create(
            principal=principal(acme["exec"]),
            kind="gmail",
            name="x",
            config={},
            credentials={
                **key,
                "subject": "ada@acme.test",
                "private_key": "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n",
            },
        )
    assert caught.value.error_code == "INVALID_CREDENTIALS"
    assert "nope" not in caught.value.message


def test_per_message_mode_stores_each_message_and_redacts_one_that_is_trashed(
    mailbox: FakeMailbox, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    first = mailbox.add(text="Kick-off is on Monday.", date=now() - timedelta(hours=3), subject="Kick-off")
    second = mailbox.add(
        text="Moved to Tuesday.", date=now() - timedelta(hours=2), thread_id=first["threadId"], subject="Re: Kick-off"
    )
    source = connector(per_message=True)
    run = run_sync(source)
    assert run.items_created == 2
    ids = {f"{first['threadId']}/{first['id']}", f"{first['threadId']}/{second['id']}"}
    assert set(ConnectorItem.objects.filter(connector=source).values_list("external_id", flat=True)) == ids
    assert memory_of(source, f"{first['threadId']}/{second['id']}").content == "Moved to Tuesday."
    mailbox.trash(second["id"])
    after = run_sync(source)
    assert (after.items_redacted, after.items_created, after.items_updated) == (1, 0, 0)
    redacted = Memory.objects.get(organization=source.organization, external_id=f"{first['threadId']}/{second['id']}")
    assert redacted.status == Memory.Status.REDACTED
    assert memory_of(source, f"{first['threadId']}/{first['id']}").status == Memory.Status.ACTIVE


def test_a_5xx_is_retryable(mailbox: FakeMailbox, connector: Callable[..., Connector], stub_server: StubServer) -> None:
    stub_server.route(
        "GET", "/gmail/v1/users/me/profile", StubResponse(status=503, json={"error": {"code": 503, "message": "Backend Error"}})
    )
    with pytest.raises(RetryableSourceError) as caught:
        pull(connector(), {})
    assert "503" in caught.value.message and caught.value.retry_after is None


def test_a_slow_answer_times_out_as_retryable(
    mailbox: FakeMailbox, connector: Callable[..., Connector], stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("connectors.sources.gmail.google_http.TIMEOUT_SECONDS", 0.3)
    stub_server.route("GET", "/gmail/v1/users/me/profile", StubResponse(json={"historyId": "1"}, delay=3.0))
    with pytest.raises(RetryableSourceError) as caught:
        pull(connector(), {})
    assert "could not be reached" in caught.value.message


def test_mail_arriving_while_history_pages_are_read_is_never_skipped(
    mailbox: FakeMailbox, connector: Callable[..., Connector], stub_server: StubServer
) -> None:
    source = connector()
    checkpoint = pull(source, {}).checkpoint
    for n in range(3):  # two history pages of two records
        mailbox.add(text=f"before {n}", date=now(), subject=f"b{n}")
    position_before = mailbox.history_id
    late: list[dict[str, Any]] = []

    def history(request: Any) -> StubResponse:
        answer = mailbox._history(request)
        if not late:  # a message lands right after the first page was answered
            late.append(mailbox.add(text="arrived mid-pass", date=now(), subject="late"))
        return answer

    stub_server.route("GET", "/gmail/v1/users/me/history", history)
    first = pull(source, checkpoint)
    # The pass resumes from where the mailbox stood at its first page, not from a later page's position.
    assert first.done and first.checkpoint["history"]["history_id"] == str(position_before)
    second = pull(source, first.checkpoint)
    assert late[0]["threadId"] in {i.external_id for i in first.items + second.items}
    assert second.checkpoint["history"]["history_id"] == str(mailbox.history_id)


def test_a_malformed_encoded_word_in_a_subject_does_not_stop_the_sync(
    mailbox: FakeMailbox, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    broken = mailbox.add(text="Invoice attached.", date=now() - timedelta(hours=2))
    headers = broken["payload"]["headers"]
    for header in headers:  # a sender's mail tool cut the encoded word short
        if header["name"] == "Subject":
            header["value"] = "=?UTF-8?B?SW52b2ljZSAjN?="
        if header["name"] == "From":
            header["value"] = "=?utf-8?B?QWRh?= <ada@acme.test>"
    healthy = mailbox.add(text="Lunch on Friday?", date=now() - timedelta(hours=1), subject="Lunch")
    source = connector()
    run = run_sync(source)
    assert (run.status, run.items_created) == (SyncRun.Status.SUCCEEDED, 2), run.error
    assert memory_of(source, healthy["threadId"]).title == "Lunch"
    stored = memory_of(source, broken["threadId"])
    # The undecodable subject is kept as sent; the sender's well-formed name still decodes.
    assert stored.title == "=?UTF-8?B?SW52b2ljZSAjN?="
    assert "Invoice attached." in stored.content and "From: Ada <ada@acme.test>" in stored.content
    again = run_sync(source)
    assert (again.status, again.items_created, again.items_updated) == (SyncRun.Status.SUCCEEDED, 0, 0)


def test_an_unsent_draft_reply_is_not_stored_with_the_thread(
    mailbox: FakeMailbox, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    thread = mailbox.add(text="Can we ship on Friday?", date=now() - timedelta(hours=3), subject="Ship date")
    source = connector()
    run_sync(source)
    # Gmail keeps a reply being written as a message with the DRAFT label in the thread, saved as it is typed.
    mailbox.add(text="Honestly I think this release is a mess", date=now(), thread_id=thread["threadId"], labels=("DRAFT",))
    second = run_sync(source)
    assert (second.status, second.items_updated) == (SyncRun.Status.SUCCEEDED, 0)
    content = memory_of(source, thread["threadId"]).content
    assert "Can we ship on Friday?" in content and "mess" not in content
    draft_only = mailbox.add(text="Note to self: salary numbers", date=now(), labels=("DRAFT",), subject="draft")
    third = run_sync(source)
    assert third.items_created == 0
    assert not ConnectorItem.objects.filter(connector=source, external_id=draft_only["threadId"], memory__isnull=False).exists()


def test_an_outage_page_from_the_token_endpoint_is_retried_not_taken_for_a_revoked_grant(
    mailbox: FakeMailbox, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    mailbox.add(text="Standup moved to 10:00.", date=now() - timedelta(hours=1))
    page = b"<!DOCTYPE html><html><title>Error 502 (Server Error)!!1</title><p>That's an error.</p></html>"
    stub_server.route("POST", "/token", StubResponse(status=502, body=page, headers={"Content-Type": "text/html"}))
    source = connector()
    run = run_sync(source)
    source.refresh_from_db()
    assert run.status == SyncRun.Status.RUNNING and "Retrying in" in run.error  # the page waits and runs again
    assert source.status != Connector.Status.ERROR and "reconnect" not in run.error and "<html>" not in run.error
    mailbox.install()  # the token endpoint is back: the retried page goes through
    sync_run_page(run_id=run.pk, page=0, attempt=1)
    run.refresh_from_db()
    assert (run.status, run.items_created) == (SyncRun.Status.SUCCEEDED, 1)
