"""Connector rows: credentials encrypted at rest, the acting principal, the key check."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core import checks
from django.db import connection

from audit.models import AuditEvent
from connectors import crypto
from connectors.apps import check_connector_key
from connectors.models import Connector
from memories.access import Principal

pytestmark = pytest.mark.django_db


def _connector(acme: dict[str, Any]) -> Connector:
    connector = Connector(organization=acme["org"], kind="github", name="Robots", installed_by=acme["exec"], config={})
    connector.set_credentials({"token": "ghp_secret-token-value", "webhook_secret": "s3cret"})
    connector.save()
    return connector


def test_credentials_are_encrypted_at_rest_and_read_back(acme: dict[str, Any]) -> None:
    connector = _connector(acme)
    with connection.cursor() as cursor:
        cursor.execute("SELECT credentials_encrypted, config::text FROM connectors_connector WHERE id = %s", [connector.pk])
        stored, config = cursor.fetchone()
    assert "ghp_secret" not in stored and "s3cret" not in stored and "ghp_secret" not in config
    assert Connector.objects.get(pk=connector.pk).credentials == {"token": "ghp_secret-token-value", "webhook_secret": "s3cret"}


def test_credentials_survive_a_key_rotation_and_fail_clearly_with_a_wrong_key(acme: dict[str, Any], settings: Any) -> None:
    connector = _connector(acme)
    old_key = settings.CORTEX_CONNECTOR_KEY
    new_key = Fernet.generate_key().decode()
    settings.CORTEX_CONNECTOR_KEY = f"{new_key},{old_key}"  # new first: encrypts; old still decrypts
    assert Connector.objects.get(pk=connector.pk).credentials["token"] == "ghp_secret-token-value"
    rotated = crypto.rotate(connector.credentials_encrypted)
    settings.CORTEX_CONNECTOR_KEY = new_key
    assert crypto.decrypt_json(rotated)["webhook_secret"] == "s3cret"
    with pytest.raises(crypto.CredentialsUnreadable, match="CORTEX_CONNECTOR_KEY"):
        Connector.objects.get(pk=connector.pk).credentials  # noqa: B018 - the old key is gone


def test_a_missing_key_is_a_start_up_error(settings: Any) -> None:
    settings.CORTEX_CONNECTOR_KEY = ""
    errors = check_connector_key()
    assert [e.id for e in errors] == ["connectors.E001"]
    assert errors[0].level == checks.ERROR and "Fernet" in (errors[0].hint or "")


def test_a_connector_acts_as_its_installer_with_its_own_audit_label(acme: dict[str, Any]) -> None:
    connector = _connector(acme)
    principal = Principal.as_connector(connector)
    assert principal.membership == acme["exec"] and principal.connector is connector
    actor = principal.actor
    assert actor.kind == AuditEvent.ActorKind.CONNECTOR
    assert actor.label == "github connector 'Robots'"
    assert actor.user_id == acme["exec"].user.pk and actor.connector_id == str(connector.pk)
