"""Slack's Events API end to end: signed requests to /api/webhooks/slack/<id>, the stored delivery
processed by the task (in-process Celery), slack-sdk's WebClient calling the loopback workspace."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from support.slack_workspace import FakeSlack, envelope, fixture, fixture_bytes, sign
from support.stub_server import StubResponse

from connectors.models import Connector, ConnectorItem, Delivery
from memories.models import Memory

pytestmark = pytest.mark.django_db

GENERAL, ENG = "C06NRA6JLER", "C111"


@pytest.fixture
def connector(acme: dict[str, Any], make_slack_connector: Callable[..., Connector]) -> Connector:
    return make_slack_connector(acme["exec"])


def post(
    client: Client,
    connector: Connector,
    body: bytes,
    *,
    headers: dict[str, str] | None = None,
) -> Any:
    sent = sign(body) if headers is None else headers
    return client.post(f"/api/webhooks/slack/{connector.pk}", body, content_type="application/json", headers=sent)


def deliver(client: Client, connector: Connector, body: bytes, capture: Any, *, headers: dict[str, str] | None = None) -> Any:
    """Post and run what was enqueued on commit (the worker, in-process)."""
    with capture(execute=True):
        return post(client, connector, body, headers=headers)


def message_event(channel: str, ts: str, text: str, *, user: str = "U111", event_id: str | None = None, **extra: Any) -> bytes:
    """The recorded event_callback capture, re-addressed to another message."""
    body = fixture("event_callback__message")
    event = body["event"]
    event.update(channel=channel, ts=ts, event_ts=ts, text=text, user=user, **extra)
    event.pop("blocks", None)
    body["event_id"] = event_id or f"Ev{ts.replace('.', '')}"
    return json.dumps(body).encode()


def memories_for(connector: Connector) -> list[Memory]:
    return list(Memory.objects.filter(organization_id=connector.organization_id, source="Slack").order_by("created_at"))


def current(connector: Connector, external_id: str) -> Memory:
    item = ConnectorItem.objects.get(connector=connector, external_id=external_id)
    assert item.memory is not None
    return item.memory


def test_url_verification_is_answered_with_the_challenge(client: Client, connector: Connector) -> None:
    body = fixture_bytes("url_verification__challenge")
    response = post(client, connector, body)
    assert response.status_code == 200
    assert response.json() == {"challenge": fixture("url_verification__challenge")["challenge"]}
    assert not Delivery.objects.exists()


def test_a_message_becomes_a_memory_acting_as_the_connector(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any, api: Any, outsider: Any
) -> None:
    slack.post(GENERAL, "1719209506.817929", "Hello, this is a normal text message", user="U06NU4E26M9")
    started = time.monotonic()
    response = deliver(client, connector, fixture_bytes("event_callback__message"), django_capture_on_commit_callbacks)
    assert response.status_code == 200, response.content
    assert time.monotonic() - started < 3  # Slack's limit, with the worker's part included here

    [memory] = memories_for(connector)
    assert memory.title == "#general: Hello, this is a normal text message"
    assert memory.content == "Hello, this is a normal text message"
    assert memory.external_id == f"{GENERAL}:1719209506.817929"
    assert memory.author_name == "Grace Hopper"
    assert memory.source_url == f"https://acme.slack.com/archives/{GENERAL}/p1719209506817929"
    assert memory.valid_from is not None and memory.valid_from.timestamp() == pytest.approx(1719209506.817929)
    assert "slack" in memory.tags and "general" in memory.tags
    assert Delivery.objects.get(connector=connector).status == Delivery.Status.PROCESSED
    # The SDK asked Slack who wrote it and for the permalink, with the bot token.
    [users_call] = slack.calls("users.info")
    assert users_call.params()["user"] == "U06NU4E26M9"
    assert users_call.headers["authorization"] == "Bearer xoxb-test-bot-token"
    # Read rule: another organization's admin sees nothing of it.
    assert api(outsider).get(f"/api/memories/{memory.pk}").status_code == 404


def test_slack_retries_never_duplicate(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    body = fixture_bytes("event_callback__message")
    assert deliver(client, connector, body, django_capture_on_commit_callbacks).status_code == 200
    for retry in (1, 2):
        again = deliver(
            client,
            connector,
            body,
            django_capture_on_commit_callbacks,
            headers={**sign(body), "X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"},
        )
        assert again.status_code == 200
        assert again.json()["duplicate"] is True
    assert len(memories_for(connector)) == 1
    assert Delivery.objects.filter(connector=connector).count() == 1


@pytest.mark.parametrize(
    "change",
    [
        {"subtype": "bot_message", "bot_id": "B111"},
        {"bot_id": "B111"},  # an app posting as itself, no subtype
        {"subtype": "channel_join", "text": "<@U111> has joined the channel"},
        {"subtype": "channel_topic", "text": "set the channel topic: Launch"},
    ],
)
def test_bots_and_housekeeping_are_ignored(
    client: Client, connector: Connector, change: dict[str, str], django_capture_on_commit_callbacks: Any
) -> None:
    body = fixture("event_callback__message")
    body["event"].update(change)
    response = deliver(client, connector, json.dumps(body).encode(), django_capture_on_commit_callbacks)
    assert response.status_code == 202
    assert response.json()["ignored"] is True
    assert memories_for(connector) == []
    assert Delivery.objects.get(connector=connector).status == Delivery.Status.IGNORED


def test_a_channel_the_connector_does_not_sync_is_ignored(
    client: Client, acme: dict[str, Any], make_slack_connector: Callable[..., Connector], django_capture_on_commit_callbacks: Any
) -> None:
    connector = make_slack_connector(acme["exec"], channels=[ENG])
    response = deliver(client, connector, fixture_bytes("event_callback__message"), django_capture_on_commit_callbacks)
    assert response.status_code == 202
    assert "not synced" in response.json()["reason"]
    assert memories_for(connector) == []


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(lambda body: sign(body, secret="not-the-signing-secret"), id="wrong-secret"),
        pytest.param(lambda body: sign(body + b" "), id="body-changed"),
        pytest.param(lambda body: sign(body, timestamp=int(time.time()) - 360), id="stale-timestamp"),
        pytest.param(lambda body: sign(body, timestamp=int(time.time()) + 360), id="future-timestamp"),
        pytest.param(lambda body: {"X-Slack-Request-Timestamp": str(int(time.time()))}, id="no-signature"),
        pytest.param(lambda body: {}, id="no-headers"),
        pytest.param(lambda body: {**sign(body), "X-Slack-Request-Timestamp": "yesterday"}, id="timestamp-not-a-number"),
    ],
)
def test_unsigned_stale_or_forged_requests_are_refused_before_parsing(
    client: Client, connector: Connector, headers: Callable[[bytes], dict[str, str]], django_capture_on_commit_callbacks: Any
) -> None:
    body = fixture_bytes("event_callback__message")
    response = deliver(client, connector, body, django_capture_on_commit_callbacks, headers=headers(body))
    assert response.status_code == 401
    assert response.json()["error_code"] == "INVALID_SIGNATURE"
    assert not Delivery.objects.exists()
    assert memories_for(connector) == []


def test_a_challenge_with_a_bad_signature_is_not_echoed(client: Client, connector: Connector) -> None:
    body = fixture_bytes("url_verification__challenge")
    response = post(client, connector, body, headers=sign(body, secret="nope"))
    assert response.status_code == 401
    assert "challenge" not in response.json()


def test_thread_replies_and_an_edited_reply_supersede_the_parents_memory(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    # The recorded message_changed event edits reply 1626342128.008700 of thread 1626342092.008500 in C111.
    parent_ts, reply_ts = "1626342092.008500", "1626342128.008700"
    slack.post(ENG, parent_ts, "Shall we move the launch to Friday?")
    deliver(
        client,
        connector,
        message_event(ENG, parent_ts, "Shall we move the launch to Friday?"),
        django_capture_on_commit_callbacks,
    )
    first = current(connector, f"{ENG}:{parent_ts}")

    slack.reply(ENG, parent_ts, reply_ts, "test", user="U06NU4E26M9")
    reply = message_event(ENG, reply_ts, "test", user="U06NU4E26M9", thread_ts=parent_ts, parent_user_id="U111")
    deliver(client, connector, reply, django_capture_on_commit_callbacks)
    second = current(connector, f"{ENG}:{parent_ts}")
    assert second.pk != first.pk
    assert second.content == "Shall we move the launch to Friday?\n\nThread:\nGrace Hopper: test"
    first.refresh_from_db()
    assert first.status == Memory.Status.SUPERSEDED and first.superseded_by_id == second.pk

    slack.threads[(ENG, parent_ts)][0]["text"] = "updated message"
    edit = json.dumps(envelope(fixture("message__message_changed"), event_id="Ev0EDIT")).encode()
    assert deliver(client, connector, edit, django_capture_on_commit_callbacks).status_code == 200
    third = current(connector, f"{ENG}:{parent_ts}")
    assert third.content.endswith("Grace Hopper: updated message")
    second.refresh_from_db()
    assert second.status == Memory.Status.SUPERSEDED
    # One conversation, one active memory: replies never become memories of their own.
    active = [m for m in memories_for(connector) if m.status == Memory.Status.ACTIVE]
    assert [m.external_id for m in active] == [f"{ENG}:{parent_ts}"]


def test_an_edited_top_level_message_supersedes_its_memory(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    slack.post(GENERAL, "1719209506.817929", "Hello, this is a normal text message", user="U06NU4E26M9")
    deliver(client, connector, fixture_bytes("event_callback__message"), django_capture_on_commit_callbacks)
    before = current(connector, f"{GENERAL}:1719209506.817929")

    changed = copy.deepcopy(fixture("message__message_changed"))
    changed["channel"] = GENERAL
    for key in ("thread_ts", "parent_user_id"):
        changed["message"].pop(key)
    changed["message"].update(ts="1719209506.817929", user="U06NU4E26M9", text="Hello, the launch moved to *Friday*")
    deliver(client, connector, json.dumps(envelope(changed, event_id="Ev0EDIT2")).encode(), django_capture_on_commit_callbacks)

    after = current(connector, f"{GENERAL}:1719209506.817929")
    assert after.pk != before.pk and after.content == "Hello, the launch moved to *Friday*"
    before.refresh_from_db()
    assert before.status == Memory.Status.SUPERSEDED


def test_a_deleted_message_redacts_its_memory(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    # The recorded message_deleted event removes 1626387317.008600 from C111.
    slack.post(ENG, "1626387317.008600", "test prep")
    deliver(client, connector, message_event(ENG, "1626387317.008600", "test prep"), django_capture_on_commit_callbacks)
    memory = current(connector, f"{ENG}:1626387317.008600")

    deleted = json.dumps(envelope(fixture("message__message_deleted"), event_id="Ev0DEL")).encode()
    assert deliver(client, connector, deleted, django_capture_on_commit_callbacks).status_code == 200

    memory.refresh_from_db()
    assert memory.status == Memory.Status.REDACTED
    assert "test prep" not in memory.content
    assert Memory.objects.filter(source="Slack", status=Memory.Status.ACTIVE).count() == 0
    # Replaying the deletion changes nothing more.
    replay = json.dumps(envelope(fixture("message__message_deleted"), event_id="Ev0DEL-other-id")).encode()
    assert deliver(client, connector, replay, django_capture_on_commit_callbacks).status_code == 200
    assert Memory.objects.filter(source="Slack").count() == 1


def test_a_deleted_reply_leaves_the_thread_without_it(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    parent_ts = "1626387300.000100"
    slack.post(ENG, parent_ts, "Release checklist")
    slack.reply(ENG, parent_ts, "1626387317.008600", "test prep")
    deliver(
        client,
        connector,
        message_event(ENG, "1626387317.008600", "test prep", thread_ts=parent_ts),
        django_capture_on_commit_callbacks,
    )
    assert current(connector, f"{ENG}:{parent_ts}").content.endswith("Ada Lovelace: test prep")

    slack.threads[(ENG, parent_ts)].clear()
    deleted = fixture("message__message_deleted")
    deleted["previous_message"]["thread_ts"] = parent_ts
    deliver(client, connector, json.dumps(envelope(deleted, event_id="Ev0DELR")).encode(), django_capture_on_commit_callbacks)
    assert current(connector, f"{ENG}:{parent_ts}").content == "Release checklist"


def test_a_revoked_token_puts_the_connector_in_error_with_a_sentence(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    slack.revoked = True
    response = deliver(client, connector, fixture_bytes("event_callback__message"), django_capture_on_commit_callbacks)
    assert response.status_code == 200  # accepted; the worker found the token revoked
    connector.refresh_from_db()
    assert connector.status == Connector.Status.ERROR
    assert "revoked" in connector.last_error and "Reinstall the app" in connector.last_error
    assert "xoxb" not in connector.last_error
    assert Delivery.objects.get(connector=connector).status == Delivery.Status.FAILED
    assert memories_for(connector) == []


def test_mentions_and_links_are_readable_text(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    text = "<@U012AB3CDE> see <https://docs.acme.test/launch|the launch doc> &amp; <#C111|eng> <!here>"
    deliver(client, connector, message_event(GENERAL, "1719300000.000100", text), django_capture_on_commit_callbacks)
    [memory] = memories_for(connector)
    assert memory.content == "@Alan Turing see the launch doc (https://docs.acme.test/launch) & #eng @here"


def test_a_deleted_thread_parent_redacts_the_conversation(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    parent_ts = "1626342092.008500"
    slack.post(ENG, parent_ts, "Shall we move the launch to Friday?")
    slack.reply(ENG, parent_ts, "1626342128.008700", "test")
    deliver(
        client,
        connector,
        message_event(ENG, parent_ts, "Shall we move the launch to Friday?"),
        django_capture_on_commit_callbacks,
    )
    memory = current(connector, f"{ENG}:{parent_ts}")

    # Slack keeps a parent with replies as a "tombstone": a message_changed whose message says so.
    tombstone = fixture("message__message_changed")
    tombstone["message"] = {
        "type": "message",
        "subtype": "tombstone",
        "text": "This message was deleted.",
        "user": "USLACKBOT",
        "hidden": True,
        "ts": parent_ts,
        "thread_ts": parent_ts,
        "reply_count": 1,
    }
    deliver(client, connector, json.dumps(envelope(tombstone, event_id="Ev0TOMB")).encode(), django_capture_on_commit_callbacks)
    memory.refresh_from_db()
    assert memory.status == Memory.Status.REDACTED


def test_a_channel_that_became_private_stops_rather_than_leaking(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    # Set up as public; Slack now reports the channel as private ("group").
    body = fixture("event_callback__message")
    body["event"]["channel_type"] = "group"
    deliver(client, connector, json.dumps(body).encode(), django_capture_on_commit_callbacks)
    connector.refresh_from_db()
    assert connector.status == Connector.Status.ERROR
    assert "private" in connector.last_error and "granted scope" in connector.last_error
    assert memories_for(connector) == []


def test_the_author_is_linked_to_the_member_with_the_same_email(
    client: Client, connector: Connector, acme: dict[str, Any], make_member: Any, django_capture_on_commit_callbacks: Any
) -> None:
    grace = make_member(acme["org"], "Employee", email="grace@acme.test")  # users.info says U06NU4E26M9 is grace@acme.test
    deliver(client, connector, fixture_bytes("event_callback__message"), django_capture_on_commit_callbacks)
    [memory] = memories_for(connector)
    assert memory.author_id == grace.user_id
    assert memory.author_name == "Grace Hopper"


@pytest.mark.parametrize(
    ("body", "signature"),
    [
        pytest.param(b'{"type": "event_callback", "event": {"text": "\xff"}}', None, id="body-not-utf8"),
        pytest.param(fixture_bytes("event_callback__message"), "v0=\u00e9t\u00e9", id="signature-not-ascii"),
    ],
)
def test_a_forged_request_slack_could_not_have_sent_is_refused_not_crashed_on(
    client: Client, connector: Connector, body: bytes, signature: str | None
) -> None:
    # Anyone can send these with a current timestamp: the answer is a refusal, never a 500.
    headers = sign(b"another body")
    if signature is not None:
        headers["X-Slack-Signature"] = signature
    response = post(client, connector, body, headers=headers)
    assert response.status_code == 401
    assert response.json()["error_code"] == "INVALID_SIGNATURE"
    assert not Delivery.objects.exists()


@pytest.mark.parametrize("event", ["message", ["message"], 7], ids=["string", "list", "number"])
def test_a_signed_envelope_whose_event_is_not_an_object_is_ignored(
    client: Client, connector: Connector, event: Any, django_capture_on_commit_callbacks: Any
) -> None:
    body = json.dumps({"type": "event_callback", "event_id": "Ev0ODD", "team_id": "T111", "event": event}).encode()
    response = deliver(client, connector, body, django_capture_on_commit_callbacks)
    assert response.status_code == 202
    assert response.json()["ignored"] is True
    assert memories_for(connector) == []


def test_an_author_slack_hides_from_the_bot_is_named_by_id_and_the_connector_keeps_going(
    client: Client, connector: Connector, slack: FakeSlack, django_capture_on_commit_callbacks: Any
) -> None:
    # A Slack Connect member of another organization: users.info answers user_not_visible.
    slack.interrupts["users.info"] = [StubResponse(json={"ok": False, "error": "user_not_visible"})]
    body = message_event(GENERAL, "1719300000.000100", "Our side ships on Friday", user="UEXTERNAL1")
    assert deliver(client, connector, body, django_capture_on_commit_callbacks).status_code == 200

    [memory] = memories_for(connector)
    assert memory.content == "Our side ships on Friday"
    assert memory.author_name == "UEXTERNAL1"
    connector.refresh_from_db()
    assert connector.status == Connector.Status.ACTIVE and connector.last_error == ""
    assert Delivery.objects.get(connector=connector).status == Delivery.Status.PROCESSED


def test_files_slack_does_not_describe_are_counted_not_left_as_an_empty_line(
    client: Client, connector: Connector, django_capture_on_commit_callbacks: Any
) -> None:
    # Files past a free workspace's limit, or needing files.info, come as ids only.
    files = [{"id": "F0HIDDEN1", "mode": "hidden_by_limit"}, {"id": "F0HIDDEN2", "file_access": "check_file_info"}]
    body = message_event(GENERAL, "1719300000.000100", "", subtype="file_share", files=files)
    deliver(client, connector, body, django_capture_on_commit_callbacks)
    [memory] = memories_for(connector)
    assert memory.content == "Files: 2 files"
    assert memory.title == "#general: Files: 2 files"


def test_a_message_with_only_rich_text_blocks_keeps_its_words(
    client: Client, connector: Connector, django_capture_on_commit_callbacks: Any
) -> None:
    body = fixture("event_callback__message")
    body["event"].update(ts="1719300000.000100", event_ts="1719300000.000100", text="")
    body["event"]["blocks"] = [
        {
            "type": "rich_text",
            "block_id": "Xh7lJ",
            "elements": [
                {
                    "type": "rich_text_section",
                    "elements": [
                        {"type": "user", "user_id": "U012AB3CDE"},
                        {"type": "text", "text": " the rollout plan for R&D "},
                        {"type": "emoji", "name": "rocket", "unicode": "1f680"},
                        {"type": "text", "text": "\n"},
                    ],
                },
                {
                    "type": "rich_text_list",
                    "style": "bullet",
                    "elements": [
                        {"type": "rich_text_section", "elements": [{"type": "text", "text": "staging on Monday"}]},
                        {
                            "type": "rich_text_section",
                            "elements": [
                                {"type": "link", "url": "https://docs.acme.test/prod", "text": "production"},
                                {"type": "text", "text": " on Friday, ask "},
                                {"type": "channel", "channel_id": "C111"},
                                {"type": "text", "text": " "},
                                {"type": "broadcast", "range": "here"},
                            ],
                        },
                    ],
                },
            ],
        }
    ]
    deliver(client, connector, json.dumps(body).encode(), django_capture_on_commit_callbacks)
    [memory] = memories_for(connector)
    assert memory.content == (
        "@Alan Turing the rollout plan for R&D :rocket:\n"
        "- staging on Monday\n"
        "- production (https://docs.acme.test/prod) on Friday, ask #eng @here"
    )
    assert memory.title == "#general: @Alan Turing the rollout plan for R&D :rocket:"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "Grace Hopper (shared): Hello, the launch moved to Friday"),
        ("FYI <@U012AB3CDE>", "FYI @Alan Turing\nGrace Hopper (shared): Hello, the launch moved to Friday"),
    ],
    ids=["forwarded-alone", "forwarded-with-a-comment"],
)
def test_a_shared_message_keeps_what_was_shared(
    client: Client, connector: Connector, django_capture_on_commit_callbacks: Any, text: str, expected: str
) -> None:
    shared = {
        "is_msg_unfurl": True,
        "is_share": True,
        "channel_id": GENERAL,
        "ts": "1719209506.817929",
        "fallback": "[June 24th, 2024 6:11 AM] grace: Hello, the launch moved to Friday",
        "text": "Hello, the launch moved to Friday",
        "author_id": "U06NU4E26M9",
        "author_name": "Grace Hopper",
        "from_url": f"https://acme.slack.com/archives/{GENERAL}/p1719209506817929",
        "footer": "Posted in #general",
    }
    deliver(
        client,
        connector,
        message_event(ENG, "1719300000.000100", text, attachments=[shared]),
        django_capture_on_commit_callbacks,
    )
    [memory] = memories_for(connector)
    assert memory.content == expected


def test_email_links_and_channel_mentions_read_as_names(
    client: Client, connector: Connector, django_capture_on_commit_callbacks: Any
) -> None:
    # Slack now writes channel mentions as <#C111|> (no name) as well as <#C111>.
    text = "Write to <mailto:ops@acme.test|ops@acme.test> or ask in <#C111|> and <#C111>, not <#C999|>"
    deliver(client, connector, message_event(GENERAL, "1719300000.000100", text), django_capture_on_commit_callbacks)
    [memory] = memories_for(connector)
    assert memory.content == "Write to ops@acme.test or ask in #eng and #eng, not #C999"


def test_a_thread_longer_than_a_memory_holds_is_stored_cut_with_a_note(
    client: Client, connector: Connector, slack: FakeSlack, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.CORTEX_MAX_CONTENT_CHARS = 3000
    parent_ts = "1719200000.000100"
    slack.post(ENG, parent_ts, "Incident: checkout is down")
    for n in range(8):
        slack.reply(ENG, parent_ts, f"17192{n + 1:05d}.000200", f"update {n}: " + "details " * 60)
    reply = message_event(ENG, "1719200008.000200", "the last update", thread_ts=parent_ts)
    deliver(client, connector, reply, django_capture_on_commit_callbacks)

    assert Delivery.objects.get(connector=connector).status == Delivery.Status.PROCESSED
    memory = current(connector, f"{ENG}:{parent_ts}")
    assert len(memory.content) <= 3000
    assert memory.content.startswith("Incident: checkout is down\n\nThread:\nAda Lovelace: update 0:")
    assert memory.content.endswith("(The conversation continues in Slack: it is longer than a memory holds.)")


def test_a_late_retry_of_the_first_post_does_not_undo_an_edit(
    client: Client, connector: Connector, django_capture_on_commit_callbacks: Any
) -> None:
    # Cortex was down when the message was posted; the edit, a minute later, arrived first, then
    # Slack's retry of the original post (X-Slack-Retry-Num 1) with the text as first typed.
    ts = "1719209506.817929"
    changed = copy.deepcopy(fixture("message__message_changed"))
    changed["channel"] = GENERAL
    for key in ("thread_ts", "parent_user_id"):
        changed["message"].pop(key)
    changed["message"].update(ts=ts, user="U06NU4E26M9", text="The launch moves to Friday")
    deliver(client, connector, json.dumps(envelope(changed, event_id="Ev0EDIT3")).encode(), django_capture_on_commit_callbacks)

    original = message_event(GENERAL, ts, "The launch moves to Fridya", user="U06NU4E26M9")
    retry = {**sign(original), "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"}
    assert deliver(client, connector, original, django_capture_on_commit_callbacks, headers=retry).status_code == 200

    [memory] = memories_for(connector)
    assert memory.status == Memory.Status.ACTIVE
    assert memory.content == "The launch moves to Friday"


def test_a_thread_longer_than_the_replies_folded_says_how_many_are_left_in_slack(
    client: Client,
    connector: Connector,
    slack: FakeSlack,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    monkeypatch.setattr("connectors.sources.slack.client.MAX_THREAD_REPLIES", 3)
    parent_ts = "1719300000.000100"
    slack.post(ENG, parent_ts, "Which region for the new cluster?")
    for n in range(5):
        slack.reply(ENG, parent_ts, f"17193{n + 1:05d}.000200", f"vote {n}")
    reply = message_event(ENG, "1719300005.000200", "vote 4", thread_ts=parent_ts)
    deliver(client, connector, reply, django_capture_on_commit_callbacks)

    memory = current(connector, f"{ENG}:{parent_ts}")
    assert "vote 2" in memory.content and "vote 3" not in memory.content
    assert memory.content.endswith("(2 later replies are in Slack only.)")


def test_nul_characters_and_half_an_emoji_in_a_slack_message_are_stored_without_them(
    client: Client, connector: Connector, django_capture_on_commit_callbacks: Any
) -> None:
    # Valid JSON escapes that PostgreSQL refuses (a NUL; half of a surrogate pair): the delivery
    # and its memory keep everything else.
    body = message_event(GENERAL, "1719209600.000100", "PLACEHOLDER").replace(
        b"PLACEHOLDER", rb"deploy\u0000 done, cut emoji \ud83d"
    )
    response = deliver(client, connector, body, django_capture_on_commit_callbacks)

    assert response.status_code == 200, response.content
    [memory] = memories_for(connector)
    assert memory.content == "deploy done, cut emoji \ufffd"
