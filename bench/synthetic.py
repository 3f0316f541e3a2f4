"""A synthetic, seeded team-knowledge corpus for the recall benchmark (bench/recall.py).

Memories are built from word lists and sentence templates around ~400 topics (a system or
product × a subject), so texts on one topic share vocabulary and cluster in embedding space
the way real team notes do, while every memory is different. Ids, numbers, people and
customers vary per memory, so exact-token queries have something to hit.

Deterministic: the same seed and index always give the same memory (and query).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SYSTEMS = [
    "Dock API", "Fleet Console", "billing service", "telemetry pipeline", "nav stack", "pathfinder firmware",
    "auth gateway", "search cluster", "data warehouse", "mobile app", "customer portal", "payments ledger",
    "CI pipeline", "Kubernetes platform", "edge proxy", "notification service", "reporting jobs", "identity directory",
    "support desk", "sales CRM",
]  # fmt: skip
SUBJECTS = [
    ("rate limiting", ["throttle", "burst", "quota", "429", "limit", "requests"]),
    ("on-call rotation", ["pager", "handoff", "shift", "escalation", "primary", "secondary"]),
    ("incident review", ["outage", "root cause", "timeline", "mitigation", "postmortem", "customer impact"]),
    ("release process", ["release train", "freeze", "canary", "rollback", "changelog", "tag"]),
    ("access control", ["roles", "permissions", "least privilege", "audit", "SSO", "groups"]),
    ("data retention", ["retention window", "deletion", "archive", "GDPR", "backup", "purge"]),
    ("pricing", ["tier", "discount", "list price", "annual contract", "renewal", "invoice"]),
    ("performance tuning", ["latency", "p95", "cache", "index", "connection pool", "profiling"]),
    ("database migration", ["schema", "backfill", "downtime", "replica", "cutover", "Postgres"]),
    ("security patching", ["CVE", "patch window", "vulnerability", "scanner", "advisory", "hotfix"]),
    ("onboarding", ["laptop", "accounts", "buddy", "first week", "checklist", "training"]),
    ("cost review", ["budget", "spend", "reserved instances", "forecast", "savings", "chargeback"]),
    ("API versioning", ["v1", "v2", "deprecation", "sunset", "breaking change", "compatibility"]),
    ("monitoring", ["dashboard", "alert", "SLO", "error budget", "metrics", "tracing"]),
    ("vendor evaluation", ["vendor", "RFP", "shortlist", "contract", "security review", "pilot"]),
    ("capacity planning", ["headroom", "growth", "forecast", "nodes", "storage", "peak"]),
    ("backup and restore", ["snapshot", "restore drill", "RPO", "RTO", "offsite", "point in time"]),
    ("customer escalation", ["escalation", "account manager", "SLA", "credit", "apology", "follow-up"]),
    ("hiring plan", ["headcount", "req", "interview loop", "offer", "recruiter", "level"]),
    ("feature flags", ["flag", "rollout", "percentage", "kill switch", "experiment", "cleanup"]),
]  # fmt: skip
TEAMS = [
    "platform",
    "SRE",
    "firmware",
    "Fleet Console",
    "Dock API",
    "sales",
    "finance",
    "legal",
    "support",
    "people",
    "product",
    "security",
]
PEOPLE = [
    "Priya Raman", "Diego Alvarez", "Hannah Kessler", "Mei-Lin Chou", "Fatima Haddad", "Ravi Subramanian", "Colm O'Driscoll",
    "Yuki Tanaka", "Beatriz Costa", "Derek Hollis", "Grace Mensah", "Oliver Brandt", "Rebecca Stein", "Elena Rossi",
    "Patrick Nolan", "Sofia Lindgren", "Laura Whitman", "Arjun Mehta", "Kwame Asante", "Aisha Rahman",
]  # fmt: skip
CUSTOMERS = [
    "Northwind Logistics",
    "Halvorsen Freight",
    "BlueRiver Grocers",
    "Kestrel Pharma",
    "Crestline Auto Parts",
    "Meridian Home Goods",
    "Hoshino Trading",
]
VERBS = ["decided to", "agreed to", "will", "must", "plans to", "no longer will", "started to", "proposed to"]
ACTIONS = ["raise", "lower", "replace", "document", "automate", "review", "split", "retire", "monitor", "standardise"]
WHEN = [
    "starting next quarter",
    "from the October release",
    "after the Q3 review",
    "effective immediately",
    "by the end of the month",
    "once the migration lands",
]
REASONS = [
    "because the last incident showed the old setting was too loose",
    "since customers kept hitting the limit during peak hours",
    "to cut the on-call load that the survey flagged",
    "as the audit asked for a written owner",
    "because costs grew faster than usage",
    "so that new hires can follow it without asking",
    "after two near misses in the staging environment",
    "because the vendor changed its terms",
]  # fmt: skip
FILLER = [
    "Questions go to the {team} channel.",
    "The owner is {person}; ask them before changing anything.",
    "See ticket {ticket} for the history of this decision.",
    "This replaces the note from {year} on the same topic.",
    "{customer} was the first account affected, which is why it came up.",
    "Numbers were checked against the {system} dashboard on {date}.",
    "Exceptions need written approval from the {team} lead.",
    "The change was announced in the all-hands and in the {team} newsletter.",
    "We will revisit this in {months} months or after the next incident, whichever comes first.",
    "A runbook entry covers the manual steps if automation fails.",
]  # fmt: skip
CATEGORIES = ["decision", "policy", "runbook", "incident", "note", "meeting", "faq", "spec"]
SOURCES = ["Notion", "Slack", "GitHub", "Google Drive", "Gmail", "Manual", "Meeting"]
DOC_TYPES = ["policy", "decision", "runbook", "notes", "review", "plan", "FAQ", "update"]
QUESTION_FORMS = [
    "what did {team} decide about {subject} for the {system}",
    "{system} {subject}",
    "who owns {subject} on the {system}",
    "{subject} {kw} {system}",
    "how do we handle {kw} in the {system} {subject}",
    "{ticket}",
    "latest {subject} {doctype} {system}",
    "why did we {action} the {system} {kw}",
]  # fmt: skip

# Scope layout: (slug, share of memories). A Contractor reads public-docs only.
SCOPES = [
    ("public-docs", 0.20), ("engineering", 0.20), ("sre", 0.10), ("sales", 0.10), ("finance", 0.08),
    ("people", 0.08), ("legal", 0.06), ("support", 0.08), ("product", 0.06), ("leadership", 0.04),
]  # fmt: skip
# Clearance ranks 0..3 (Contractor, Employee, Manager, Executive) and their shares.
CLEARANCE_SHARES = [0.50, 0.25, 0.15, 0.10]
LONG_SHARE = 0.08  # memories long enough to be split into several chunks
EXPIRED_SHARE = 0.03  # valid_until already past: invisible to recall
HOT_TOPICS, HOT_SHARE = 20, 0.30


@dataclass(frozen=True)
class SyntheticMemory:
    index: int
    title: str
    content: str
    scope: str
    clearance_rank: int
    category: str
    source: str
    tags: list[str]
    age_days: float
    expired: bool
    topic: int
    ticket: str


def topic_count() -> int:
    return len(SYSTEMS) * len(SUBJECTS)


def _rng(seed: int, index: int, salt: str = "") -> random.Random:
    return random.Random(f"{seed}:{salt}:{index}")


def _ticket(rng: random.Random, team: str) -> str:
    prefix = "".join(w[0] for w in team.split()).upper()[:3] or "GEN"
    return f"{prefix}-{rng.randint(100, 9999)}"


def _sentence(rng: random.Random, system: str, subject: str, keywords: list[str], team: str, person: str, ticket: str) -> str:
    kw = rng.choice(keywords)
    form = rng.randrange(6)
    if form == 0:
        return (
            f"The {team} team {rng.choice(VERBS)} {rng.choice(ACTIONS)} "
            f"the {system} {kw} {rng.choice(WHEN)}, {rng.choice(REASONS)}."
        )
    if form == 1:
        return (
            f"For the {system}, {subject} now means {kw} is set to "
            f"{rng.randint(2, 500)} and reviewed every {rng.randint(1, 12)} weeks."
        )
    if form == 2:
        return f"{person} wrote that the {kw} on the {system} {rng.choice(VERBS)} {rng.choice(ACTIONS)} {rng.choice(WHEN)}."
    if form == 3:
        return f"During the {subject} discussion we noted that {rng.choice(keywords)} and {kw} interact; {rng.choice(REASONS)}."
    if form == 4:
        return (
            f"Ticket {ticket} tracks the {system} {kw} work; "
            f"{rng.choice(FILLER).format(**_slots(rng, system, team, person, ticket))}"
        )
    return rng.choice(FILLER).format(**_slots(rng, system, team, person, ticket))


def _slots(rng: random.Random, system: str, team: str, person: str, ticket: str) -> dict[str, str]:
    return {
        "team": team,
        "person": person,
        "ticket": ticket,
        "year": str(rng.randint(2019, 2024)),
        "customer": rng.choice(CUSTOMERS),
        "system": system,
        "date": f"{rng.randint(2023, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "months": str(rng.randint(2, 12)),
    }


def _weighted(rng: random.Random, shares: list[float]) -> int:
    point, total = rng.random(), 0.0
    for i, share in enumerate(shares):
        total += share
        if point < total:
            return i
    return len(shares) - 1


def memory(seed: int, index: int, *, allow_long: bool = True) -> SyntheticMemory:
    """The memory number `index` of the corpus with this seed (300–800 characters unless long)."""
    rng = _rng(seed, index)
    # Topics are not uniform: 20 hot ones hold ~30% of the memories, the rest is a long tail.
    topic = rng.randrange(HOT_TOPICS) * 7 % topic_count() if rng.random() < HOT_SHARE else rng.randrange(topic_count())
    system = SYSTEMS[topic % len(SYSTEMS)]
    subject, keywords = SUBJECTS[topic // len(SYSTEMS)]
    team, person = rng.choice(TEAMS), rng.choice(PEOPLE)
    ticket = _ticket(rng, team)
    long = rng.random() < LONG_SHARE and allow_long
    target = rng.randint(2600, 5200) if long else rng.randint(300, 800)
    paragraphs: list[str] = []
    paragraph: list[str] = []
    length = 0
    while length < target:
        sentence = _sentence(rng, system, subject, keywords, team, person, ticket)
        paragraph.append(sentence)
        length += len(sentence) + 1
        if len(paragraph) >= rng.randint(3, 6):
            paragraphs.append(" ".join(paragraph))
            paragraph = []
    if paragraph:
        paragraphs.append(" ".join(paragraph))
    title = f"{system} {subject} {rng.choice(DOC_TYPES)}"
    if rng.random() < 0.5:
        title += f" ({ticket})"
    scope = SCOPES[_weighted(rng, [s for _, s in SCOPES])][0]
    return SyntheticMemory(
        index=index,
        title=title[:1].upper() + title[1:],
        content="\n\n".join(paragraphs),
        scope=scope,
        clearance_rank=_weighted(rng, CLEARANCE_SHARES),
        category=rng.choice(CATEGORIES),
        source=rng.choice(SOURCES),
        tags=sorted({subject.split()[0].lower(), system.split()[0].lower(), team.split()[0].lower()}),
        age_days=rng.uniform(0, 700),
        expired=rng.random() < EXPIRED_SHARE,
        topic=topic,
        ticket=ticket,
    )


def query(seed: int, index: int, corpus_size: int) -> str:
    """A query aimed at a random memory of the corpus (its topic words, sometimes its ticket)."""
    rng = _rng(seed, index, "query")
    target = memory(seed, rng.randrange(corpus_size))
    system = SYSTEMS[target.topic % len(SYSTEMS)]
    subject, keywords = SUBJECTS[target.topic // len(SYSTEMS)]
    return rng.choice(QUESTION_FORMS).format(
        team=rng.choice(TEAMS),
        subject=subject,
        system=system,
        kw=rng.choice(keywords),
        ticket=target.ticket,
        doctype=rng.choice(DOC_TYPES),
        action=rng.choice(ACTIONS),
    )
