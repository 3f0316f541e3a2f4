"""The leak suite's world: two organizations, principals at every rung and of every kind, and
canary strings planted everywhere something can be read — with an oracle that says, from the
world's own definition (never by asking the Principal), who may see each canary.

Built once per test module through the real services (see conftest.py), committed so the live
MCP server sees it too.

A canary is a set of strings (an invented word, a ticket id that the entity extractor picks up,
a tag) that appear in exactly one place. `allowed(who)` is the read rule applied to where it was
planted; every surface answer is searched for every canary string, and any string found whose
canary is not allowed for the principal is a leak.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model

from audit.models import AuditEvent
from connectors.services.connectors import connector_create
from memories.access import CliPrincipal, Principal
from memories.mcp.auth import mcp_resource_url
from memories.models import ApiToken, Membership, Memory, Organization, Scope
from memories.services import accounts, briefs, jobs, tenancy
from memories.services.conflicts.policy import conflict_policy_set
from memories.services.entities import entities_extract
from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede
from memories.services.oauth import oauth_grant_create
from memories.services.post_write import run_post_write
from memories.services.redactions import redaction_request_create

RUNGS = ("Contractor", "Employee", "Manager", "Executive")
ACME_SCOPES = ("public-docs", "handbook", "engineering", "sales", "leadership")
ALL_MEMBERS = frozenset({"public-docs", "handbook"})
PASSWORD = "pw-for-leak-tests-1"
ORG_KEYS = {"leak-acme": "acme", "leak-globex": "globex"}

# The principals each channel is asked by (keys of World.principals / World.sessions).
TOKEN_PRINCIPALS = (
    "exec",
    "mgradmin",
    "manager",
    "employee",
    "contractor",
    "lonely",
    "dual@acme",
    "gadmin",
    "dual@globex",
    "employee/engineering",
    "manager/sales-ro",
    "employee/expired",
    "employee/revoked",
    "employee/foreign",
    "gone",
    "split@acme",
    "split@globex",
)
MCP_PRINCIPALS = (*TOKEN_PRINCIPALS, "contractor/oauth")
SESSION_PRINCIPALS = (
    "exec",
    "mgradmin",
    "manager",
    "employee",
    "contractor",
    "lonely",
    "dual@acme",
    "gadmin",
    "dual@globex",
    "gone",
    "split@acme",
    "split@globex",
)

# The words every grid memory shares, so one recall/search reaches all of them.
SHARED_QUERY = "quarterly falcon review cadence"
_SYLLABLES = ("ba", "ke", "lo", "mi", "nu", "po", "ra", "si", "tu", "ve", "wo", "xi", "ya", "zo", "fe", "gu")


def _word(n: int) -> str:
    """An invented word (`zq` + three syllables), unique per n, all the same length so none contains another."""
    a, b, c = (n // 256) % 16, (n // 16) % 16, n % 16
    return f"zq{_SYLLABLES[a]}{_SYLLABLES[b]}{_SYLLABLES[c]}"


@dataclass(frozen=True)
class Who:
    """A principal of the world as the oracle knows it (independent of memories.access)."""

    name: str
    org: str
    email: str
    rung: int  # index into RUNGS
    admin: bool
    member_scopes: frozenset[str]  # scopes the membership reads (all-members ones included)
    token_scopes: frozenset[str] | None = None  # None: not narrowed
    read_only: bool = False
    usable: bool = True  # False: expired, revoked, deactivated — every answer is 401/404/redirect
    via: str = "token"  # token | oauth | session | connector
    secret: str = ""  # bearer for REST/MCP
    membership_id: int = 0
    also: tuple[Who, ...] = ()  # the same person's sessions in their other organizations (browser only)

    @property
    def readable(self) -> frozenset[str]:
        if not self.usable:
            return frozenset()
        if self.token_scopes is None:
            return self.member_scopes
        return self.member_scopes & self.token_scopes

    @property
    def sees_nothing(self) -> bool:
        return not self.readable


@dataclass
class Canary:
    key: str
    words: tuple[str, ...]
    allowed: Callable[[Who], bool]
    memory_id: str = ""
    # Memories whose canaries current surfaces (lists, recall) must show to whoever may read them.
    listed: bool = False
    scope: str = ""
    rung: int = 0
    org: str = "acme"
    # Who may open the object the canary lives in (its page answers 200); None: the same as `allowed`.
    # A redacted memory's page stays readable as history while its words are gone for everyone.
    readable: Callable[[Who], bool] | None = None

    def opens(self, who: Who) -> bool:
        return (self.readable or self.allowed)(who)


@dataclass
class World:
    orgs: dict[str, Organization] = field(default_factory=dict)
    members: dict[str, Membership] = field(default_factory=dict)
    principals: dict[str, Who] = field(default_factory=dict)
    canaries: list[Canary] = field(default_factory=list)
    memory_ids: dict[str, str] = field(default_factory=dict)  # canary key -> memory id
    entity_ids: dict[str, int] = field(default_factory=dict)  # ticket -> entity id (any org)
    conflict_id: str = ""
    conflicts: list[tuple[str, str, str]] = field(default_factory=list)  # (conflict id, new memory id, existing memory id)
    sessions: dict[str, Who] = field(default_factory=dict)  # browser sessions: member key -> Who
    job_id: str = ""
    connector_id: str = ""
    globex_connector_id: str = ""
    sales_connector_id: str = ""
    runs: dict[str, str] = field(default_factory=dict)  # connector id -> the id of its run
    audit_event_ids: dict[str, int] = field(default_factory=dict)  # canary key -> the audit event holding it
    redaction_request_id: str = ""
    authors: dict[str, str] = field(default_factory=dict)  # a named author -> the canary key of its memory
    connector_principal: Principal | None = None

    def word_index(self) -> dict[str, Canary]:
        return {word.lower(): canary for canary in self.canaries for word in canary.words}

    def leaks(self, who: Who, text: str) -> list[str]:
        """Every canary string in `text` that `who` may not see."""
        lowered = text.lower()
        return sorted(
            f"{canary.key}:{word}" for word, canary in self.word_index().items() if word in lowered and not canary.allowed(who)
        )

    def listed_for(self, who: Who, org: str) -> set[str]:
        """Keys of the current memories a complete list or recall must show `who` (in `org`)."""
        return {c.key for c in self.canaries if c.listed and c.org == org and c.allowed(who)}


def _history_reader(org: str, scope: str, rung: int) -> Callable[[Who], bool]:
    def allowed(who: Who) -> bool:
        return who.usable and who.org == org and scope in who.readable and who.rung >= rung

    return allowed


def _union(*rules: Callable[[Who], bool]) -> Callable[[Who], bool]:
    return lambda who: any(rule(who) for rule in rules)


def _admin_of(org: str) -> Callable[[Who], bool]:
    return lambda who: who.usable and who.org == org and who.admin and who.via != "oauth"


def _nobody(_who: Who) -> bool:
    return False


class _Builder:
    def __init__(self) -> None:
        self.world = World()
        self.counter = itertools.count(1)

    # -- people ---------------------------------------------------------------------------------
    def member(self, org: str, name: str, rung: int, *, admin: bool = False, grants: dict[str, bool] | None = None) -> Membership:
        email = f"{name}@{org}.leak.test"
        membership = tenancy.member_add(
            organization=self.world.orgs[org],
            email=email,
            clearance=RUNGS[rung],
            role=Membership.Role.ADMIN if admin else Membership.Role.MEMBER,
            password=PASSWORD,
        )
        for slug, can_write in (grants or {}).items():
            tenancy.grant_set(membership=membership, scope=self.scope(org, slug), can_write=can_write)
        self.world.members[f"{org}:{name}"] = membership
        return membership

    def scope(self, org: str, slug: str) -> Scope:
        return Scope.objects.get(organization=self.world.orgs[org], slug=slug)

    def who(self, key: str, membership: Membership, **options: Any) -> Who:
        org = ORG_KEYS[membership.organization.slug]
        grants = set(membership.grants.values_list("scope__slug", flat=True))
        all_members = set(
            Scope.objects.filter(organization=membership.organization, visibility=Scope.Visibility.ALL_MEMBERS).values_list(
                "slug", flat=True
            )
        )
        narrowed = options.pop("scopes", None)
        secret = ""
        via = options.pop("via", "token")
        expire = options.pop("expire", False)
        revoke = options.pop("revoke", False)
        if via == "token":
            token, secret = tenancy.token_create(
                membership=membership,
                name=f"leak {key}",
                scope_slugs=list(narrowed) if narrowed else None,
                read_only=options.get("read_only", False),
                expires_at=timezone.now() + timedelta(days=1) if expire else None,
            )
            if expire:
                # Time passing, not a rule skipped: the token was valid when made and is past its expiry now.
                ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
            if revoke:
                tenancy.token_revoke(token=token)
        who = Who(
            name=key,
            org=org,
            email=membership.user.email,
            rung=RUNGS.index(tenancy_rung(membership)),
            admin=membership.is_admin,
            member_scopes=frozenset(grants | all_members),
            token_scopes=frozenset(narrowed) if narrowed else None,
            via=via,
            secret=secret,
            membership_id=membership.pk,
            usable=not (expire or revoke) and options.pop("usable", True),
            read_only=options.pop("read_only", False),
        )
        self.world.principals[key] = who
        return who

    # -- canaries ---------------------------------------------------------------------------------
    def words(self) -> tuple[str, str]:
        n = next(self.counter)
        return _word(n), f"ZQK{n:03d}-{4000 + n}"

    def write(
        self, membership: Membership, key: str, *, scope: str, rung: int, extra: str = "", importing: bool = False, **fields: Any
    ) -> Memory:
        word, ticket = self.words()
        n = next(self.counter)
        # Words of its own keep each memory's embedding apart, so conflict detection pairs only the planted pair.
        filler = " ".join(_word(5000 + 40 * n + i) for i in range(40)) if not extra else ""
        content = (
            f"The {SHARED_QUERY} for {scope} at {RUNGS[rung]} level: the codeword is {word}, tracked in {ticket}. {extra}"
            f"\n\nNotes: {filler}"
            if filler
            else f"The {SHARED_QUERY} for {scope}: the codeword is {word}, tracked in {ticket}. {extra}"
        )
        fields.setdefault("title", f"Falcon review {word}")
        fields.setdefault("tags", [word])
        # An import (the CLI) may name the source's own author; anyone else writes as themselves.
        principal = CliPrincipal(membership) if importing else Principal(membership)
        memory = memory_create(
            principal=principal,
            draft=MemoryDraft(content=content, scope=scope, clearance_min=RUNGS[rung], **fields),
        ).memory
        org = ORG_KEYS[membership.organization.slug]
        self.world.canaries.append(
            Canary(
                key=key,
                words=(word, ticket),
                allowed=_history_reader(org, scope, rung),
                memory_id=str(memory.pk),
                listed=True,
                scope=scope,
                rung=rung,
                org=org,
            )
        )
        self.world.memory_ids[key] = str(memory.pk)
        entities_extract(memory.pk)
        return memory

    def canary(self, key: str) -> Canary:
        return next(c for c in self.world.canaries if c.key == key)


def tenancy_rung(membership: Membership) -> str:
    from memories.access import clearance_name

    return clearance_name(membership.organization_id, membership.clearance_rank)


def _github_connector(installer: Membership, name: str, repository: str, **options: Any) -> str:
    """A webhook-mode GitHub connector (its API address answers nothing: no test here calls it)."""
    return str(
        connector_create(
            principal=Principal(installer),
            kind="github",
            name=name,
            config={"repositories": [repository], "api_url": "http://127.0.0.1:9", "mode": "webhook"},
            credentials={"webhook_secret": f"leak-webhook-secret-{repository.split('/')[0]}"},
            **options,
        ).connector.pk
    )


def build_world() -> World:
    """Everything the suite reads, written through the services as the people of the world."""
    b = _Builder()
    w = b.world
    w.orgs["acme"] = tenancy.organization_create(slug="leak-acme", name="Leak Acme")
    w.orgs["globex"] = tenancy.organization_create(slug="leak-globex", name="Leak Globex")
    acme, globex = w.orgs["acme"], w.orgs["globex"]
    # The oracle keys organizations by these short names.
    for slug in ("engineering", "sales", "leadership"):
        tenancy.scope_create(organization=acme, slug=slug, visibility=Scope.Visibility.GRANTED)
    tenancy.scope_create(organization=acme, slug="handbook", visibility=Scope.Visibility.ALL_MEMBERS, members_can_write=False)
    tenancy.scope_create(organization=globex, slug="g-secret", visibility=Scope.Visibility.GRANTED)
    conflict_policy_set(organization=acme, policy="manual")

    def org_key(membership: Membership) -> str:
        return "acme" if membership.organization_id == acme.pk else "globex"

    # -- members: every rung, admins at two rungs, mixed grants ------------------------------------
    ex = b.member("acme", "exec", 3, admin=True, grants=dict.fromkeys(("engineering", "sales", "leadership", "handbook"), True))
    mgr_admin = b.member("acme", "mgradmin", 2, admin=True, grants={"sales": False})
    manager = b.member("acme", "manager", 2, grants={"engineering": True, "sales": False})
    employee = b.member("acme", "employee", 1, grants={"engineering": True})
    contractor = b.member("acme", "contractor", 0, grants={"engineering": False})
    lonely = b.member("acme", "lonely", 0)
    gone = b.member("acme", "gone", 2, grants={"engineering": True})
    dual_acme = b.member("acme", "dual", 1, grants={"sales": False})
    g_admin = b.member("globex", "gadmin", 3, admin=True, grants={"g-secret": True})
    dual_globex = tenancy.member_add(
        organization=globex, email=dual_acme.user.email, clearance="Executive", role=Membership.Role.ADMIN, password=None
    )
    tenancy.grant_set(membership=dual_globex, scope=b.scope("globex", "g-secret"), can_write=True)
    w.members["globex:dual"] = dual_globex
    # A person active in globex whose acme membership (wider: engineering and sales at Manager) is deactivated below.
    split_acme = b.member("acme", "split", 2, grants={"engineering": True, "sales": False})
    split_globex = tenancy.member_add(
        organization=globex, email=split_acme.user.email, clearance="Employee", role=Membership.Role.MEMBER, password=None
    )
    tenancy.grant_set(membership=split_globex, scope=b.scope("globex", "g-secret"), can_write=False)
    w.members["globex:split"] = split_globex

    # -- canaries at every (scope, clearance) of acme, written by the executive -----------------------
    for scope in ACME_SCOPES:
        for rung in range(4):
            b.write(ex, f"{scope}@{RUNGS[rung]}", scope=scope, rung=rung)
    # ... and in the other organization.
    b.write(g_admin, "globex:public-docs@Contractor", scope="public-docs", rung=0)
    b.write(g_admin, "globex:g-secret@Executive", scope="g-secret", rung=3)

    # Named authors (an import states the source's author): the author filter's typeahead and the lists
    # name one only to those who read one of its memories. (One word: a page echoes the filter it was asked.)
    for member, key, scope, rung in ((ex, "authored", "sales", 2), (g_admin, "globex:authored", "public-docs", 2)):
        author, _ = b.words()
        b.write(member, key, scope=scope, rung=rung, importing=True, author_name=f"Scribe-{author}")
        b.canary(key).words += (author,)
        w.authors[f"Scribe-{author}"] = key

    # A superseded version: the employee's note, replaced by the executive (history readers see both).
    old = b.write(employee, "superseded-v1", scope="engineering", rung=1, title="Staging database host")
    word, ticket = b.words()
    new = memory_supersede(
        principal=Principal(ex),
        memory_id=old.pk,
        changes={
            "content": f"The {SHARED_QUERY} staging host moved; the codeword is {word}, tracked in {ticket}.",
            "tags": [word],
        },
    ).memory
    entities_extract(new.pk)
    w.canaries.append(
        Canary("superseded-v2", (word, ticket), _history_reader("acme", "engineering", 1), str(new.pk), True, "engineering", 1)
    )
    w.memory_ids["superseded-v2"] = str(new.pk)
    b.canary("superseded-v1").listed = False

    # A redacted memory: its words must be nowhere, for anyone; the reason is kept for history readers and the log.
    redacted = b.write(employee, "redacted", scope="engineering", rung=0, title="Contractor laptop policy")
    b.canary("redacted").readable = b.canary("redacted").allowed
    b.canary("redacted").allowed = _nobody
    b.canary("redacted").listed = False
    reason_word, _ = b.words()
    memory_redact(principal=Principal(ex), memory_id=redacted.pk, reason=f"wrong figures {reason_word}")
    w.canaries.append(
        Canary(
            "redaction-reason",
            (reason_word,),
            _union(_history_reader("acme", "engineering", 0), _admin_of("acme")),
            str(redacted.pk),
        )
    )

    # A redaction request: the manager asks to redact the executive's memory. The requester and those who may
    # decide it (the author, admins) who read the memory see it; the audit log shows its reason to admins.
    word, _ = b.words()
    requested = redaction_request_create(
        principal=Principal(manager), memory_id=w.memory_ids["engineering@Manager"], reason=f"names a customer {word}"
    )
    w.redaction_request_id = str(requested.pk)
    reads_it, manager_email = _history_reader("acme", "engineering", 2), manager.user.email

    def sees_request(who: Who) -> bool:
        return reads_it(who) and (who.email == manager_email or (who.admin and not who.read_only))

    w.canaries.append(Canary("redaction-request", (word,), _union(sees_request, _admin_of("acme")), readable=sees_request))

    # An expired memory: readable as history (its page), never current.
    expired = b.write(
        ex,
        "expired",
        scope="engineering",
        rung=0,
        valid_from=timezone.now() - timedelta(days=10),
        valid_until=timezone.now() - timedelta(days=1),
    )
    b.canary("expired").listed = False
    assert expired.valid_until is not None

    # A proposed revision: the employee proposes a new version of the manager's memory.
    original = b.write(manager, "proposal-original", scope="engineering", rung=1, title="Release train schedule")
    word, ticket = b.words()
    proposal = memory_supersede(
        principal=Principal(employee),
        memory_id=original.pk,
        changes={
            "content": f"The {SHARED_QUERY} release train leaves weekly; codeword {word}, tracked in {ticket}.",
            "tags": [word],
        },
    )
    assert proposal.proposal is not None and proposal.memory.status == "proposed"
    base_rule = _history_reader("acme", "engineering", 1)
    w.canaries.append(
        Canary(
            "proposal",
            (word, ticket),
            lambda who: base_rule(who) and (who.email == employee.user.email or who.admin or who.rung >= 2),
            str(proposal.memory.pk),
        )
    )
    w.memory_ids["proposal"] = str(proposal.memory.pk)

    # An open conflict in sales between a Manager-level and an Executive-level memory: only those who
    # read both see it (a Manager reading sales sees one memory and no conflict).
    b.write(ex, "conflict-manager", scope="sales", rung=2, extra="Sales commission for new logos is 10% of first-year revenue.")
    second = b.write(
        ex, "conflict-executive", scope="sales", rung=3, extra="Sales commission for new logos is 12% of first-year revenue."
    )
    run_post_write(second.pk)
    from memories.models import Conflict

    conflict = Conflict.objects.filter(organization=acme, status="open", new_memory=second).first()
    assert conflict is not None, "the conflict pair was not detected"
    w.conflict_id = str(conflict.pk)

    # A meeting brief saved by the manager (a memory of its own).
    word, ticket = b.words()
    summary = f"We went through the {SHARED_QUERY}; codeword {word}, tracked in {ticket}. We decided to ship {word} on Friday."
    decided = f"We decided to ship {word} on Friday."
    start = summary.index(decided)
    saved = briefs.brief_save(
        principal=Principal(manager),
        draft=briefs.BriefDraft(
            title=f"Falcon sync {word}",
            summary=summary,
            decisions=[{"text": decided, "quote": decided, "source": "summary", "start": start, "end": start + len(decided)}],
            scope="engineering",
            clearance_min="Manager",
            tags=[word],
        ),
    ).memory
    entities_extract(saved.pk)
    w.canaries.append(
        Canary("brief", (word, ticket), _history_reader("acme", "engineering", 2), str(saved.pk), True, "engineering", 2)
    )
    w.memory_ids["brief"] = str(saved.pk)

    # A decision-extraction job: its transcript is the employee's own.
    word, _ = b.words()
    job = briefs.decisions_extract_start(
        principal=Principal(employee), summary="Falcon sync", transcript=f"Ada: We decided to ship {word} on Friday."
    )
    jobs.job_run(job.pk)
    w.job_id = str(job.pk)
    employee_email = employee.user.email
    w.canaries.append(
        Canary(
            "job", (word,), lambda who: who.usable and who.org == "acme" and who.email == employee_email and who.via != "oauth"
        )
    )

    # Audit details: a recall the executive made naming a canary (matching nothing), in each organization.
    from memories.selectors.recall import RecallQuery, recall

    for member, key in ((ex, "audit-acme"), (g_admin, "audit-globex")):
        word, _ = b.words()
        recall(Principal(member), RecallQuery(query=word, limit=5))
        w.canaries.append(Canary(key, (word,), _admin_of(org_key(member)), org=org_key(member)))
        recorded = AuditEvent.objects.filter(organization=member.organization, action="memory.recall", details__query=word)
        w.audit_event_ids[key] = recorded.get().pk

    # Connectors: a GitHub connector in each organization, named by a canary of its organization's members.
    acme_name, _ = b.words()
    globex_name, _ = b.words()
    w.canaries.append(Canary("connector-acme", (acme_name,), _member_of("acme"), org="acme"))
    w.canaries.append(Canary("connector-globex", (globex_name,), _member_of("globex"), org="globex"))
    w.connector_id = _github_connector(mgr_admin, f"Robots {acme_name}", "acme/robots", scope="public-docs")
    w.globex_connector_id = _github_connector(g_admin, f"Globex robots {globex_name}", "globex/robots", scope="g-secret")
    # A third, writing to sales at Manager: which items its runs could not read (and why) is for admins and
    # those who read sales at Manager; everyone in acme sees its card and counts.
    sales_name, _ = b.words()
    w.canaries.append(Canary("connector-acme-sales", (sales_name,), _member_of("acme"), org="acme"))
    w.sales_connector_id = _github_connector(ex, f"Deals {sales_name}", "acme/deals", scope="sales", clearance_min="Manager")
    from connectors.models import Connector, SyncRun

    # A run of each connector that could not read one item, as a sync records it (syncing itself is tested in
    # tests/connectors): the item and its reason, and the checkpoints admins see.
    for connector_id, org, scope, rung in (
        (w.connector_id, "acme", "public-docs", 0),
        (w.sales_connector_id, "acme", "sales", 2),
        (w.globex_connector_id, "globex", "g-secret", 0),
    ):
        item, _ = b.words()
        position, _ = b.words()
        run = SyncRun.objects.create(
            organization=w.orgs[org],
            connector_id=connector_id,
            trigger=SyncRun.Trigger.MANUAL,
            status=SyncRun.Status.SUCCEEDED,
            items_seen=1,
            items_failed=1,
            failures=[{"external_id": f"robots#{item}", "reason": f"GitHub refused '{item} plan' (403)."}],
            checkpoint_before={"cursor": position},
            checkpoint_after={"cursor": position},
        )
        w.runs[connector_id] = str(run.pk)
        details = _union(_admin_of(org), _history_reader(org, scope, rung))
        w.canaries.append(Canary(f"run-item-{scope}", (item,), details, org=org))
        w.canaries.append(Canary(f"run-checkpoint-{scope}", (position,), _admin_of(org), org=org))

    w.connector_principal = Principal.as_connector(
        Connector.objects.select_related("installed_by__organization", "installed_by__user").get(pk=w.connector_id)
    )

    w.conflicts = [
        (str(c.pk), str(c.new_memory_id), str(c.existing_memory_id)) for c in Conflict.objects.filter(organization=acme)
    ]

    # Entities: every ticket id is one (the canaries reach the entity graph through them).
    from memories.models import Entity

    for entity in Entity.objects.filter(kind="ticket", name__startswith="ZQK"):
        w.entity_ids[entity.name] = entity.pk

    # -- principals -------------------------------------------------------------------------------
    b.who("exec", ex)
    b.who("mgradmin", mgr_admin)
    b.who("manager", manager)
    b.who("employee", employee)
    b.who("contractor", contractor)
    b.who("lonely", lonely)
    b.who("dual@acme", dual_acme)
    b.who("gadmin", g_admin)
    b.who("dual@globex", dual_globex)
    b.who("employee/engineering", employee, scopes=("engineering",))
    b.who("manager/sales-ro", manager, scopes=("sales",), read_only=True)
    b.who("employee/expired", employee, expire=True)
    b.who("employee/revoked", employee, revoke=True)
    # A token narrowed to a scope its member no longer reads (the grant was revoked after): nothing.
    tenancy.grant_set(membership=employee, scope=b.scope("acme", "sales"), can_write=False)
    b.who("employee/foreign", employee, scopes=("sales",))
    tenancy.grant_revoke(membership=employee, scope=b.scope("acme", "sales"))
    foreign = w.principals["employee/foreign"]
    w.principals["employee/foreign"] = Who(**{**foreign.__dict__, "member_scopes": w.principals["employee"].member_scopes})
    # A deactivated member: the token made before is revoked with the membership.
    b.who("gone", gone)
    accounts.member_deactivate(membership=gone, by=Principal(ex))
    w.principals["gone"] = Who(**{**w.principals["gone"].__dict__, "usable": False})
    # Deactivated in acme (its token revoked with it), still active in globex.
    b.who("split@acme", split_acme)
    b.who("split@globex", split_globex)
    accounts.member_deactivate(membership=split_acme, by=Principal(ex))
    w.principals["split@acme"] = Who(**{**w.principals["split@acme"].__dict__, "usable": False})
    # An OAuth grant of the contractor, narrowed to engineering (MCP only).
    w.principals["contractor/oauth"] = _oauth_principal(contractor, ("engineering",), w.principals["contractor"])
    # Browser sessions of every member: the membership's own rights, no token narrowing.
    for key in SESSION_PRINCIPALS:
        base = w.principals[key]
        w.sessions[key] = Who(**{**base.__dict__, "via": "session", "secret": "", "token_scopes": None})
    for one, other in (("dual@acme", "dual@globex"), ("dual@globex", "dual@acme")):
        w.sessions[one] = Who(**{**w.sessions[one].__dict__, "also": (w.sessions[other],)})
    # A session left in acme when that membership was deactivated carries on in globex (channels.browser
    # points it at acme): it is the globex member, no more; neither split session is offered acme's memories.
    w.sessions["split@acme"] = Who(**{**w.sessions["split@globex"].__dict__, "name": "split@acme"})
    # Webhook secrets are nobody's to read, in any answer.
    w.canaries.append(Canary("webhook-secret", ("leak-webhook-secret-acme", "leak-webhook-secret-globex"), _nobody))
    return w


def _member_of(org: str) -> Callable[[Who], bool]:
    return lambda who: who.usable and who.org == org and who.via != "oauth"


def _oauth_principal(membership: Membership, scopes: tuple[str, ...], base: Who) -> Who:
    """An OAuth client's access, as the consent page grants it: a narrowed Cortex token behind the
    toolkit's access and refresh tokens (the authorization dance itself is tested in tests/mcp)."""
    application = get_application_model().objects.create(
        name="Leak agent",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1:33418/callback",
        skip_authorization=False,
    )
    grant = oauth_grant_create(
        membership=membership,
        application=application,
        resource=mcp_resource_url(),
        scope_slugs=list(scopes),
        read_only=False,
        expires_at=None,
    )
    raw = f"leak-oauth-{uuid.uuid4().hex}"
    access = get_access_token_model().objects.create(
        user=membership.user,
        application=application,
        token=raw,
        token_checksum=hashlib.sha256(raw.encode()).hexdigest(),
        expires=timezone.now() + timedelta(hours=1),
        scope="mcp",
        resource=[mcp_resource_url()],
    )
    get_refresh_token_model().objects.create(
        user=membership.user,
        application=application,
        token=f"leak-refresh-{uuid.uuid4().hex}",
        access_token=access,
        token_family=grant.pk,
    )
    return Who(
        name="contractor/oauth",
        org=base.org,
        email=base.email,
        rung=base.rung,
        admin=base.admin,
        member_scopes=base.member_scopes,
        token_scopes=frozenset(scopes),
        via="oauth",
        secret=raw,
        membership_id=base.membership_id,
    )
