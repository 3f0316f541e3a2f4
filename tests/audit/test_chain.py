"""The audit log is append-only and hash-chained per organization; `cortex audit verify` proves it."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client

from audit.actions import Action
from audit.context import bound
from audit.models import AuditEvent
from audit.services import GENESIS_HASH, Actor, EventSpec, _event_digest, record, record_many, verify_chain
from memories.models import Organization

TRIGGER = "audit_event_append_only"


@contextmanager
def trigger_disabled() -> Iterator[None]:
    """What someone with superuser access to the database could do behind Cortex's back."""
    with connection.cursor() as cursor:
        # Django's foreign keys are deferred; ALTER TABLE refuses while their checks are pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"ALTER TABLE audit_auditevent DISABLE TRIGGER {TRIGGER}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE audit_auditevent ENABLE TRIGGER {TRIGGER}")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _chain(organization: Organization) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(organization=organization).order_by("id"))


def _record_some(organization: Organization, n: int = 3) -> list[AuditEvent]:
    return [
        record(
            "memory.read",
            organization=organization,
            actor=Actor.cli(),
            target_type="thing",
            target_id=i,
            details={"n": i, "note": f"event {i}"},
        )
        for i in range(n)
    ]


def _verify_cli(slug: str) -> str:
    out = StringIO()
    call_command("cortex", "audit", "verify", "--org", slug, stdout=out)
    return out.getvalue().strip()


