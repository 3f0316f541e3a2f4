"""The access chokepoint: a Principal decides what its holder may read and write.

Every tenant read and write in Cortex — REST, UI, MCP, CLI, tasks — is made on behalf
of a Principal. Selectors filter with it; services check it. Nothing else decides.

Read rule (scopes): same organization ∧ (scope is all_members ∨ the membership holds a
grant) ∧ (the token does not narrow scopes ∨ the scope is among the token's scopes).
Write rule (scopes): readable ∧ (all_members scope that members may write ∨ a grant with
can_write) ∧ the token is not read-only. Memories add clearance, status and validity on
top of that (see `can_read_memory`).
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from audit.models import AuditEvent
from audit.services import Actor
from memories.models import ApiToken, ClearanceLevel, Membership, Organization, Scope, User

if TYPE_CHECKING:
    from collections.abc import Iterable


class Principal:
    """A membership acting directly (browser session) or through an API token."""

    def __init__(self, membership: Membership, token: ApiToken | None = None) -> None:
        if token is not None and token.membership_id != membership.pk:
            raise ValueError("token does not belong to membership")
        self.membership = membership
        self.token = token

    def __repr__(self) -> str:
        via = f" via token {self.token.prefix}" if self.token else ""
        return f"<Principal {self.user.email} @ {self.organization.slug}{via}>"

    # -- identity ------------------------------------------------------------------
    @property
    def organization(self) -> Organization:
        return self.membership.organization

    @property
    def organization_id(self) -> int:
        return self.membership.organization_id

    @property
    def user(self) -> User:
        return self.membership.user

    @property
    def clearance_rank(self) -> int:
        return self.membership.clearance_rank

    @cached_property
    def clearance(self) -> str:
        """The name of this principal's clearance rung."""
        return clearance_name(self.organization_id, self.clearance_rank)

    @property
    def is_admin(self) -> bool:
        return self.membership.is_admin

    @property
    def read_only(self) -> bool:
        return self.token is not None and self.token.read_only

    @property
    def actor(self) -> Actor:
        if self.token is not None:
            return Actor(
                kind=AuditEvent.ActorKind.TOKEN,
                label=f"{self.user.email} (token {self.token.prefix})",
                user_id=self.user.pk,
                token_id=self.token.pk,
            )
        return Actor(kind=AuditEvent.ActorKind.SESSION, label=self.user.email, user_id=self.user.pk)

    # -- scopes ----------------------------------------------------------------------
    @cached_property
    def _grants(self) -> dict[int, bool]:
        return dict(self.membership.grants.values_list("scope_id", "can_write"))

    @cached_property
    def _token_scope_ids(self) -> frozenset[int] | None:
        if self.token is None:
            return None
        if not self.token.narrowed:
            return None
        return frozenset(self.token.scopes.values_list("id", flat=True))

    @cached_property
    def _scopes(self) -> dict[int, Scope]:
        return {scope.pk: scope for scope in Scope.objects.filter(organization_id=self.organization_id)}

    def _membership_reads(self, scope: Scope) -> bool:
        return scope.visibility == Scope.Visibility.ALL_MEMBERS or scope.pk in self._grants

    def _membership_writes(self, scope: Scope) -> bool:
        if not self._membership_reads(scope) or scope.retired_at is not None:
            return False  # a retired scope takes no new writes (reads are unchanged)
        if self._grants.get(scope.pk):
            return True
        return scope.visibility == Scope.Visibility.ALL_MEMBERS and scope.members_can_write

    def _token_allows(self, scope: Scope) -> bool:
        narrowed = self._token_scope_ids
        return narrowed is None or scope.pk in narrowed

    @cached_property
    def readable_scope_ids(self) -> frozenset[int]:
        return frozenset(pk for pk, scope in self._scopes.items() if self._membership_reads(scope) and self._token_allows(scope))

    @cached_property
    def writable_scope_ids(self) -> frozenset[int]:
        if self.read_only:
            return frozenset()
        return frozenset(pk for pk, scope in self._scopes.items() if self._membership_writes(scope) and self._token_allows(scope))

    def can_read_scope(self, scope: Scope) -> bool:
        return scope.organization_id == self.organization_id and scope.pk in self.readable_scope_ids

    def can_write_scope(self, scope: Scope) -> bool:
        return scope.organization_id == self.organization_id and scope.pk in self.writable_scope_ids

    def readable_scopes(self) -> list[Scope]:
        return sorted((self._scopes[pk] for pk in self.readable_scope_ids), key=lambda s: s.slug)

    def writable_scopes(self) -> list[Scope]:
        return sorted((self._scopes[pk] for pk in self.writable_scope_ids), key=lambda s: s.slug)

    # -- memories ------------------------------------------------------------------------
    def can_read_memory(self, memory: Any, *, history: bool = False, as_of: datetime | None = None) -> bool:
        """The full read rule for one memory.

        `history=True` is for asking about a specific memory (detail, supersession chain):
        superseded and redacted memories stay visible there; lists and recall pass False.
        """
        if memory.organization_id != self.organization_id:
            return False
        if memory.scope_id not in self.readable_scope_ids:
            return False
        if memory.clearance_rank > self.clearance_rank:
            return False
        if history:
            return True
        if memory.status != "active":
            return False
        if as_of is not None and memory.valid_from > as_of:
            return False  # not yet valid at that moment
        moment = as_of or timezone.now()
        return memory.valid_until is None or memory.valid_until > moment

    def can_write_memory(self, memory: Any) -> bool:
        """May change this memory (supersede, patch): read it, write its scope, and hold its clearance."""
        return self.can_read_memory(memory, history=True) and memory.scope_id in self.writable_scope_ids


def clearance_name(organization_id: int, rank: int) -> str:
    name = ClearanceLevel.objects.filter(organization_id=organization_id, rank=rank).values_list("name", flat=True).first()
    return name or str(rank)


def clearance_names(organization_id: int) -> dict[int, str]:
    return dict(ClearanceLevel.objects.filter(organization_id=organization_id).values_list("rank", "name"))


def principals_for_user(user: User) -> Iterable[Principal]:
    memberships = Membership.objects.filter(user=user).select_related("organization", "user").order_by("organization__name")
    return [Principal(m) for m in memberships]


def touch_token(token: ApiToken) -> None:
    """Record use without a read-modify-write race; at most once a minute per token."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
