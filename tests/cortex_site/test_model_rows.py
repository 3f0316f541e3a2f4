"""Instances read by hand-written statements (cortex_site/model_rows.py) are the ORM's own: every field
the same value through the same converters, related objects as select_related leaves them."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from support import imported, principal, remember

from connectors.models import Connector
from connectors.services.connectors import connector_create
from connectors.services.deliveries import _connector_by_id
from cortex_site.model_rows import row_reader, table_and_columns
from memories.models import Memory
from memories.retrieval.sql import memories_with_authors


def _values(instance: Any) -> dict[str, Any]:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_a_row_read_by_hand_is_the_instance_the_orm_loads(acme: dict[str, Any]) -> None:
    # A memory: a UUID key, datetimes, a tag array, nullable foreign keys.
    memory = remember(acme["exec"], "The parking garage closes at 22:00.", scope="engineering", tags=["facilities"])
    reader = row_reader(Memory, connection)
    table, columns = table_and_columns(Memory, reader.fields, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM {table} WHERE id = %s", [memory.pk])  # noqa: S608 - the model's names
        read = reader.read(cursor.fetchone(), connection)
    assert _values(read) == _values(Memory.objects.get(pk=memory.pk))
    assert read._state.adding is False and read._state.db == connection.alias


def test_a_connector_looked_up_by_hand_has_its_config_and_credentials_decoded(acme: dict[str, Any]) -> None:
    # Its config is JSON and its credentials are encrypted at rest: both pass through their fields' converters.
    created = connector_create(
        principal=principal(acme["exec"]),
        kind="gmail",
        name="Team inbox",
        config={"label": "team"},
        credentials={"client_id": "client-1", "client_secret": "client-secret-1", "refresh_token": "refresh-token-1"},
    ).connector
    found = _connector_by_id(created.pk, "gmail")
    assert found is not None
    assert _values(found) == _values(Connector.objects.get(pk=created.pk))
    assert found.config["label"] == "team"
    assert found.credentials["client_secret"] == "client-secret-1"
    assert _connector_by_id(created.pk, "slack") is None
    assert _connector_by_id(uuid.uuid4(), "gmail") is None


def test_recalls_returned_memories_come_with_their_authors_as_select_related_gives_them(acme: dict[str, Any]) -> None:
    written = remember(acme["exec"], "Deploys freeze on Fridays after 15:00.", scope="engineering")
    named = imported(acme["exec"], "The VPN moved to WireGuard.", scope="engineering", author_name="Grace Hopper")
    Memory.objects.filter(pk=named.pk).update(author=None)
    missing = uuid.uuid4()

    found = memories_with_authors([written.pk, named.pk, missing])
    expected = Memory.objects.select_related("author").in_bulk([written.pk, named.pk])

    assert set(found) == {written.pk, named.pk}
    for pk, memory in found.items():
        assert _values(memory) == _values(expected[pk])
    with CaptureQueriesContext(connection) as queries:
        assert found[written.pk].author == acme["exec"].user
        assert _values(found[written.pk].author) == _values(acme["exec"].user)
        assert found[named.pk].author is None
        assert found[named.pk].author_display == "Grace Hopper"
    assert len(queries) == 0  # the authors came with the memories