@pytest.mark.django_db
def test_record_links_each_event_to_the_previous_one_of_its_organization(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    other = make_org()
    before = _chain(org)  # organization_create audits itself
    mine = _record_some(org, 3)
    _record_some(other, 2)  # interleaved writes to another chain do not enter this one
    mine += _record_some(org, 2)
    chain = _chain(org)
    assert [e.pk for e in chain] == [e.pk for e in before] + [e.pk for e in mine]
    assert chain[0].prev_hash == GENESIS_HASH
    for previous, event in itertools.pairwise(chain):
        assert event.prev_hash == previous.hash
    assert len({e.hash for e in chain}) == len(chain)


@pytest.mark.django_db
def test_record_many_extends_the_chain_in_order_exactly_as_record_would(make_org: Callable[..., Organization]) -> None:
    org = make_org("batched")
    other = make_org()
    before = _chain(org) + _record_some(org, 2)
    with bound(request_id="batch-1", client_ip="2001:0DB8:0000::0002"):
        batch = record_many(
            [EventSpec("memory.create", target_type="memory", target_id=i, details={"n": i, "big": 1e20}) for i in range(1, 5)],
            organization=org,
            actor=Actor.cli(),
        )
    _record_some(other, 1)
    after = _record_some(org, 1)

    chain = _chain(org)
    assert [e.pk for e in chain] == [e.pk for e in before + batch + after]  # ids follow the list's order
    for previous, event in itertools.pairwise(chain):
        assert event.prev_hash == previous.hash
    stored = chain[len(before) : len(before) + 4]
    assert [e.target_id for e in stored] == ["1", "2", "3", "4"]
    assert {e.request_id for e in stored} == {"batch-1"} and {e.ip for e in stored} == {"2001:db8::2"}
    assert [e.hash for e in stored] == [e.hash for e in batch]  # what was hashed is what was stored
    report = verify_chain(org)
    assert report.ok and report.count == len(chain)
    assert _verify_cli("batched") == f"ok {len(chain)} events"


@pytest.mark.django_db
def test_record_many_keeps_the_first_128_characters_of_a_request_id_and_a_target_id(
    make_org: Callable[..., Organization],
) -> None:
    # Ids from outside (a proxy's request id, a source's item id) can be longer than the columns.
    org = make_org()
    long_request, long_target = "r" * 200, "t" * 200
    with bound(request_id=long_request, client_ip="192.0.2.1"):
        batch = record_many(
            [
                EventSpec("memory.create", target_type="memory", target_id=long_target),
                EventSpec("memory.create", request_id=long_request),
            ],
            organization=org,
            actor=Actor.cli(),
        )
    stored = list(AuditEvent.objects.filter(pk__in=[e.pk for e in batch]).order_by("id"))
    assert [e.request_id for e in stored] == ["r" * 128, "r" * 128] and stored[0].target_id == "t" * 128
    assert verify_chain(org).ok


@pytest.mark.django_db
def test_record_many_refuses_an_unknown_action_and_writes_none_of_the_batch(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    count = AuditEvent.objects.filter(organization=org).count()
    with pytest.raises(ValueError, match=r"audit\.actions\.Action"):
        record_many([EventSpec("memory.read"), EventSpec("memory.frobnicate")], organization=org, actor=Actor.cli())
    assert AuditEvent.objects.filter(organization=org).count() == count
    assert record_many([], organization=org, actor=Actor.cli()) == []
    assert verify_chain(org).ok


@pytest.mark.django_db
def test_verify_chain_is_ok_on_an_intact_chain_and_cli_says_so(make_org: Callable[..., Organization]) -> None:
    org = make_org("intact")
    _record_some(org, 4)
    count = AuditEvent.objects.filter(organization=org).count()
    assert verify_chain(org) == verify_chain(org.pk)
    report = verify_chain(org)
    assert report.ok and report.count == count and report.first_broken is None
    assert _verify_cli("intact") == f"ok {count} events"


@pytest.mark.django_db
def test_values_the_database_normalises_still_verify(make_org: Callable[..., Organization]) -> None:
    # jsonb rewrites 1e20 and -0.0, inet rewrites a long-hand IPv6 address: the hash must be of what is stored.
    org = make_org()
    with bound(request_id="norm-1", client_ip="2001:0DB8:0000::0001"):
        event = record(
            "memory.read",
            organization=org,
            actor=Actor.cli(),
            details={"big": 1e20, "neg_zero": -0.0, "when": org.created_at},
        )
    stored = AuditEvent.objects.get(pk=event.pk)
    assert stored.ip == "2001:db8::1"
    assert verify_chain(org).ok


@pytest.mark.django_db
def test_an_unparseable_client_ip_is_recorded_as_none_instead_of_failing_the_request(
    make_org: Callable[..., Organization],
) -> None:
    org = make_org()
    with bound(request_id="bad-ip", client_ip="not-an-ip, 10.0.0.1"):
        event = record("memory.read", organization=org, actor=Actor.cli())
    assert AuditEvent.objects.get(pk=event.pk).ip is None
    assert verify_chain(org).ok


@pytest.mark.django_db
@pytest.mark.parametrize(
    "statement", ["UPDATE audit_auditevent SET details = '{}'::jsonb WHERE id = %s", "DELETE FROM audit_auditevent WHERE id = %s"]
)
def test_update_and_delete_are_refused_by_the_database(make_org: Callable[..., Organization], statement: str) -> None:
    org = make_org()
    event = _record_some(org, 1)[0]
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, [event.pk])
    stored = AuditEvent.objects.get(pk=event.pk)
    assert stored.details == event.details


@pytest.mark.django_db
def test_orm_update_and_delete_are_refused_too(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    event = _record_some(org, 1)[0]
    with pytest.raises(DatabaseError, match="UPDATE refused"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(action="forged")
    with pytest.raises(DatabaseError, match="DELETE refused"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).delete()
    assert AuditEvent.objects.get(pk=event.pk).action == event.action


@pytest.mark.django_db
def test_a_changed_detail_is_detected_at_that_event(make_org: Callable[..., Organization]) -> None:
    org = make_org("tampered")
    bystander = make_org("bystander")
    events = _record_some(org, 5)
    _record_some(bystander, 2)
    target = events[2]
    with trigger_disabled(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET details = jsonb_set(details, '{note}', '\"nothing happened\"') WHERE id = %s",
            [target.pk],
        )
    report = verify_chain(org)
    assert not report.ok
    assert report.first_broken == target.pk
    assert report.count == [e.pk for e in _chain(org)].index(target.pk) + 1
    with pytest.raises(CommandError, match=rf"first broken event id {target.pk}\b"):
        _verify_cli("tampered")
    # Another organization's chain is its own: it still verifies.
    assert verify_chain(bystander).ok
    assert _verify_cli("bystander").startswith("ok ")


@pytest.mark.django_db
def test_a_removed_event_is_detected_at_the_next_one(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    events = _record_some(org, 4)
    with trigger_disabled(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE id = %s", [events[1].pk])
    report = verify_chain(org)
    assert not report.ok
    assert report.first_broken == events[2].pk


@pytest.mark.django_db
def test_a_rewritten_hash_is_detected(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    events = _record_some(org, 3)
    with trigger_disabled(), connection.cursor() as cursor:
        # Change the action and recompute nothing: the stored hash no longer matches the content.
        cursor.execute("UPDATE audit_auditevent SET action = 'test.innocent' WHERE id = %s", [events[0].pk])
    assert verify_chain(org).first_broken == events[0].pk


@pytest.mark.django_db
def test_audit_verify_cli_errors_for_an_unknown_organization() -> None:
    with pytest.raises(CommandError, match="Unknown organization 'nope'"):
        _verify_cli("nope")


@pytest.mark.django_db
def test_events_carry_the_request_id_of_the_request_that_caused_them(client: Client) -> None:
    response = client.post(
        "/login/", {"username": "nobody@example.test", "password": "wrong-password-9"}, headers={"X-Request-ID": "login-trace-77"}
    )
    assert response.status_code == 200
    assert response["X-Request-ID"] == "login-trace-77"
    event = AuditEvent.objects.get(action="auth.login_failed")
    assert event.request_id == "login-trace-77"
    assert event.ip == "127.0.0.1"
    assert event.outcome == AuditEvent.Outcome.DENIED
    # Outside a request nothing is bound: CLI events carry no request id.
    assert record("memory.export", organization=None, actor=Actor.cli()).request_id == ""


@pytest.mark.django_db(transaction=True)
def test_concurrent_record_calls_still_form_one_valid_chain(make_org: Callable[..., Organization]) -> None:
    org = make_org("busy")
    threads, per_thread = 6, 8
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                with transaction.atomic():  # each event in its own transaction, as views do
                    record("mcp.call", organization=org.pk, actor=Actor.system(f"worker-{worker}"), details={"i": i})
        except BaseException as exc:  # noqa: BLE001 - surfaced to the test thread below
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(60)
    assert not errors, errors
    chain = _chain(org)
    assert sum(1 for e in chain if e.action == "mcp.call") == threads * per_thread
    # No fork: every event has a different predecessor, and the whole chain recomputes.
    assert len({e.prev_hash for e in chain}) == len(chain)
    report = verify_chain(org)
    assert report.ok and report.count == len(chain)


@pytest.mark.django_db
def test_an_event_rolled_back_with_its_write_leaves_no_gap(make_org: Callable[..., Organization]) -> None:
    org = make_org()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        record("memory.delete", organization=org, actor=Actor.cli())
        raise Boom
    _record_some(org, 1)
    assert not AuditEvent.objects.filter(action="memory.delete").exists()
    assert verify_chain(org).ok


@pytest.mark.django_db
def test_audit_verify_all_checks_every_chain_and_names_the_broken_ones(make_org: Callable[..., Organization]) -> None:
    intact, tampered = make_org("intact"), make_org("tampered")
    _record_some(intact, 2)
    events = _record_some(tampered, 3)
    record("auth.token_rejected", organization=None, actor=Actor.anonymous(), outcome=AuditEvent.Outcome.DENIED)
    counts = {o.slug: AuditEvent.objects.filter(organization=o).count() for o in (intact, tampered)}
    out = StringIO()
    call_command("cortex", "audit", "verify", "--all", stdout=out)
    lines = out.getvalue().splitlines()
    assert f"ok {counts['intact']} events  intact" in lines and f"ok {counts['tampered']} events  tampered" in lines
    assert any(line.endswith("(no organization)") and line.startswith("ok ") for line in lines)

    with trigger_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET action = 'test.innocent' WHERE id = %s", [events[1].pk])
    out = StringIO()
    with pytest.raises(CommandError, match=r"1 of \d+ audit chains are broken: tampered\."):
        call_command("cortex", "audit", "verify", "--all", stdout=out)
    assert f"ok {counts['intact']} events  intact" in out.getvalue()
    assert f"first broken event id {events[1].pk} in the audit chain of tampered" in out.getvalue()


@pytest.mark.django_db
def test_audit_verify_needs_an_organization_or_all() -> None:
    with pytest.raises(CommandError):
        call_command("cortex", "audit", "verify")


@pytest.mark.django_db
def test_an_action_outside_the_enumeration_is_refused_and_nothing_is_recorded(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    before = AuditEvent.objects.count()
    with pytest.raises(ValueError, match=r"unknown audit action 'memory\.reed'"):
        record("memory.reed", organization=org, actor=Actor.cli())
    assert AuditEvent.objects.count() == before
    assert record(Action.MEMORY_READ, organization=org, actor=Actor.cli()).action == "memory.read"


@pytest.mark.django_db
def test_labels_and_target_ids_longer_than_their_columns_are_cut_to_fit_by_record_and_record_many(
    make_org: Callable[..., Organization],
) -> None:
    org = make_org()
    actor = Actor.system("a" * 400)
    one = record("memory.read", organization=org, actor=actor, target_type="memory", target_id="t" * 200)
    batch = record_many([EventSpec("memory.read", target_type="memory", target_id="u" * 200)], organization=org, actor=actor)
    for event in (one, *batch):
        stored = AuditEvent.objects.get(pk=event.pk)
        assert len(stored.actor_label) == 320 and len(stored.target_id) == 128  # the whole column, no less
    assert verify_chain(org).ok


@pytest.mark.django_db
def test_record_many_stores_each_events_own_details_and_a_batch_of_one_keeps_its_address(
    make_org: Callable[..., Organization],
) -> None:
    org = make_org()
    with bound(request_id="batch-2", client_ip="192.0.2.7"):
        batch = record_many(
            [
                EventSpec("memory.create", details={"n": 1}),
                EventSpec("memory.create"),
                EventSpec("memory.read", details={"n": 3}),
                EventSpec("webhook.ignore", ip="198.51.100.9"),  # its own address (a delivery's answer)
            ],
            organization=org,
            actor=Actor.cli(),
        )
        (single,) = record_many([EventSpec("memory.read", details={"only": True})], organization=org, actor=Actor.cli())
    stored = {e.pk: e for e in AuditEvent.objects.filter(pk__in=[e.pk for e in (*batch, single)])}
    assert [stored[e.pk].details for e in batch] == [{"n": 1}, {}, {"n": 3}, {}]
    assert [stored[e.pk].ip for e in batch] == ["192.0.2.7", "192.0.2.7", "192.0.2.7", "198.51.100.9"]
    assert stored[single.pk].details == {"only": True} and stored[single.pk].ip == "192.0.2.7"
    assert verify_chain(org).ok


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("actor_user_id", "'00000000-0000-4000-8000-000000000002'::uuid"),
        ("actor_token_id", "'00000000-0000-4000-8000-000000000004'::uuid"),
        ("ip", "'198.51.100.9'::inet"),
    ],
)
def test_changing_who_acted_or_from_where_is_detected_at_that_event(
    make_org: Callable[..., Organization], column: str, value: str
) -> None:
    org = make_org()
    actor = Actor(
        kind=AuditEvent.ActorKind.TOKEN,
        label="ana",
        user_id="00000000-0000-4000-8000-000000000001",
        token_id="00000000-0000-4000-8000-000000000003",
    )
    with bound(request_id="who", client_ip="192.0.2.1"):
        events = [record("memory.read", organization=org, actor=actor, target_id=i) for i in range(3)]
    with trigger_disabled(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE audit_auditevent SET {column} = {value} WHERE id = %s", [events[1].pk])  # noqa: S608 - test constants
    assert verify_chain(org).first_broken == events[1].pk


@pytest.mark.django_db
def test_removing_or_changing_any_single_event_is_detected_where_it_happened(make_org: Callable[..., Organization]) -> None:
    # Every position of a chain of twelve, each tampering undone before the next: the verifier compares hashes for
    # equality, not in some order that happens to hold for one pair of them.
    org = make_org()
    events = _record_some(org, 12)
    for event, after in itertools.pairwise(events):
        for statement, broken in (
            ("DELETE FROM audit_auditevent WHERE id = %s", after.pk),  # found at the next event: its link is wrong
            ("UPDATE audit_auditevent SET details = '{\"n\": -1}'::jsonb WHERE id = %s", event.pk),  # found there
        ):
            with transaction.atomic():
                with trigger_disabled(), connection.cursor() as cursor:
                    cursor.execute(statement, [event.pk])
                report = verify_chain(org)
                transaction.set_rollback(True)
            assert not report.ok and report.first_broken == broken, (event.pk, statement)
    assert verify_chain(org).ok


def test_the_event_digest_format_is_frozen_so_chains_written_by_earlier_versions_still_verify() -> None:
    # The hash of a stored event is recomputed by every later verification, possibly by a newer Cortex: the
    # canonical JSON (sorted keys, compact separators, UTF-8 as is) must not change, or every existing chain
    # would read as tampered with after an upgrade. The value below is what this format gives for this event.
    event = AuditEvent(
        organization_id=7,
        created_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        actor_kind="token",
        actor_user_id="00000000-0000-4000-8000-000000000001",
        actor_token_id=None,
        actor_connector_id="",
        actor_label="Zoë",
        action="memory.read",
        target_type="memory",
        target_id="42",
        outcome="ok",
        request_id="req-1",
        ip="192.0.2.1",
        details={"z": 1, "a": {"y": "é", "b": [1, 2]}},
        prev_hash=GENESIS_HASH,
    )
    assert _event_digest(event) == "a3cf4fde1fe2f15226b70eface3fb405e677d86f45a59a2c0ec9c94ec6bd00c2"


@pytest.mark.django_db
def test_each_chain_has_a_lock_of_its_own(make_org: Callable[..., Organization]) -> None:
    # A writer of one chain never waits for a writer of another (here the global chain's, held elsewhere).
    import psycopg

    settings = connection.settings_dict
    holder = psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        password=settings["PASSWORD"],
        host=settings["HOST"],
        port=settings["PORT"] or None,
        autocommit=True,
    )
    org = make_org()
    try:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(7301, 0)")
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '2s'")
            record("memory.create", organization=org, actor=Actor.cli(), target_type="memory", target_id="1")
        holder.execute("COMMIT")
    finally:
        holder.close()
    assert verify_chain(org).ok
