"""Writes the second evaluation set (memories.jsonl, queries.jsonl) — see README.md. Deterministic:

    python bench/quality2/generate.py

The hand-written memories and queries are below; the templated near-twins (PR descriptions from one
template, standups, on-call handoffs) are generated from a fixed seed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent


def m(key: str, title: str, content: str, scope: str, category: str, source: str, author: str, age: int, tags: list[str]) -> dict:
    return {
        "key": key,
        "title": title,
        "content": content,
        "scope": scope,
        "category": category,
        "source": source,
        "source_url": None,
        "author_name": author,
        "tags": tags,
        "age_days": age,
    }


HAND = [
    # Slack-style messages
    m(
        "slack-webhook-outage",
        "#incidents: payments webhook outage",
        "heads up all — stripe webhooks to ledger-svc were failing from 14:05 to 15:20 "
        "UTC yesterday. root cause was an expired signing secret after the key rotation "
        "on monday. ~1.9k rides weren't marked paid until the replay finished. replay "
        "is done, postmortem doc coming. ping @tomasz if you see any unpaid rides still",
        "engineering",
        "incident",
        "Slack",
        "Tomasz Wren",
        12,
        ["payments", "webhooks", "ledger-svc"],
    ),
    m(
        "slack-ledger-owner",
        "#eng-platform: who owns ledger-svc",
        "for anyone asking: ledger-svc is owned by the Billing Core squad now (lead: Ifeoma Chukwu). "
        "platform handed it over in august. page #billing-core for anything ledger related, not platform",
        "engineering",
        "decision",
        "Slack",
        "Ravi Anand",
        60,
        ["ledger-svc", "ownership"],
    ),
    m(
        "slack-dock-firmware",
        "#hardware: dock firmware rollout paused",
        "we're pausing dock firmware 2.8 rollout at 40% of stations — a batch of docks in Leeds is dropping "
        "the NFC reader after the update. stay on 2.7.3 for new installs until Marta gives the all clear",
        "engineering",
        "decision",
        "Slack",
        "Marta Kowal",
        5,
        ["firmware", "docks", "nfc"],
    ),
    m(
        "slack-lunch-thursday",
        "#general: thursday lunch",
        "team lunch moved to thursday this week because of the bank holiday, "
        "same place (the noodle bar on Mill St). vegan options confirmed",
        "people",
        "message",
        "Slack",
        "Hana Obi",
        3,
        ["social"],
    ),
    m(
        "slack-battery-swap",
        "#ops: battery swap rota",
        "new battery swap rota from next week: north depot does mornings, south depot "
        "afternoons + evenings. vans leave at 06:30 sharp. shout if your shift clashes",
        "ops",
        "policy",
        "Slack",
        "Colin Frame",
        20,
        ["batteries", "rota", "depots"],
    ),
    m(
        "slack-vpn-down",
        "#it-help: vpn flaky?",
        "anyone else getting kicked off wireguard every 10 min? — yes, it's the new office "
        "router. IT says pin the endpoint to vpn2.velo.internal until they patch it",
        "engineering",
        "message",
        "Slack",
        "Priya Nair",
        2,
        ["vpn", "it"],
    ),
    m(
        "slack-theft-spike",
        "#ops: theft spike in Leeds",
        "we've had 14 bikes stolen from Leeds Station Square in 10 days, mostly overnight. ops is "
        "adding a second lock check to the evening sweep and we asked the council about CCTV coverage",
        "ops",
        "incident",
        "Slack",
        "Colin Frame",
        9,
        ["theft", "leeds"],
    ),
    # Emails
    m(
        "email-insurance-renewal",
        "Re: fleet insurance renewal",
        "Hi all, quick summary of the call with Harbor Mutual: the fleet "
        "policy renews on 1 March at £184k (up from £161k), excess stays at "
        "£500 per claim, and they now require GPS immobilisers on every bike "
        "by June. I've asked for a quote with a £1,000 excess too. — Grace",
        "finance",
        "email",
        "Gmail",
        "Grace Lindqvist",
        25,
        ["insurance", "renewal", "harbor-mutual"],
    ),
    m(
        "email-council-contract",
        "Leeds council contract signed",
        "Good news: Leeds City Council signed the 3-year contract for 120 "
        "stations, starting April. The contract has a 97% bike availability "
        "SLA measured monthly, with a 5% fee reduction for each month we "
        "miss it. Contract ref LCC-2291. Legal has the countersigned copy.",
        "sales",
        "email",
        "Gmail",
        "Daniel Osei",
        40,
        ["leeds", "council", "contract", "sla"],
    ),
    m(
        "email-parental-leave",
        "Updated parental leave policy",
        "Team, from January parental leave is 20 weeks at full pay for all parents regardless of gender, up from "
        "12. It applies to anyone who has been here 6 months. Please talk to People Ops before booking. — Hana",
        "people",
        "policy",
        "Gmail",
        "Hana Obi",
        30,
        ["parental-leave", "benefits"],
    ),
    m(
        "email-expenses",
        "Expense claims — new process",
        "From next month all expense claims go through Pleo instead of the spreadsheet. Receipts must be "
        "uploaded within 7 days, and anything above £250 needs your manager's approval in Pleo before you pay.",
        "finance",
        "policy",
        "Gmail",
        "Grace Lindqvist",
        45,
        ["expenses", "pleo"],
    ),
    m(
        "email-pricing-change",
        "Ride pricing from 1 May",
        "Confirming the board decision: unlock fee goes from £1.00 to £0.80 and the per-minute rate "
        "from 15p to 18p from 1 May. Monthly passes stay at £25. Marketing will announce on 20 April.",
        "sales",
        "decision",
        "Gmail",
        "Daniel Osei",
        15,
        ["pricing"],
    ),
    m(
        "email-pricing-old",
        "Ride pricing 2024",
        "For reference, 2024 prices: £1.00 to unlock, 15p per minute, monthly pass £25 with 45 free minutes a day.",
        "sales",
        "policy",
        "Gmail",
        "Daniel Osei",
        300,
        ["pricing"],
    ),
    # PR descriptions
    m(
        "pr-ledger-idempotency",
        "PR #812: idempotent webhook handling in ledger-svc",
        "What: ledger-svc now stores the Stripe event id and ignores duplicates, "
        "so replays can't double-charge. Why: during last week's webhook "
        "outage the replay charged 23 riders twice. How to test: replay a "
        "fixture event twice, expect one ledger entry. Reviewer: @ifeoma",
        "engineering",
        "pr",
        "GitHub",
        "Tomasz Wren",
        8,
        ["ledger-svc", "webhooks", "stripe"],
    ),
    m(
        "pr-geofence",
        "PR #790: no-parking geofences from the council feed",
        "Pulls the council's no-parking polygons nightly and blocks ending a ride inside them "
        "(the app shows the nearest dock instead). Feature flag: geofence_v2. Leeds only for now.",
        "engineering",
        "pr",
        "GitHub",
        "Priya Nair",
        35,
        ["geofence", "leeds", "app"],
    ),
    m(
        "pr-rider-export",
        "PR #801: GDPR export for riders",
        "Adds /v1/me/export, which returns a zip with rides, payments and support tickets "
        "within 30 days as GDPR requires. Rate limited to one export per rider per day.",
        "engineering",
        "pr",
        "GitHub",
        "Ravi Anand",
        22,
        ["gdpr", "privacy", "api"],
    ),
    # Meeting notes
    m(
        "meeting-ops-weekly",
        "Ops weekly — notes",
        "Attendees: Colin, Marta, Daniel. 1) Availability in Leeds was 95.8% "
        "last month — below the council SLA, Daniel to warn finance about "
        "the fee reduction. 2) Dock firmware pause stays until Leeds NFC issue "
        "is understood. 3) Hiring two more mechanics for the south depot.",
        "ops",
        "meeting",
        "Notion",
        "Colin Frame",
        6,
        ["ops", "sla", "leeds"],
    ),
    m(
        "meeting-eng-planning",
        "Engineering planning Q2",
        "Decisions: we move the rider app to React Native 0.76 in Q2; ledger-svc gets a proper dead-letter queue; the old Rails "
        "admin is frozen (security fixes only) and replaced by the new "
        "ops console by September. Owner of the ops console: Priya.",
        "engineering",
        "meeting",
        "Notion",
        "Ravi Anand",
        28,
        ["planning", "q2"],
    ),
    m(
        "meeting-board",
        "Board meeting summary",
        "The board approved the Leeds expansion budget (£2.1M), asked for a plan to "
        "bring theft losses under 2% of fleet, and approved the May pricing change.",
        "finance",
        "meeting",
        "Notion",
        "Grace Lindqvist",
        18,
        ["board"],
    ),
    # Docs / policies
    m(
        "doc-oncall",
        "On-call policy",
        "Engineering on-call is a weekly rotation handed over on Wednesdays at 11:00. Primary "
        "responds to pages within 15 minutes; secondary within 30. On-call pay is £300 per week.",
        "engineering",
        "policy",
        "Notion",
        "Ravi Anand",
        200,
        ["on-call"],
    ),
    m(
        "doc-oncall-2025",
        "On-call policy (revised)",
        "Engineering on-call is now a two-week rotation handed over on Wednesdays at 11:00. Primary "
        "responds within 15 minutes, secondary within 30. On-call pay rises to £350 per week.",
        "engineering",
        "policy",
        "Notion",
        "Ravi Anand",
        10,
        ["on-call"],
    ),
    m(
        "doc-mechanic-safety",
        "Workshop safety rules",
        "Mechanics must wear eye protection at the wheel truing stand and gloves when handling battery "
        "packs. Damaged batteries go into the fire-proof bin in bay 3, never the general waste.",
        "ops",
        "policy",
        "Notion",
        "Colin Frame",
        150,
        ["safety", "batteries", "workshop"],
    ),
    m(
        "doc-support-refunds",
        "Support: ride refunds",
        "Support can refund a ride up to £10 without approval if the bike was faulty (rider reports within "
        "24h). Anything larger goes to the support lead. Refunds go back to the original card in 3–5 days.",
        "sales",
        "policy",
        "Notion",
        "Ana Ruiz",
        90,
        ["support", "refunds"],
    ),
    m(
        "doc-error-codes",
        "App error codes",
        "ERR_LOCK_JAM: the dock could not release the bike — ask the "
        "rider to try the next dock, ops gets a ticket automatically. "
        "ERR_GPS_NOFIX: the bike has no GPS fix, rides cannot end outside a dock. ERR_PAY_3DS: the card needs 3-D Secure again.",
        "engineering",
        "runbook",
        "Notion",
        "Priya Nair",
        120,
        ["errors", "app", "support"],
    ),
]

QUERIES = [
    {
        "id": "v01",
        "type": "multi_hop",
        "query": "who owns the service that had the webhook outage?",
        "relevant": {"slack-ledger-owner": 2, "slack-webhook-outage": 2},
    },
    {
        "id": "v02",
        "type": "multi_hop",
        "query": "what fee penalty do we face for last month's Leeds availability?",
        "relevant": {"email-council-contract": 2, "meeting-ops-weekly": 2},
    },
    {
        "id": "v03",
        "type": "multi_hop",
        "query": "which PR fixed the double charges from the webhook replay?",
        "relevant": {"pr-ledger-idempotency": 2, "slack-webhook-outage": 1},
    },
    {
        "id": "v04",
        "type": "multi_hop",
        "query": "who is building the replacement for the Rails admin?",
        "relevant": {"meeting-eng-planning": 2},
    },
    {
        "id": "v05",
        "type": "multi_hop",
        "query": "what firmware version should a new dock in Leeds get?",
        "relevant": {"slack-dock-firmware": 2, "meeting-ops-weekly": 1},
    },
    {
        "id": "v06",
        "type": "multi_hop",
        "query": "does the insurer's June requirement affect the theft plan the board asked for?",
        "relevant": {"email-insurance-renewal": 2, "meeting-board": 2, "slack-theft-spike": 1},
    },
    {
        "id": "v07",
        "type": "paraphrase",
        "query": "how long can a new mum or dad take off?",
        "relevant": {"email-parental-leave": 2},
    },
    {
        "id": "v08",
        "type": "paraphrase",
        "query": "what do I do with a swollen e-bike battery in the workshop?",
        "relevant": {"doc-mechanic-safety": 2},
    },
    {
        "id": "v09",
        "type": "paraphrase",
        "query": "can a support agent give money back for a broken bike ride without asking?",
        "relevant": {"doc-support-refunds": 2},
    },
    {
        "id": "v10",
        "type": "paraphrase",
        "query": "how much will covering our bikes against damage cost next year?",
        "relevant": {"email-insurance-renewal": 2},
    },
    {
        "id": "v11",
        "type": "paraphrase",
        "query": "riders can't finish a trip in forbidden zones — how does that work?",
        "relevant": {"pr-geofence": 2},
    },
    {
        "id": "v12",
        "type": "paraphrase",
        "query": "how do riders download everything we hold about them?",
        "relevant": {"pr-rider-export": 2},
    },
    {
        "id": "v13",
        "type": "paraphrase",
        "query": "bikes keep disappearing overnight at a Leeds station",
        "relevant": {"slack-theft-spike": 2},
    },
    {
        "id": "v14",
        "type": "paraphrase",
        "query": "why does my remote connection keep dropping at the office?",
        "relevant": {"slack-vpn-down": 2},
    },
    {
        "id": "v15",
        "type": "paraphrase",
        "query": "how do I get reimbursed for a train ticket?",
        "relevant": {"email-expenses": 2},
    },
    {"id": "v16", "type": "exact_token", "query": "LCC-2291", "relevant": {"email-council-contract": 2}},
    {"id": "v17", "type": "exact_token", "query": "ERR_GPS_NOFIX", "relevant": {"doc-error-codes": 2}},
    {"id": "v18", "type": "exact_token", "query": "PR #812", "relevant": {"pr-ledger-idempotency": 2}},
    {"id": "v19", "type": "exact_token", "query": "geofence_v2 flag", "relevant": {"pr-geofence": 2}},
    {"id": "v20", "type": "exact_token", "query": "vpn2.velo.internal", "relevant": {"slack-vpn-down": 2}},
    {"id": "v21", "type": "exact_token", "query": "Harbor Mutual excess", "relevant": {"email-insurance-renewal": 2}},
    {"id": "v22", "type": "short_keyword", "query": "parental leave", "relevant": {"email-parental-leave": 2}},
    {"id": "v23", "type": "short_keyword", "query": "pleo", "relevant": {"email-expenses": 2}},
    {"id": "v24", "type": "short_keyword", "query": "battery rota", "relevant": {"slack-battery-swap": 2}},
    {"id": "v25", "type": "short_keyword", "query": "refunds", "relevant": {"doc-support-refunds": 2}},
    {"id": "v26", "type": "short_keyword", "query": "board budget", "relevant": {"meeting-board": 2}},
    {"id": "v27", "type": "short_keyword", "query": "lunch", "relevant": {"slack-lunch-thursday": 2}},
    {
        "id": "v28",
        "type": "recency",
        "query": "how long is an on-call shift?",
        "relevant": {"doc-oncall-2025": 2, "doc-oncall": 1},
        "older": ["doc-oncall"],
    },
    {
        "id": "v29",
        "type": "recency",
        "query": "what is the per-minute ride price?",
        "relevant": {"email-pricing-change": 2, "email-pricing-old": 1},
        "older": ["email-pricing-old"],
    },
    {
        "id": "v30",
        "type": "recency",
        "query": "on-call pay per week",
        "relevant": {"doc-oncall-2025": 2, "doc-oncall": 1},
        "older": ["doc-oncall"],
    },
]

SERVICES = ["ledger-svc", "dock-gateway", "rider-app", "ops-console", "pricing-svc", "telemetry"]
AUTHORS = ["Tomasz Wren", "Priya Nair", "Ravi Anand", "Marta Kowal", "Ifeoma Chukwu"]


def templated(rng: random.Random) -> tuple[list[dict], list[dict]]:
    memories, queries = [], []
    numbers = rng.sample(range(900, 1900), 40)
    for n, number in enumerate(numbers):
        service = SERVICES[n % len(SERVICES)]
        key = f"pr-{number}"
        memories.append(
            m(
                key,
                f"PR #{number}: bump dependencies in {service}",
                f"What: routine dependency bumps for {service}. Why: monthly hygiene. How "
                f"to test: CI green, smoke test on staging. Ticket VEL-{number + 3000}.",
                "engineering",
                "pr",
                "GitHub",
                AUTHORS[n % len(AUTHORS)],
                2 + n * 3,
                ["dependencies", service],
            )
        )
    for n in range(25):
        memories.append(
            m(
                f"standup-{n}",
                f"Platform standup {n + 1}",
                "Yesterday: reviewed dependency bump PRs and staging smoke tests. "
                f"Today: CI flakiness in {SERVICES[n % len(SERVICES)]}. Blockers: none.",
                "engineering",
                "meeting",
                "Slack",
                AUTHORS[n % len(AUTHORS)],
                1 + n * 2,
                ["standup"],
            )
        )
    for n in range(20):
        code = "".join(rng.choice("BCDFGHJKLMNPRSTVWXZ") for _ in range(2)) + str(rng.randrange(100, 999))
        memories.append(
            m(
                f"handoff-{code.lower()}",
                f"On-call handoff {code}",
                f"On-call handoff note {code}: quiet week, two low-priority pages, "
                "nothing left open. Next primary takes over Wednesday 11:00.",
                "engineering",
                "message",
                "Slack",
                AUTHORS[n % len(AUTHORS)],
                3 + n * 7,
                ["on-call", "handoff"],
            )
        )
    picks = rng.sample(numbers, 12)
    for i, number in enumerate(picks):
        queries.append(
            {"id": f"t{2 * i + 1:02d}", "type": "templated", "query": f"VEL-{number + 3000}", "relevant": {f"pr-{number}": 2}}
        )
        queries.append(
            {
                "id": f"t{2 * i + 2:02d}",
                "type": "templated",
                "query": f"PR #{number} dependency bump",
                "relevant": {f"pr-{number}": 2},
            }
        )
    handoffs = [mem for mem in memories if mem["key"].startswith("handoff-")]
    for i, mem in enumerate(rng.sample(handoffs, 6)):
        code = mem["title"].split()[-1]
        queries.append(
            {"id": f"t{25 + i:02d}", "type": "templated", "query": f"handoff note {code}", "relevant": {mem["key"]: 2}}
        )
    return memories, queries


def main() -> None:
    rng = random.Random(2026)
    extra_memories, extra_queries = templated(rng)
    with (HERE / "memories.jsonl").open("w") as out:
        for item in [*HAND, *extra_memories]:
            out.write(json.dumps(item) + "\n")
    with (HERE / "queries.jsonl").open("w") as out:
        for item in [*QUERIES, *extra_queries]:
            out.write(json.dumps(item) + "\n")


if __name__ == "__main__":
    main()
