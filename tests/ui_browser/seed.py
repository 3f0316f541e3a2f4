"""A realistic small team memory for browser tests and screenshots: Acme Robotics.

Built through the real services (memory_create / memory_supersede / memory_redact), so every
row obeys the write rules. Only `created_at` is moved back afterwards, to give the dashboard's
"added per week" chart a history — the services always stamp "now".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from memories.access import Principal
from memories.models import Membership, Memory, Organization, Scope
from memories.services import tenancy
from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede

PASSWORD = "pw-for-tests-1"

# (author key, days ago, fields)
_MEMORIES: list[tuple[str, int, dict[str, Any]]] = [
    (
        "eve",
        2,
        {
            "title": "API rate limiting policy",
            "scope": "engineering",
            "category": "policy",
            "source": "GitHub",
            "source_url": "https://github.com/acme/fleet-api/pull/1423",
            "tags": ["api", "security"],
            "clearance_min": "Contractor",
            "content": "All external API endpoints must implement **rate limiting**: 1,200 requests per minute per token, "
            "with `429` responses carrying `Retry-After`.\n\n- Internal services are exempt when called over the mesh.\n"
            "- Limits are configured in `gateway/limits.yaml`; changes need a review from platform.\n\n"
            "Merged in acme/fleet-api#1423 after the March load test.",
        },
    ),
    (
        "eve",
        5,
        {
            "title": "Incident 2031: dock controller timeouts",
            "scope": "engineering",
            "category": "incident",
            "source": "Slack",
            "source_url": "https://acme.slack.com/archives/C0INC/p1712",
            "tags": ["incident", "docks"],
            "clearance_min": "Employee",
            "content": "E_DOCK_TIMEOUT spiked to 14% for 40 minutes. Root cause: the retry budget in dockd was shared across "
            "robots, so one stuck robot starved the others. Fix: per-robot budgets (PLAT-1423). Follow-up: alert on "
            "budget exhaustion, not on timeouts.",
        },
    ),
    (
        "mo",
        9,
        {
            "title": "Deploy freeze on Fridays after 15:00",
            "scope": "engineering",
            "category": "decision",
            "source": "Meeting",
            "tags": ["deploys", "process"],
            "clearance_min": "Contractor",
            "content": "Decided in the weekly ops review: no production deploys on Fridays after 15:00 local time, except "
            "hotfixes approved by the on-call lead. Canary first, then 10%, then everyone.",
        },
    ),
    (
        "ada",
        12,
        {
            "title": "Board update: acquisition talks paused",
            "scope": "engineering",
            "category": "decision",
            "source": "Gmail",
            "tags": ["board"],
            "clearance_min": "Executive",
            "content": "Talks with Initech are paused until the audit closes. Do not discuss externally.",
        },
    ),
    (
        "mo",
        16,
        {
            "title": "Discounts above 20% need VP sign-off",
            "scope": "sales",
            "category": "policy",
            "source": "Slack",
            "tags": ["pricing"],
            "clearance_min": "Manager",
            "content": "Agreed in #sales-leads after the Northwind deal: discounts above 20% need a VP of Sales approval "
            "recorded in the CRM before the quote goes out.",
        },
    ),
    (
        "eve",
        20,
        {
            "title": "How to rotate the fleet signing key",
            "scope": "engineering",
            "category": "runbook",
            "source": "Notion",
            "source_url": "https://www.notion.so/acme/rotate-signing-key",
            "tags": ["security", "runbook"],
            "clearance_min": "Employee",
            "content": "1. Generate the new key in the HSM.\n2. Publish the public half to `keys.acme.dev`.\n"
            "3. Roll the fleet in waves of 50 robots.\n4. Revoke the old key after 7 days.",
        },
    ),
    (
        "ada",
        26,
        {
            "title": "Remote work policy",
            "scope": "handbook",
            "category": "policy",
            "source": "Google Drive",
            "tags": ["hr"],
            "clearance_min": "Contractor",
            "content": "Everyone may work remotely up to three days a week. Core hours are 10:00–15:00 in your team's time zone.",
        },
    ),
    (
        "eve",
        31,
        {
            "title": "Staging database moved to Postgres 18",
            "scope": "engineering",
            "category": "announcement",
            "source": "GitHub",
            "source_url": "https://github.com/acme/infra/pull/88",
            "tags": ["database"],
            "clearance_min": "Contractor",
            "content": "Staging now runs PostgreSQL 18 with pgvector. Connection strings did not change.",
        },
    ),
    (
        "mo",
        38,
        {
            "title": "Q3 pipeline review notes",
            "scope": "sales",
            "category": "meeting",
            "source": "Meeting",
            "tags": ["pipeline"],
            "clearance_min": "Manager",
            "content": "Pipeline is 1.4× quota. Risks: the two largest deals depend on the SOC 2 report landing in August.",
        },
    ),
    (
        "eve",
        45,
        {
            "title": "Agent note: flaky test in dock simulator",
            "scope": "engineering",
            "category": "note",
            "source": "MCP",
            "tags": ["testing"],
            "clearance_min": "Contractor",
            "content": "test_dock_handoff fails about 1 in 30 runs when the simulator clock drifts; pinning the seed hides it.",
        },
    ),
    (
        "ada",
        52,
        {
            "title": "Security review checklist",
            "scope": "public-docs",
            "category": "howto",
            "source": "Upload",
            "tags": ["security"],
            "clearance_min": "Contractor",
            "content": "Threat model, dependency audit, secrets scan, and a sign-off from the security champion of the team.",
        },
    ),
]


@dataclass
class Team:
    org: Organization
    people: dict[str, Membership]
    memories: dict[str, Memory]

    def principal(self, key: str) -> Principal:
        return Principal(Membership.objects.select_related("organization", "user").get(pk=self.people[key].pk))


def build_team() -> Team:
    """Acme Robotics with Ada (Executive, admin), Mo (Manager), Eve (Employee), Carl (Contractor) and their memories."""
    org = tenancy.organization_create(slug="acme", name="Acme Robotics")
    tenancy.scope_create(organization=org, slug="engineering", name="Engineering")
    tenancy.scope_create(organization=org, slug="sales", name="Sales")
    tenancy.scope_create(
        organization=org, slug="handbook", name="Handbook", visibility=Scope.Visibility.ALL_MEMBERS, members_can_write=False
    )

    def person(key: str, name: str, clearance: str, grants: dict[str, bool], admin: bool = False) -> Membership:
        membership = tenancy.member_add(
            organization=org,
            email=f"{key}@acme.test",
            name=name,
            clearance=clearance,
            password=PASSWORD,
            role="admin" if admin else "member",
        )
        for slug, can_write in grants.items():
            tenancy.grant_set(membership=membership, scope=Scope.objects.get(organization=org, slug=slug), can_write=can_write)
        return membership

    people = {
        "ada": person("ada", "Ada Lovelace", "Executive", {"engineering": True, "sales": True, "handbook": True}, admin=True),
        "mo": person("mo", "Mo Kader", "Manager", {"engineering": True, "sales": True}),
        "eve": person("eve", "Eve Martin", "Employee", {"engineering": True}),
        "carl": person("carl", "Carl Jensen", "Contractor", {"engineering": False}),
    }
    team = Team(org=org, people=people, memories={})
    now = timezone.now()
    for author, days, fields in _MEMORIES:
        memory = memory_create(
            principal=team.principal(author), draft=MemoryDraft(valid_from=now - timedelta(days=days), **fields)
        ).memory
        Memory.objects.filter(pk=memory.pk).update(created_at=now - timedelta(days=days, hours=3))
        team.memories[fields["title"]] = memory
    # A policy that changed: the old version stays in the chain.
    old = team.memories["Deploy freeze on Fridays after 15:00"]
    newer = memory_supersede(
        principal=team.principal("mo"),
        memory_id=old.pk,
        changes={
            "title": "Deploy freeze on Fridays after 14:00",
            "content": old.content.replace("15:00", "14:00") + "\n\nMoved an hour earlier after two late-evening rollbacks.",
        },
    ).memory
    team.memories[newer.title] = newer
    # Something that should never have been written down.
    leaked = memory_create(
        principal=team.principal("eve"),
        draft=MemoryDraft(
            title="Customer contact list", content="Names and phone numbers of Northwind's buyers.", scope="engineering"
        ),
    ).memory
    memory_redact(principal=team.principal("eve"), memory_id=leaked.pk, reason="Personal data of a customer")
    return team
