"""`touch_token` records a token's last use at most once a minute, without a read-modify-write race:
more than 60 seconds after the recorded use it writes, within them it does not."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memories.access import touch_token
from memories.models import ApiToken
from memories.services import tenancy


@pytest.fixture
def token(make_org: Any, make_member: Any) -> ApiToken:
    made, _secret = tenancy.token_create(membership=make_member(make_org()), name="ci")
    return made


@pytest.mark.django_db
@pytest.mark.parametrize(("seconds_ago", "recorded"), [(None, True), (60.5, True), (60, False), (59.5, False), (600, True)])
def test_last_use_is_recorded_once_a_minute(
    seconds_ago: float | None, recorded: bool, token: ApiToken, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = timezone.now()
    earlier = None if seconds_ago is None else now - timedelta(seconds=seconds_ago)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=earlier)
    token.refresh_from_db()
    # A fixed clock: the boundary is the minute itself, not however long the machine takes.
    monkeypatch.setattr(timezone, "now", lambda: now)
    touch_token(token)
    stored = ApiToken.objects.values_list("last_used_at", flat=True).get(pk=token.pk)
    assert stored == (now if recorded else earlier)
    assert token.last_used_at == stored
