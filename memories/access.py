"""The access chokepoint: a Principal decides what its holder may read and write.

Every tenant read and write in Cortex — REST, UI, MCP, CLI, tasks — is made on behalf
of a Principal. Selectors filter with it; services check it. Nothing else decides.

Read rule (scopes): same organization ∧ (scope is all_members ∨ the membership holds a
grant) ∧ (the token does not narrow scopes ∨ the scope is among the token's scopes).
Write rule (scopes): readable ∧ (all_members scope that members may write ∨ a grant with
can_write) ∧ the token is not read-only. Memories add clearance, status and validity on
top of that (see `can_read_memory`).

Write rules for one object live here too — `can_write_scope`, `can_supersede`, `can_redact`,
`can_decide`, `require_admin` — so services (which enforce them) and the UI, REST, MCP and CLI
(which offer or refuse an action) ask the same question. A Principal acts as a member (browser
session), through a token, or as a connector (`Principal.as_connector`: the installing
member's scopes and clearance, audited as the connector). The operator at the server console
is an `Operator`: one organization, every scope, audited as the CLI.

Ids from outside are parsed once, by `parse_id`; the selectors that fetch one object for a
principal are named `<entity>_for(principal, id)` and raise NotFound for missing and
forbidden alike.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from audit.models import AuditEvent
from audit.services import Actor
from cortex_site.errors import Denial, PermissionDenied
from memories.models import ApiToken, ClearanceLevel, Membership, Organization, Scope, User

if TYPE_CHECKING:
    from collections.abc import Iterable


class DenialRule(StrEnum):
    """The rule that hid an existing object from a principal (its 404 is the same as a missing id's;
    the rule goes only to the owner's audit log, see memories.services.denials)."""

    ORGANIZATION = "organization"  # it belongs to another organization
    SCOPE = "scope"  # its scope is neither all_members nor granted to the membership
    # The membership reads the scope; the token was narrowed away from it.
    TOKEN_NARROWING = "token_narrowing"  # noqa: S105 - a rule name, not a secret
    CLEARANCE = "clearance"  # its clearance_min is above the principal's rung
    PROPOSAL = "proposal"  # a proposed revision, read only by its proposer and those who may accept it
    OWNER = "owner"  # a personal object (a job, a token, a redaction request) of someone else


def parse_id(value: Any) -> uuid.UUID | None:
    """The UUID an id from outside names (memories, conflicts, jobs, tokens), or None for anything
    that is not one — which the `*_for` selectors answer as NotFound, like a missing id."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None


def parse_int_id(value: Any) -> int | None:
    """The same for integer ids (members, entities): None for anything but a positive integer."""
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value))
    except (ValueError, TypeError):
        return None
    return number if number > 0 else None


class Principal:
    """A membership acting directly (browser session), through an API token, or as a connector it installed."""

    def __init__(self, membership: Membership, token: ApiToken | None = None, *, connector: Any = None) -> None:
        if token is not None and token.membership_id != membership.pk:
            raise ValueError("token does not belong to membership")
        if token is not None and connector is not None:
            raise ValueError("a principal acts through a token or as a connector, not both")
        self.membership = membership
        self.token = token
        self.connector = connector

    @classmethod
    def as_connector(cls, connector: Any) -> Principal:
        """The connector's Principal: the member who installed it (`connector.installed_by`), with
        that member's scopes and clearance, audited as the connector."""
        return cls(connector.installed_by, connector=connector)

    def __repr__(self) -> str:
        via = f" via token {self.token.prefix}" if self.token else ""
        if self.connector is not None:
            via = f" as {self.connector.kind} connector {self.connector.name!r}"
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
        if self.connector is not None:
            return Actor(
                kind=AuditEvent.ActorKind.CONNECTOR,
                label=f"{self.connector.kind} connector {self.connector.name!r}",
                user_id=self.user.pk,
                connector_id=str(self.connector.pk),
            )
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
        if memory.status == "proposed":
            return history and self._may_see_proposal(memory)
        if history:
            return True
        if memory.status != "active":
            return False
        if as_of is not None and memory.valid_from > as_of:
            return False  # not yet valid at that moment
        moment = as_of or timezone.now()
        return memory.valid_until is None or memory.valid_until > moment

    def scope_denial_rule(self, scope_id: int) -> DenialRule | None:
        """Why this principal may not read a scope of its organization: the membership's rule, or
        the token's narrowing; None when it may."""
        if scope_id in self.readable_scope_ids:
            return None
        scope = self._scopes.get(scope_id)
        if scope is not None and self._membership_reads(scope):
            return DenialRule.TOKEN_NARROWING
        return DenialRule.SCOPE

    def memory_denial_rule(self, memory: Any) -> DenialRule | None:
        """The rule `can_read_memory(memory, history=True)` refuses it by, in the order it checks
        them; None when the principal may read it."""
        if memory.organization_id != self.organization_id:
            return DenialRule.ORGANIZATION
        if (rule := self.scope_denial_rule(memory.scope_id)) is not None:
            return rule
        if memory.clearance_rank > self.clearance_rank:
            return DenialRule.CLEARANCE
        if not self.can_read_memory(memory, history=True):
            return DenialRule.PROPOSAL
        return None

    def _may_see_proposal(self, memory: Any) -> bool:
        """A proposed revision is read by its proposer and by those who may accept it (authority
        over the memory it would replace, which `supersedes` names until it is decided)."""
        if memory.created_by_id is not None and memory.created_by_id == self.user.pk:
            return True
        original = memory.supersedes
        return original is not None and (self.is_admin or self.outranks_author_of(original))

    def can_write_memory(self, memory: Any) -> bool:
        """May change this memory (supersede, patch, decide its conflicts): read it, write its scope, and hold its clearance."""
        return self.can_read_memory(memory, history=True) and memory.scope_id in self.writable_scope_ids

    # -- write rules for one object (services enforce them; interfaces ask them to offer actions) --
    @cached_property
    def authority(self) -> int:
        """The rung this principal changes other people's knowledge with: its clearance, or the top
        rung of the ladder for an admin (a connector acts with its installer's authority)."""
        if self.is_admin:
            return max(clearance_names(self.organization_id), default=self.clearance_rank)
        return self.clearance_rank

    def is_author_of(self, memory: Any) -> bool:
        return memory.author_id is not None and memory.author_id == self.user.pk

    def outranks_author_of(self, memory: Any) -> bool:
        """Authority at least the memory's author's (see `author_rank`); the author always may."""
        return self.is_author_of(memory) or self.authority >= author_rank(memory)

    def can_supersede(self, memory: Any) -> bool:
        """May store a new version of this memory that is current at once: write it, and hold authority
        at least its author's. Its state (active or not) is the caller's check."""
        return self.can_write_memory(memory) and self.outranks_author_of(memory)

    def can_propose_revision(self, memory: Any) -> bool:
        """May write the memory but not supersede it: a new version waits as a proposed revision."""
        return self.can_write_memory(memory) and not self.outranks_author_of(memory)

    def wrote_as_connector(self, memory: Any) -> bool:
        """Acting as a connector on a memory a connector source wrote in the same organization."""
        return (
            self.connector is not None
            and memory.organization_id == self.organization_id
            and memory.source.strip().lower() in CONNECTOR_SOURCES
        )

    def can_redact(self, memory: Any) -> bool:
        """The author, an admin, or the connector that wrote it — never through a read-only token."""
        if self.read_only or not self.can_read_memory(memory, history=True):
            return False
        return self.is_author_of(memory) or self.is_admin or self.wrote_as_connector(memory)

    def can_request_redaction(self, memory: Any) -> bool:
        """Anyone else who can read the memory may ask its author or an admin to redact it."""
        return not self.read_only and self.can_read_memory(memory, history=True) and not self.can_redact(memory)

    def can_decide(self, conflict: Any) -> bool:
        """May decide (or re-open) a conflict it can see: an admin, or a member whose authority is at
        least both memories' authors' — never through a read-only token."""
        if self.read_only or conflict.organization_id != self.organization_id:
            return False
        memories = (conflict.new_memory, conflict.existing_memory)
        if not all(self.can_read_memory(m, history=True) for m in memories):
            return False
        return self.is_admin or all(self.outranks_author_of(m) for m in memories)

    def require_admin(self, message: str = "Only organization admins can do this.") -> None:
        """Raise PermissionDenied (ADMIN_REQUIRED) unless this principal administers its organization."""
        if not self.is_admin:
            raise PermissionDenied(message, error_code="ADMIN_REQUIRED")


class Operator:
    """The operator at the server's console (the `cortex` CLI) acting on one organization.

    Not a member: it administers the organization and reads every memory of it whatever the
    scope or clearance (export holds everything — the file is as sensitive as the database);
    every event is audited with actor kind `cli`. It stores no memories: imports act as a
    member (`CliPrincipal`).
    """

    read_only = False
    is_admin = True
    membership = None
    token = None
    connector = None

    def __init__(self, organization: Organization) -> None:
        self.organization = organization

    def __repr__(self) -> str:
        return f"<Operator @ {self.organization.slug}>"

    @property
    def organization_id(self) -> int:
        return self.organization.pk

    @property
    def actor(self) -> Actor:
        return Actor.cli()

    @cached_property
    def readable_scope_ids(self) -> frozenset[int]:
        return frozenset(Scope.objects.filter(organization_id=self.organization_id).values_list("pk", flat=True))

    @cached_property
    def clearance_rank(self) -> int:
        return max(clearance_names(self.organization_id), default=0)

    def require_admin(self, message: str = "") -> None:
        """The operator administers every organization."""


class CliPrincipal(Principal):
    """A member acting through the operator CLI (imports): the member's rules, audited as the CLI for that person."""

    @property
    def actor(self) -> Actor:
        return Actor(kind=AuditEvent.ActorKind.CLI, label=f"{self.user.email} (cli)", user_id=self.user.pk)


def hidden(principal: Principal | Operator, target_type: str, target: Any, rule: DenialRule | None) -> Denial | None:
    """The Denial a `*_for` selector attaches to its NotFound for an object that exists (`target`,
    with `organization_id` and `pk`): the rule that hid it — always `organization` when it belongs
    to another organization than the principal's, whatever `rule` says."""
    if target is None:
        return None
    if target.organization_id != principal.organization_id:
        rule = DenialRule.ORGANIZATION
    if rule is None:
        return None
    return Denial(organization_id=target.organization_id, target_type=target_type, target_id=str(target.pk), rule=rule)


def memory_denial(principal: Principal | Operator, memory: Any) -> Denial | None:
    """The Denial for a memory the principal may not read (the operator is refused only another organization's)."""
    rule = principal.memory_denial_rule(memory) if isinstance(principal, Principal) else None
    return hidden(principal, "memory", memory, rule)


# Sources that connectors write (memories.source, compared lower-case).
CONNECTOR_SOURCES = frozenset({"github", "slack", "gmail", "google drive", "notion"})


def author_rank(memory: Any) -> int:
    """The authority a memory's author holds over it: the author's clearance rung in the memory's
    organization. A memory without a Cortex author (imported under a name, written by a connector)
    or whose author left the organization has the rung of its own clearance_min: whoever may read
    it at that rung and write its scope holds as much authority over it as its source did."""
    if memory.author_id is not None:
        rank = (
            Membership.objects.filter(user_id=memory.author_id, organization_id=memory.organization_id)
            .values_list("clearance_rank", flat=True)
            .first()
        )
        if rank is not None:
            return int(rank)
    return int(memory.clearance_rank)


def author_authority(memory: Any) -> int:
    """The authority a memory's author writes with (as `Principal.authority`): the author's rung,
    the top rung for an admin; a memory without a Cortex author writes with its clearance_min's rung."""
    if memory.author_id is not None:
        membership = (
            Membership.objects.filter(user_id=memory.author_id, organization_id=memory.organization_id)
            .values_list("clearance_rank", "role")
            .first()
        )
        if membership is not None:
            rank, role = membership
            if role == Membership.Role.ADMIN:
                return max(clearance_names(memory.organization_id), default=int(rank))
            return int(rank)
    return int(memory.clearance_rank)


def could_supersede(winner: Any, loser: Any) -> bool:
    """Could the winner's author have superseded the loser by hand (authority, not scope)? The
    rule the automatic conflict policy follows, so it never overrules authority."""
    if winner.author_id is not None and winner.author_id == loser.author_id:
        return True
    return author_authority(winner) >= author_rank(loser)


def clearance_name(organization_id: int, rank: int) -> str:
    name = ClearanceLevel.objects.filter(organization_id=organization_id, rank=rank).values_list("name", flat=True).first()
    return name or str(rank)


def clearance_names(organization_id: int) -> dict[int, str]:
    return dict(ClearanceLevel.objects.filter(organization_id=organization_id).values_list("rank", "name"))


def principals_for_user(user: User) -> Iterable[Principal]:
    """The person's Principal in each organization they are an active member of (a deactivated
    membership acts for nothing, here as in sessions and tokens)."""
    memberships = (
        Membership.objects.filter(user=user, deactivated_at=None)
        .select_related("organization", "user")
        .order_by("organization__name")
    )
    return [Principal(m) for m in memberships]


def touch_token(token: ApiToken) -> None:
    """Record use without a read-modify-write race; at most once a minute per token."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
