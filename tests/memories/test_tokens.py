"""API token lifecycle: shown once, stored hashed, narrowed, expiring, revocable, last-used."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import assert_envelope

from audit.models import AuditEvent
from memories.models import ApiToken
from memories.services import tenancy


@pytest.mark.django_db
def test_token_secret_is_shown_once_and_stored_only_as_a_hash(make_org: Any, make_member: Any) -> None:
    member = make_member(make_org())
    token, secret = tenancy.token_create(membership=member, name="ci")
    stored = ApiToken.objects.get(pk=token.pk)
    assert secret.startswith(f"ctx_{stored.prefix}_")
    assert stored.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiToken.objects.filter(pk=token.pk).values().first())
    event = AuditEvent.objects.get(action="token.create", target_id=str(token.pk))
    assert secret not in str(event.details)


@pytest.mark.django_db
def test_valid_token_authenticates_and_records_last_use(make_org: Any, make_member: Any, api: Any) -> None:
    member = make_member(make_org(), "Manager")
    client = api(member)
    response = client.get("/api/me")
    assert response.status_code == 200
    body = response.json()
    assert body["user"]["email"] == member.user.email
    assert body["clearance"] == "Manager"
    assert ApiToken.objects.get(membership=member).last_used_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["revoked", "expired", "wrong-secret", "unknown-prefix", "inactive-user"])
def test_unusable_tokens_get_401_envelope(state: str, make_org: Any, make_member: Any, api: Any) -> None:
    member = make_member(make_org())
    client = api(member)
    token = ApiToken.objects.get(membership=member)
    if state == "revoked":
        tenancy.token_revoke(token=token)
    elif state == "expired":
        ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    elif state == "wrong-secret":
        client.secret = client.secret[:-4] + "AAAA"
    elif state == "unknown-prefix":
        client.secret = "ctx_00000000_" + client.secret.split("_", 2)[2]
    elif state == "inactive-user":
        member.user.is_active = False
        member.user.save()
    response = client.get("/api/me")
    assert_envelope(response, 401, "INVALID_TOKEN")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert AuditEvent.objects.filter(action="auth.token_rejected", outcome="denied").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Basic dXNlcjpwdw==", "Token abc"])
def test_malformed_authorization_header_is_401(header: str, make_org: Any, make_member: Any) -> None:
    from django.test import Client

    response = Client().get("/api/me", headers={"Authorization": header})
    assert_envelope(response, 401, "MALFORMED_AUTHORIZATION")


@pytest.mark.django_db
def test_no_credentials_is_401_with_challenge() -> None:
    from django.test import Client

    response = Client().get("/api/me")
    assert_envelope(response, 401, "NOT_AUTHENTICATED")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
def test_revoked_token_stops_working_immediately(make_org: Any, make_member: Any, api: Any) -> None:
    member = make_member(make_org())
    client = api(member)
    assert client.get("/api/me").status_code == 200
    tenancy.token_revoke(token=ApiToken.objects.get(membership=member))
    assert client.get("/api/me").status_code == 401


@pytest.mark.django_db
def test_token_in_the_past_is_refused(make_org: Any, make_member: Any) -> None:
    from cortex_site.errors import ValidationFailed

    member = make_member(make_org())
    with pytest.raises(ValidationFailed):
        tenancy.token_create(membership=member, name="old", expires_at=timezone.now() - timedelta(days=1))
    assert not ApiToken.objects.filter(membership=member).exists()


@pytest.mark.django_db
def test_member_cannot_revoke_someone_elses_token_but_admin_can(make_org: Any, make_member: Any, principal_of: Any) -> None:
    from cortex_site.errors import PermissionDenied

    org = make_org()
    owner, other, admin = make_member(org), make_member(org), make_member(org, "Executive", admin=True)
    token, _ = tenancy.token_create(membership=owner, name="mine")
    with pytest.raises(PermissionDenied):
        tenancy.token_revoke(token=token, by=principal_of(other))
    tenancy.token_revoke(token=token, by=principal_of(admin))
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


@pytest.mark.django_db
def test_read_only_token_writes_nowhere(make_org: Any, make_member: Any, api: Any) -> None:
    member = make_member(make_org())
    rows = api(member, read_only=True).get("/api/scopes").json()["results"]
    assert rows and all(row["can_write"] is False for row in rows)
    assert api(member).get("/api/scopes").json()["results"][0]["can_write"] is True


@pytest.mark.django_db
def test_a_narrowed_token_whose_scopes_are_deleted_reads_nothing_rather_than_everything(
    make_org: Any, make_member: Any, make_scope: Any, api: Any
) -> None:
    from memories.models import Scope

    org = make_org()
    make_scope(org, "temporary")
    member = make_member(org, grants={"temporary": True})
    client = api(member, scope_slugs=["temporary"])
    assert [row["slug"] for row in client.get("/api/scopes").json()["results"]] == ["temporary"]
    Scope.objects.filter(organization=org, slug="temporary").delete()
    assert client.get("/api/scopes").json()["results"] == []
