"""Shared fixtures: organizations, members at a clearance, API clients with tokens.

Everything is built through the real services (never ORM shortcuts that skip rules),
so fixtures obey the same invariants production data does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from support.stub_server import stub_server  # noqa: F401  (the shared loopback stub fixture, for every test)
from xdist.scheduler import LoadGroupScheduling

from memories.access import Principal
from memories.models import Membership, Organization, Scope
from memories.services import tenancy

_counter = itertools.count(1)

# Under pytest-xdist (`runner test` with CORTEX_TEST_WORKERS, `--dist loadgroup`), these run on one worker
# each, in order, as one unit: the leak package builds one committed world for the whole package and
# flushes it when the package ends; the replica tests share one streaming standby (a base backup of
# the cluster). Everything else is shared out test by test. Grouped here, in the controller's
# scheduler, not with `xdist_group` marks: pytest 9.2 ignores the node-id suffix pytest-xdist 3.8 uses
# to carry those marks (pytest-dev/pytest-xdist#1386), so marked tests would be spread out silently.
XDIST_GROUPS = {
    "tests/hardening/leaks/": "leaks",
    "tests/hardening/scale/test_replica.py": "replica",
}


def xdist_group_of(nodeid: str) -> str:
    """The unit of work a test belongs to under `--dist loadgroup`: its group, else the test itself."""
    for prefix, group in XDIST_GROUPS.items():
        if nodeid.startswith(prefix):
            return group
    return nodeid


class _GroupScheduling(LoadGroupScheduling):
    def _split_scope(self, nodeid: str) -> str:
        grouped = xdist_group_of(nodeid)
        return grouped if grouped != nodeid else super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadGroupScheduling | None:
    return _GroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    # Throttle counters and cached lookups must not leak between tests (cache DB only; never the broker's).
    cache.clear()


@pytest.fixture
def make_org(db: Any) -> Callable[..., Organization]:
    def make(slug: str | None = None, name: str = "") -> Organization:
        slug = slug or f"org-{next(_counter)}"
        return tenancy.organization_create(slug=slug, name=name or slug.title())

    return make


@pytest.fixture
def make_member(db: Any) -> Callable[..., Membership]:
    def make(
        organization: Organization,
        clearance: str = "Employee",
        *,
        email: str | None = None,
        admin: bool = False,
        password: str | None = "pw-for-tests-1",
        grants: dict[str, bool] | None = None,
    ) -> Membership:
        email = email or f"person{next(_counter)}@example.test"
        membership = tenancy.member_add(
            organization=organization,
            email=email,
            clearance=clearance,
            role=Membership.Role.ADMIN if admin else Membership.Role.MEMBER,
            password=password,
        )
        for slug, can_write in (grants or {}).items():
            tenancy.grant_set(
                membership=membership, scope=Scope.objects.get(organization=organization, slug=slug), can_write=can_write
            )
        return membership

    return make


@pytest.fixture
def make_scope(db: Any) -> Callable[..., Scope]:
    def make(organization: Organization, slug: str, visibility: str = Scope.Visibility.GRANTED, **kwargs: Any) -> Scope:
        return tenancy.scope_create(organization=organization, slug=slug, visibility=visibility, **kwargs)

    return make


@pytest.fixture
def make_token(db: Any) -> Callable[..., str]:
    def make(membership: Membership, **kwargs: Any) -> str:
        kwargs.setdefault("name", "test token")
        _token, secret = tenancy.token_create(membership=membership, **kwargs)
        return secret

    return make


class ApiClient(Client):
    """Django's test client speaking JSON to /api/ with a bearer token."""

    def __init__(self, secret: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.secret = secret

    def _headers(self, extra: dict[str, Any]) -> dict[str, Any]:
        headers = dict(extra.pop("headers", None) or {})
        if self.secret:
            headers.setdefault("Authorization", f"Bearer {self.secret}")
        return headers

    def get(self, path: str, data: Any = None, **extra: Any) -> Any:  # type: ignore[override]
        return super().get(path, data, headers=self._headers(extra), **extra)

    def post(self, path: str, data: Any = None, content_type: str = "application/json", **extra: Any) -> Any:  # type: ignore[override]
        return super().post(path, data, content_type=content_type, headers=self._headers(extra), **extra)

    def patch(self, path: str, data: Any = None, content_type: str = "application/json", **extra: Any) -> Any:  # type: ignore[override]
        return super().patch(path, data, content_type=content_type, headers=self._headers(extra), **extra)

    def delete(self, path: str, data: Any = None, content_type: str = "application/json", **extra: Any) -> Any:  # type: ignore[override]
        return super().delete(path, data, content_type=content_type, headers=self._headers(extra), **extra)


@pytest.fixture
def api(make_token: Callable[..., str]) -> Callable[..., ApiClient]:
    """`api(membership, **token_options)` → a client authenticated with a fresh token of that membership."""

    def make(membership: Membership | None = None, **token_options: Any) -> ApiClient:
        return ApiClient(make_token(membership, **token_options) if membership is not None else None)

    return make


@pytest.fixture
def principal_of() -> Callable[[Membership], Principal]:
    from support import principal

    return principal


@pytest.fixture
def use_embedder(settings: Any) -> Iterator[Callable[..., None]]:
    """Switch the configured embedder for one test (and back), e.g. use_embedder("openai", OPENAI_BASE_URL=...)."""
    from memories.embeddings.factory import get_embedder

    def switch(name: str, **extra: Any) -> None:
        settings.CORTEX_EMBEDDER = name
        for key, value in extra.items():
            setattr(settings, key, value)
        get_embedder.cache_clear()

    yield switch
    get_embedder.cache_clear()


@pytest.fixture
def acme(
    make_org: Callable[..., Organization], make_scope: Callable[..., Scope], make_member: Callable[..., Membership]
) -> dict[str, Any]:
    """A small organization: scopes engineering (granted), sales (granted), handbook (all members, read-only for members)
    and people at every rung with typical grants."""
    org = make_org("acme", "Acme Robotics")
    make_scope(org, "engineering")
    make_scope(org, "sales")
    make_scope(org, "handbook", visibility=Scope.Visibility.ALL_MEMBERS, members_can_write=False)
    return {
        "org": org,
        "exec": make_member(org, "Executive", admin=True, grants={"engineering": True, "sales": True, "handbook": True}),
        "manager": make_member(org, "Manager", grants={"engineering": True, "sales": True}),
        "employee": make_member(org, "Employee", grants={"engineering": True}),
        "contractor": make_member(org, "Contractor", grants={"engineering": False}),
    }


@pytest.fixture
def outsider(make_org: Callable[..., Organization], make_member: Callable[..., Membership]) -> Membership:
    """An Executive admin of another organization, who must see nothing of acme."""
    return make_member(make_org("globex", "Globex"), "Executive", admin=True)
