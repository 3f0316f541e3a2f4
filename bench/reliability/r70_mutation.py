"""Mutation testing of the code that guards access, ranking, signatures and the audit chain (cosmic-ray).

    make reliability RELIABILITY=r70_mutation.py                      # every target, in order
    .venv/bin/python bench/reliability/r70_mutation.py --only scoring access --budget-minutes 20
    .venv/bin/python bench/reliability/r70_mutation.py --fresh       # forget earlier sessions

What it does: copies the working tree (tracked and untracked, not ignored files) to a scratch
directory, because cosmic-ray writes each mutant into the source file it mutates; starts one set of
embedded PostgreSQL + Redis (the runner's `embedded_services`, as `cortex_site.runner test` does)
and points every test command at them with pytest-django's `--reuse-db`, so a mutant costs one pytest
start and its targeted tests, not a new database. Each target is a module (or only some functions of
it, for the connectors' signature checks) with a targeted test subset. For each: a baseline run of
the subset on the unmutated copy (it must pass), `cosmic-ray init`, the operator and line filters
below, then `cosmic-ray exec` until the target is done or the time budget is spent. Sessions
(`$CORTEX_MUTATION_HOME`, default /tmp/cortex-mutation) are kept, so a later run resumes where the
budget stopped the last one; cosmic-ray runs pending mutants in random order, so a partial target is
a random sample of its mutants, and the report says how many ran. Sessions are scratch space and go
with the machine: what each pass found (every target's tally and survivors, the named mutants' results,
the passes' log) is written to `bench/reliability/mutation_record.json`, committed, and a target with no
session here is reported from its record.

Operators left out (they would multiply the count without testing anything our code does):
replacements *to* bit, shift, floor-division, modulo and power operators, `is`/`is not`
comparisons, unary `+`/`~`, and cosmic-ray's variable inserter/replacer. Everything else runs:
arithmetic and comparison swaps, `and`/`or`, `not` added or removed, True/False, numbers, exception
types, decorators removed, loops run zero times, break/continue.

Every surviving mutant is either listed in EXPLAINED with the reason it cannot be killed (an
equivalent mutant: no behaviour differs) or reported as unexplained — the goal is none.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench" / "reliability")]

from report import write_section  # noqa: E402

PYTHON = sys.executable
COSMIC_RAY = str(Path(PYTHON).with_name("cosmic-ray"))
HOME = Path(os.environ.get("CORTEX_MUTATION_HOME") or Path(tempfile.gettempdir()) / "cortex-mutation").resolve()
# What every pass found, kept in the repository: cosmic-ray's sessions live under HOME (scratch space, lost with
# the machine), so each target's tally, its survivors, the named mutants' results and the passes' log are written
# here after each pass, and a target without a session on this machine is reported from its last record.
RECORD = ROOT / "bench" / "reliability" / "mutation_record.json"
PYTEST = f"{PYTHON} -m pytest -x -q -p no:cacheprovider"
EXCLUDED_OPERATORS = [
    r"core/ReplaceBinaryOperator_\w+_(BitOr|BitAnd|BitXor|LShift|RShift|FloorDiv|Mod|Pow)$",
    r"core/ReplaceComparisonOperator_\w+_(Is|IsNot)$",
    r"core/ReplaceUnaryOperator_(UAdd|Invert)_\w+$",
    r"core/ReplaceUnaryOperator_\w+_(UAdd|Invert)$",
    r"core/Variable(Inserter|Replacer)$",
]


@dataclass(frozen=True)
class Target:
    name: str
    module: str
    tests: tuple[str, ...]
    # Qualified function names (Class.method) to mutate; empty = the whole module.
    functions: tuple[str, ...] = ()
    # The tests' marker expression: never the slow ones; for a pure module, no database tests either.
    markers: str = "not slow"
    # A -k expression narrowing the files to the tests of the target (accepted and refused cases alike).
    keywords: str = ""
    # A pure module's tests need no Django: without the plugin and the shared conftest a run starts in a
    # fraction of the time (the database tests of the files are deselected by `markers`).
    pure: bool = False
    timeout: float = 120.0

    @property
    def command(self) -> str:
        select = [f"-m '{self.markers}'", *([f"-k '{self.keywords}'"] if self.keywords else [])]
        # pytest-django keeps the test database between runs (--reuse-db): a mutant pays for no migrations.
        select += ["-p no:django --noconftest -o addopts='--import-mode=importlib'" if self.pure else "--reuse-db"]
        return " ".join((PYTEST, *select, *self.tests))


_AUDIT_CHAIN = (
    "valid_address",
    "_as_stored",
    "_event_digest",
    "_chain_lock",
    "record",
    "_chain_head",
    "record_many",
    "_as_stored_many",
    "_walk",
    "verify_chain",
)
_AUDIT_OTHER_TESTS = (
    "concurrent",
    "update_and_delete",
    "truncate",
    "append_only",
    "periodic",
    "bounded_batches",
    "own_period",
    "refuses_to_bless",
    "delete_outside",
    "beat_signs",
)

TARGETS = [
    # Pure arithmetic: the unit tests decide, without a database (the recall test of the file checks recall.py).
    Target(
        "scoring",
        "memories/retrieval/scoring.py",
        ("tests/memories/retrieval/test_scoring.py",),
        markers="not slow and not django_db",
        pure=True,
    ),
    Target(
        "embedding signature guard",
        "memories/embeddings/store.py",
        ("tests/memories/embeddings/test_signature_guard.py",),
    ),
    Target(
        "slack signature check",
        "connectors/sources/slack/source.py",
        ("tests/connectors/slack/test_slack_events.py",),
        functions=("SlackSource.verify_delivery",),
        # The signed URL-verification handshake is the accepted case (the message test also times its answer,
        # which a loaded machine fails for reasons no mutant has).
        keywords="unsigned or bad_signature or url_verification",
    ),
    Target(
        "github signature check",
        "connectors/sources/github/source.py",
        ("tests/connectors/github/test_webhook.py",),
        functions=("GitHubSource.verify_delivery",),
        keywords="signature or another_secret or ping or a_merged_pull_request_becomes",
    ),
    # The chain itself — what record and record_many write, the head they link to, and the verifier — with the
    # tests of those (not the database triggers', the concurrent ones', or the periodic checkpoint's and retention's,
    # whose code is the next target).
    Target(
        "audit chain",
        "audit/services.py",
        ("tests/audit/test_chain.py", "tests/audit/test_tamper_evidence.py"),
        functions=_AUDIT_CHAIN,
        keywords=f"not ({' or '.join(_AUDIT_OTHER_TESTS)})",
    ),
    Target(
        "audit checkpoints and retention",
        "audit/services.py",
        ("tests/audit/test_tamper_evidence.py",),
        functions=("_signature", "_signed", "_checkpoint", "_latest", "checkpoint", "verify_and_checkpoint", "enforce_retention"),
        keywords="not (concurrent or truncate or append_only or beat_signs)",
    ),
    Target(
        "access (Principal)",
        "memories/access.py",
        (
            "tests/memories/test_access.py",
            "tests/memories/test_adjacent_rungs.py",
            "tests/memories/test_write_rules.py",
            "tests/memories/test_read_only_lifecycle.py",
            "tests/memories/test_token_last_use.py",
        ),
    ),
    Target(
        "selectors: memories",
        "memories/selectors/memories.py",
        (
            "tests/memories/test_selectors.py",
            "tests/memories/test_adjacent_rungs.py",
            "tests/memories/test_read_api.py",
            "tests/memories/test_lifecycle.py",
        ),
    ),
    Target(
        "lifecycle services",
        "memories/services/memories/lifecycle.py",
        (
            "tests/memories/test_read_only_lifecycle.py",
            "tests/memories/test_lifecycle.py",
            "tests/memories/test_authority_redaction.py",
            "tests/memories/test_authority_redaction_hold.py",
            "tests/memories/test_lock_order.py",
        ),
    ),
]

# Survivors that no test can kill (equivalent mutants: no input the code can receive behaves
# differently), as (module, operator pattern, mutated source line pattern, why). Mutants inside type
# annotations are recognised on their own (see `in_annotation`).
EXPLAINED: list[tuple[str, str, str, str]] = [
    (
        "memories/retrieval/scoring.py",
        r"ReplaceComparisonOperator_Is_(Eq|LtE|GtE)$",
        r"if mode is RankingMode\.(DENSE|LEXICAL|FULL):",
        "equivalent: `mode` is a RankingMode (a StrEnum), whose members are equal only to themselves, and the "
        "ordering of their values (dense < full < fused < lexical) makes `<= DENSE` and `>= LEXICAL` true for that "
        "member alone",
    ),
    (
        "memories/retrieval/scoring.py",
        r"NumberReplacer$",
        r"heaviest = max\(selective, default=0\.0\)",
        "equivalent: the default is used only for an empty `selective`, where the sum of missing weights is 0 "
        "whatever `heaviest` is, so the share is 0 either way",
    ),
]
EXPLAINED += [
    (
        "audit/services.py",
        r"ReplaceComparisonOperator_Lt_NotEq$",
        r"^if latest is None or latest\.last_event_id < report\.head_id:$",
        "equivalent: the latest signed head is a head this chain had, and the chain only grows, so it is never past "
        "the verified head: `!=` holds exactly when `<` does",
    ),
    (
        "audit/services.py",
        r"NumberReplacer$",
        r"\.iterator\(chunk_size=2000\):$",
        "equivalent: the chunk size is how many rows each round trip fetches, not which rows the walk sees",
    ),
]
EXPLAINED += [
    (
        "audit/services.py",
        r"ReplaceBinaryOperator_Mul_\w+$",
        r"^def enforce_retention\(organization: Any, \*, batch_size",
        "equivalent: the bare `*` that makes the batch size keyword-only became `/`; every caller passes the "
        "organization by position and the rest by keyword, so no call behaves differently",
    ),
    (
        "audit/services.py",
        r"ReplaceComparisonOperator_Eq_LtE$",
        r"^start\.kind == AuditCheckpoint\.Kind\.HEAD$",
        'equivalent: a checkpoint\'s kind is "head" or "retention", and "retention" does not sort before "head", so '
        "`<=` is true for a head alone",
    ),
    (
        "audit/services.py",
        r"ReplaceAndWithOr$",
        r"^if report\.ok and report\.head_id is not None:$",
        "equivalent in verify_and_checkpoint (its twin in checkpoint() is killed): a report that is not ok never "
        "names a head, and a full verification that is ok always does (the chain holds the organization's creation "
        "event, or a retention cut and the event recording it), so `or` and `and` agree on every report",
    ),
    (
        "audit/services.py",
        r"ReplaceOrWithAnd$",
        r"^message = f\"\{organization_id or ''\}\|",
        "equivalent: the signed message still names the event id and hash it anchors, and event ids are unique "
        "across organizations, so a checkpoint whose message lost its organization still cannot be replayed onto "
        "another organization's chain (it names an event that chain does not hold); the global chain's None was '' "
        "either way",
    ),
]
EXPLAINED += [
    (
        "memories/selectors/memories.py",
        r"ReplaceComparisonOperator_Eq_LtE$",
        r'^if status == "all":$',
        "equivalent: `status` is one of active, superseded, redacted, all (refused otherwise above) and `active` has "
        'returned already; of the other two, neither sorts before "all", so `<=` is true for "all" alone',
    ),
    (
        "memories/selectors/memories.py",
        r"ReplaceComparisonOperator_Lt_LtE$",
        r"^if len\(names\) < limit:$",
        "equivalent: at the limit the members fill it, and the named authors appended after them are cut by "
        "`names[:limit]`, so the answer is the same",
    ),
    (
        "memories/selectors/memories.py",
        r"ReplaceComparisonOperator_Lt_NotEq$",
        r"len\(chain\) < limit",
        "equivalent: the chain starts at one version and grows by one, so for any limit of at least 1 (every caller's) "
        "it reaches the limit exactly, where `!=` stops as `<` does",
    ),
    (
        "memories/selectors/memories.py",
        r"NumberReplacer$",
        r"\.distinct\(\)\[: limit \* 2\]:$",
        "equivalent: at most as many named authors repeat a member's name as there are members, so `limit` of them "
        "(the factor 1) already fills the list to its limit, and more (3) are cut by `names[:limit]`",
    ),
    (
        "memories/selectors/memories.py",
        r"ReplaceBinaryOperator_Mul_\w+$",
        r"^def supersession_chain\(",
        "equivalent: the bare `*` that makes `limit` keyword-only became `/`; every caller passes the principal and "
        "the memory by position and the limit by keyword, so no call behaves differently",
    ),
]
EXPLAINED += [
    (
        "memories/access.py",
        r"NumberReplacer$",
        r"return max\(clearance_names\(self\.organization_id\), default=0\)",
        "equivalent: the default applies only to an organization without clearance rungs, which can have no "
        "members (a member needs a rung) and so no memories for the operator to read at any rank",
    ),
]
EXPLAINED += [
    (
        "memories/embeddings/store.py",
        r"ReplaceBinaryOperator_Mul_\w+$",
        r"^def \w+\(.*, \*, \w+: bool\)",
        "equivalent: the bare `*` that makes the flag keyword-only became `/`; every caller passes it by keyword, "
        "so no call behaves differently",
    ),
    (
        "connectors/sources/slack/source.py",
        r"ReplaceOrWithAnd$",
        r"if not timestamp or not signature:",
        "equivalent: with one header missing, the empty timestamp fails int() (refused as not a Unix time) or the "
        "empty signature fails the SDK's comparison — refused with the same error code either way",
    ),
    (
        "connectors/sources/slack/source.py",
        r"(ReplaceComparisonOperator_Gt_|ReplaceBinaryOperator_Sub_)\w+$",
        r"if abs\(time\.time\(\) - sent_at\) > SIGNATURE_WINDOW_SECONDS:",
        "equivalent for every request a test can send (whether the window is compared or computed wrongly): "
        "slack_sdk's SignatureVerifier refuses timestamps more than "
        "300 s away itself; only a request exactly 300 s off differs, which no test can hit (a second passes "
        "between signing and checking)",
    ),
]
_KEYWORD_ONLY = (
    "equivalent: the bare `*` that makes the arguments keyword-only became `/` (only `self` positional-only); "
    "its one caller, connectors/services/deliveries.py, passes headers and body by keyword, so no call behaves differently"
)
EXPLAINED += [
    (module, r"ReplaceBinaryOperator_Mul_\w+$", r"^def verify_delivery\(self, \*, headers", _KEYWORD_ONLY)
    for module in ("connectors/sources/github/source.py", "connectors/sources/slack/source.py")
]
_AUDIT = "audit/services.py"
EXPLAINED += [
    (
        _AUDIT,
        r"ReplaceBinaryOperator_Mul_Div$",
        r"^\*,$|^def (record_many|_walk)\(",
        "equivalent: the bare `*` that makes the arguments after it keyword-only became `/`; every caller passes "
        "those by keyword (and the first positionally), so no call behaves differently",
    ),
    (
        _AUDIT,
        r"NumberReplacer$",
        r'pg_advisory_xact_lock\(%s, %s\)", \[7301, organization_id or 0\]',
        "equivalent: any other constant key still gives each chain one lock of its own (7302 is the connectors' "
        "keyspace, keyed by a hash of a connector id: at worst a rare extra wait; the global chain's 0 becoming 1 or "
        "-1 shares a lock with organization 1's chain or none), so writers of one chain still wait for each other",
    ),
    (
        _AUDIT,
        r"ReplaceTrueWithFalse$",
        r"event\.save\(force_insert=True\)",
        "equivalent: the event is new (no primary key yet), so save() inserts it with or without force_insert",
    ),
    (
        _AUDIT,
        r"ReplaceTrueWithFalse$",
        r"zip\(events, actions, stored_details, strict=True\)",
        "equivalent: the three sequences have one item per event by construction (the actions are built from the "
        "events, the stored details come back one row per event), so strict never has a length to refuse",
    ),
    (
        _AUDIT,
        r"NumberReplacer$",
        r"events\.iterator\(chunk_size=2000\)",
        "equivalent: the chunk size sets how many rows each fetch brings, not which rows or in what order",
    ),
]
EXPLAINED_MUTATED: list[tuple[str, str, str, str]] = [
    (
        "memories/services/memories/lifecycle.py",
        r"NumberReplacer$",
        r'\.values_list\("memory_id", "organization_id"\)\[: batch_size \+ 2\]$',
        "equivalent: one hold past the batch already tells whether more is left, and the batch is "
        "`expired[:batch_size]` either way, so fetching two past it changes nothing",
    ),
    (
        _AUDIT,
        r"NumberReplacer$",
        r"id__gt=cut\.last_event_id if cut else -1, id__lte=last_id\)$",
        "equivalent: event ids start at 1, so `> -1` and `> 0` take the same rows (`else 1` is killed: a named mutant)",
    ),
    (
        _AUDIT,
        r"NumberReplacer$",
        r"values_list\(\"id\", flat=True\)\[: batch_size \+ 2\]\)$",
        "equivalent: one id past the batch already tells whether more is left, and the batch itself is "
        "`expired[:batch_size]` either way, so fetching two past it changes nothing (`+ 0` is killed: a named mutant)",
    ),
    (
        _AUDIT,
        r"NumberReplacer$",
        r"^return \(rows\[-1\]\[0\] if rows else None\), stored$",
        "equivalent: every row's first column is the same `host(%s::inet)` of the one address parameter, so the "
        "last row's is the first row's",
    ),
    (
        _AUDIT,
        r"NumberReplacer$",
        r"^after_id = cut\.last_event_id if cut is not None else -1$",
        "equivalent: event ids are positive, so `id > -1` selects the same events as `id > 0`",
    ),
]
EXPLAINED += [
    (
        "memories/access.py",
        r"ReplaceBinaryOperator_Mul_Div$",
        r"^def __init__\(self, membership: Membership, token: ApiToken \| None = None, \*, connector",
        "equivalent: the bare `*` that makes `connector` keyword-only became `/`; every caller passes the membership "
        "and the token by position and the connector by keyword, so no call behaves differently",
    ),
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceComparisonOperator_NotEq_Gt$",
        r"^if winner\.status != Memory\.Status\.ACTIVE:$",
        "equivalent: every status but active (proposed, redacted, superseded) sorts after it, so `> active` holds "
        "exactly when `!= active` does",
    ),
]
EXPLAINED += [
    (
        "memories/access.py",
        r"AddNot$",
        r"^if TYPE_CHECKING:$",
        "equivalent: the block imports a name used only in annotations; importing it at run time as well changes nothing",
    ),
    (
        "memories/access.py",
        r"ReplaceComparisonOperator_Eq_LtE$",
        r"scope\.visibility == Scope\.Visibility\.ALL_MEMBERS",
        'equivalent: a scope\'s visibility is "all_members" or "granted", and "granted" does not sort before '
        '"all_members", so `<=` is true for all_members alone',
    ),
    (
        "memories/access.py",
        r"ReplaceBinaryOperator_Mul_Div$",
        r"^def can_read_memory\(self, memory: Any, \*, history",
        "equivalent: the bare `*` that makes `history` and `as_of` keyword-only became `/`; every caller passes the "
        "memory by position and the rest by keyword, so no call behaves differently",
    ),
    (
        "memories/access.py",
        r"ReplaceComparisonOperator_NotEq_Gt$",
        r'^if memory\.status != "active":$',
        "equivalent: a proposal has returned already, and superseded and redacted both sort after active, so "
        "`> active` holds exactly when `!= active` does",
    ),
    (
        "memories/access.py",
        r"ReplaceTrueWithFalse$",
        r"^is_admin = True$",
        "equivalent today: what an Operator reaches (conflict policy, tenancy, export) asks `require_admin`, which "
        "lets the operator through whatever this says, and no view or selector is given an Operator; checked by "
        "running the CLI, import/export and conflict tests with it False (156 passed)",
    ),
    (
        "memories/access.py",
        r"ReplaceComparisonOperator_Eq_LtE$",
        r"^if role == Membership\.Role\.ADMIN:$",
        'equivalent: a role is "admin" or "member", and "member" does not sort before "admin", so `<=` is true for '
        "an admin alone",
    ),
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceTrueWithFalse$",
        r"^vectors = embed_for_store\(\[embedding_text\(hold\.title, c\.text\) for c in chunks\], for_write=True\)$",
        "equivalent: `for_write` only records the embedding signature of a store that has none, and a restore follows "
        "the write that stored the memory's first vectors, which recorded it",
    ),
    (
        "memories/services/memories/lifecycle.py",
        r"NumberReplacer$",
        r"^HOLD_BATCH = 200$",
        "equivalent in outcome: it is the default of direct callers (the beat's task passes its own batch size), and "
        "a batch size sets how many expired holds one run makes final, not which ones, in what order, or whether the "
        "rest follow (batches are tested small)",
    ),
]
EXPLAINED += [
    (
        "memories/selectors/memories.py",
        r"ReplaceBinaryOperator_Mul_Add$",
        r'for name in named\.order_by\("author_name"\)\.values_list\("author_name", flat=True\)\.distinct\(\)\[: limit \* 2\]:',
        "equivalent: the named authors needed are the free places plus those repeating a member already listed, at "
        "most `limit` in all, so `limit + 2` of them fill the answer as `limit * 2` do (`limit - 2` is killed by "
        "test_named_authors_fill_the_limit_when_no_member_matches)",
    ),
    (
        "memories/selectors/memories.py",
        r"ReplaceBinaryOperator_Mul_Div$",
        r"^principal: Principal, \*, since: datetime \| None = None, until",
        "equivalent: the bare `*` that makes the window keyword-only became `/`; every caller passes the principal by "
        "position and the rest by keyword, so no call behaves differently",
    ),
]
EXPLAINED += [
    (
        "memories/access.py",
        r"ReplaceTrueWithFalse$",
        r'^return frozenset\(Scope\.objects\.filter\(organization_id=self\.organization_id\)\.values_list\("pk", flat=True\)\)$',
        "equivalent where it is used: the operator's scope ids only ever go to SQL (`scope_id IN …` in readable_base), "
        "and psycopg sends a one-element tuple as its element, so ids and 1-tuples select the same rows",
    ),
]
EXPLAINED += [
    (
        "memories/selectors/memories.py",
        r"ReplaceComparisonOperator_Lt_NotEq$",
        r"^if len\(names\) < limit:$",
        "equivalent: the members are cut to `limit` just above, so `len(names)` is never past it and `!=` holds "
        "exactly when `<` does",
    ),
]
EXPLAINED += [
    (
        "memories/selectors/memories.py",
        r"ReplaceBinaryOperator_Mul_Div$",
        r"^def memory_for_history\(principal: Principal, memory_id: Any, \*, for_update",
        "equivalent: the bare `*` that makes `for_update` keyword-only became `/`; every caller passes the principal "
        "and the id by position and `for_update` by keyword, so no call behaves differently",
    ),
]
EXPLAINED += [
    (
        "audit/services.py",
        r"ReplaceTrueWithFalse$",
        r"^for event, action, \(stored_ip, details\) in zip\(events, actions, stored, strict=True\):$",
        "equivalent: the three sequences have one item per event by construction (the actions are built from the "
        "events, the stored details come back one row per event), so strict never has a length to refuse",
    ),
]
EXPLAINED += [
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceComparisonOperator_Eq_LtE$",
        r"^if memory\.status == Memory\.Status\.ACTIVE:$",
        "equivalent: no status sorts before active, so `<= active` holds for active alone",
    ),
    (
        "memories/selectors/memories.py",
        r"ReplaceComparisonOperator_Eq_LtE$",
        r'^if status == "active":$',
        "equivalent: `status` is one of active, superseded, redacted, all (refused otherwise above), none of which "
        "sorts before active, so `<=` is true for active alone",
    ),
]
EXPLAINED_MUTATED += [
    (
        "memories/embeddings/store.py",
        r"NumberReplacer$",
        r"ThreadPoolExecutor\(max_workers=\s*2, ",
        "equivalent: the pool is given one job and shut down, so a second worker thread is never started "
        "(`max_workers=0` is killed: the pool refuses it)",
    ),
]
EXPLAINED_MUTATED += [
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceComparisonOperator_Eq_LtE$",
        r"post_write_pending=held\.previous_status <= Memory\.Status\.ACTIVE",
        "equivalent: no status sorts before active, so `<= active` holds for active alone",
    ),
]
EXPLAINED += [
    (
        "memories/selectors/memories.py",
        r"ReplaceBinaryOperator_Mul_Div$",
        r"^def (readable_base|visible_memories|author_suggestions)\(",
        "equivalent: the bare `*` that makes the last arguments keyword-only became `/`; every caller passes the "
        "principal (and the prefix) by position and the rest by keyword, so no call behaves differently",
    ),
]
_STATUSES = "a memory's status is one of active, proposed, redacted and superseded (Memory.Status, set only here), and "
EXPLAINED += [
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceComparisonOperator_NotEq_Gt$",
        r"^if old\.status != Memory\.Status\.ACTIVE:$",
        "equivalent: " + _STATUSES + "every one but active sorts after it, so `> active` holds exactly when `!= active` does",
    ),
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceComparisonOperator_NotEq_(Lt|Gt)$",
        r"^if memory\.status != Memory\.Status\.REDACTED or (hold|held) is None:$",
        "equivalent: `<` or `>` redacted differs from `!=` only for a memory that is not redacted, and a redaction hold exists "
        "only while its memory is redacted (made by the redaction, deleted by the restore or when final), so the "
        "missing hold refuses it either way (before the transaction and again under the row lock)",
    ),
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceComparisonOperator_NotEq_Lt$",
        r"^if updated != 1:$",
        "equivalent: an update filtered by primary key changes 0 or 1 rows, so `< 1` holds exactly when `!= 1` does",
    ),
    (
        "memories/services/memories/lifecycle.py",
        r"ReplaceComparisonOperator_Eq_GtE$",
        r"^if memory\.status == Memory\.Status\.ACTIVE:$",
        "equivalent: a restored memory returns to active or superseded, and `>= active` differs only for a version "
        "restored as superseded, whose post-write steps (conflicts, entities) both skip a memory that is not active; "
        "the restore leaves nothing pending for it",
    ),
]
ANNOTATION_REASON = "equivalent: inside a type annotation, which `from __future__ import annotations` never evaluates"


def explanation(module: str, operator: str, source: str, diff: str = "") -> str:
    """Why a survivor is equivalent: by its source line (EXPLAINED) or, where one operator makes several mutants
    of a line and only some are equivalent, by the line it became (EXPLAINED_MUTATED, matched on the diff)."""
    for where, pattern, line, why in EXPLAINED:
        if where == module and re.search(pattern, operator) and re.search(line, source):
            return why
    mutated = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    for where, pattern, line, why in EXPLAINED_MUTATED:
        if where == module and re.search(pattern, operator) and any(re.search(line, m) for m in mutated):
            return why
    return ""


def annotation_lines(path: Path) -> set[tuple[int, int, int]]:
    """(line, first column, last column) of every annotation in the module (single-line ones; ours all are)."""
    spans: set[tuple[int, int, int]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        for annotation in annotations:
            if annotation is not None and annotation.lineno == annotation.end_lineno:
                spans.add((annotation.lineno, annotation.col_offset, annotation.end_col_offset or annotation.col_offset))
    return spans


def in_annotation(spans: set[tuple[int, int, int]], position: tuple[int, int]) -> bool:
    line, column = position
    return any(line == first and start <= column < end for first, start, end in spans)


@dataclass(frozen=True)
class NamedMutant:
    """A hand-made mutation (one or more edits) that once survived the suite, re-checked on every pass."""

    name: str
    edits: tuple[tuple[str, str, str], ...]  # (module, exact old text, new text); the old text occurs once
    tests: tuple[str, ...]
    # A cosmic-ray survivor this mutant re-makes (module, operator pattern, source line pattern): once the
    # hand-made mutant is killed, that survivor is reported as killed by the new test.
    survivor: tuple[str, str, str] | None = None
    # Where the survivor's line is not unique in its module (a bare `return False`): a pattern its diff's context
    # must hold, so the kill is claimed for that occurrence only (survivors recorded without a diff are not told apart).
    context: str = ""


_READ_ONLY_CHECK = (
    '    if principal.read_only:\n        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")\n'
)
_IN_REDACT = "        if not principal.can_redact(memory):"
_IN_DELETE = '        principal.require_admin("Only organization admins can erase memories; others can redact.")'
_LOCKED_FETCH = "    with transaction.atomic():\n        memory = memory_for_history(principal, memory_id, for_update=True)\n"

# The four survivors of the first outside pass (issue 18), each as it was made then.
NAMED_MUTANTS = [
    NamedMutant(
        "clearance comparison one rung off in the Principal",
        (
            (
                "memories/access.py",
                # can_read_memory's (denial_rule, added since, compares the same way)
                "if memory.clearance_rank > self.clearance_rank:\n            return False",
                "if memory.clearance_rank > self.clearance_rank + 1:\n            return False",
            ),
        ),
        ("tests/memories/test_adjacent_rungs.py::test_a_duplicate_one_rung_above_the_writer_is_not_returned",),
    ),
    NamedMutant(
        "read-only checks removed from redact and delete",
        (
            (
                "memories/services/memories/lifecycle.py",
                _READ_ONLY_CHECK + _LOCKED_FETCH + _IN_REDACT,
                _LOCKED_FETCH + _IN_REDACT,
            ),
            (
                "memories/services/memories/lifecycle.py",
                _READ_ONLY_CHECK + _LOCKED_FETCH + _IN_DELETE,
                _LOCKED_FETCH + _IN_DELETE,
            ),
            (
                "memories/access.py",
                "if self.read_only or not self.can_read_memory(memory, history=True):",
                "if not self.can_read_memory(memory, history=True):",
            ),
        ),
        ("tests/memories/test_read_only_lifecycle.py", "tests/mcp/test_read_only_tokens.py"),
    ),
    NamedMutant(
        "relevance no longer divided by the pool's best strength",
        (
            (
                "memories/selectors/recall.py",
                "rel = scoring.spread(strength, top, params.spread_power)",
                "rel = scoring.spread(strength, 1.0, params.spread_power)",
            ),
        ),
        ("tests/memories/retrieval/test_scoring.py::test_recall_relevance_is_each_strength_over_the_best_in_the_pool",),
    ),
    NamedMutant(
        "embedding signature guard comparing dimensions only",
        (
            (
                "memories/embeddings/store.py",
                "if (stored.provider, stored.model, stored.dim) != signature_of(embedder):",
                "if stored.dim != embedder.dim:",
            ),
        ),
        ("tests/memories/embeddings/test_signature_guard.py",),
    ),
]


# Survivors of the cosmic-ray passes, killed by tests written after them; re-made here so the kill is checked
# without re-running the target's whole test subset.
NAMED_MUTANTS += [
    NamedMutant(
        "could_supersede: same author compared with < (cosmic-ray survivor)",
        (("memories/access.py", "winner.author_id == loser.author_id", "winner.author_id < loser.author_id"),),
        (
            "tests/memories/test_adjacent_rungs.py::test_the_automatic_conflict_policy_never_lets_a_lower_rung_overrule_the_next",
            "tests/memories/test_adjacent_rungs.py::test_an_author_who_left_still_supersedes_their_own_memory_whatever_its_rung",
        ),
        survivor=("memories/access.py", r"ReplaceComparisonOperator_Eq_Lt$", r"winner\.author_id == loser\.author_id"),
    ),
    NamedMutant(
        "can_write_memory asks the list read rule (cosmic-ray survivor)",
        (
            (
                "memories/access.py",
                "return self.can_read_memory(memory, history=True) and memory.scope_id in self.writable_scope_ids",
                "return self.can_read_memory(memory, history=False) and memory.scope_id in self.writable_scope_ids",
            ),
        ),
        ("tests/memories/test_adjacent_rungs.py::test_a_superseded_version_stays_writable_for_its_scopes_writers",),
        survivor=("memories/access.py", r"ReplaceTrueWithFalse$", r"return self\.can_read_memory\(memory, history=True\) and"),
    ),
    NamedMutant(
        "touch_token: 61 seconds instead of 60 (cosmic-ray survivor)",
        (("memories/access.py", ".total_seconds() > 60:", ".total_seconds() > 61:"),),
        ("tests/memories/test_token_last_use.py",),
        survivor=("memories/access.py", r"NumberReplacer$", r"\.total_seconds\(\) > 60:"),
    ),
]
# The five survivors still unexplained after those (issue 18, hardening): an exception clause "replaced"
# here catches ZeroDivisionError, which nothing in the block raises — as cosmic-ray's ExceptionReplacer
# does with an exception class of its own.
_GUARD_TESTS = "tests/memories/embeddings/test_signature_guard.py"
NAMED_MUTANTS += [
    NamedMutant(
        "signature guard: stored signature compared with > (cosmic-ray survivor)",
        (
            (
                "memories/embeddings/store.py",
                "if (stored.provider, stored.model, stored.dim) != signature_of(embedder):",
                "if (stored.provider, stored.model, stored.dim) > signature_of(embedder):",
            ),
        ),
        (f"{_GUARD_TESTS}::test_a_model_sorting_after_the_stored_one_is_refused_too",),
        survivor=("memories/embeddings/store.py", r"ReplaceComparisonOperator_NotEq_Gt$", r"!= signature_of\(embedder\):"),
    ),
    NamedMutant(
        "embed_for_store no longer catches EmbeddingUnavailable (cosmic-ray survivor)",
        (("memories/embeddings/store.py", "except EmbeddingUnavailable as exc:", "except ZeroDivisionError as exc:"),),
        (f"{_GUARD_TESTS}::test_a_provider_that_cannot_or_will_not_embed_answers_503_and_stores_nothing",),
        survivor=("memories/embeddings/store.py", r"ExceptionReplacer$", r"except EmbeddingUnavailable as exc:"),
    ),
    NamedMutant(
        "embed_for_store no longer catches EmbeddingFailed (cosmic-ray survivor)",
        (("memories/embeddings/store.py", "except EmbeddingFailed as exc:", "except ZeroDivisionError as exc:"),),
        (f"{_GUARD_TESTS}::test_a_provider_that_cannot_or_will_not_embed_answers_503_and_stores_nothing",),
        survivor=("memories/embeddings/store.py", r"ExceptionReplacer$", r"except EmbeddingFailed as exc:"),
    ),
    NamedMutant(
        "Slack: a timestamp that is not a number no longer caught (cosmic-ray survivor)",
        (("connectors/sources/slack/source.py", "        except ValueError:\n", "        except ZeroDivisionError:\n"),),
        ("tests/connectors/slack/test_slack_events.py::test_unsigned_stale_or_forged_requests_are_refused_before_parsing",),
        survivor=("connectors/sources/slack/source.py", r"ExceptionReplacer$", r"except ValueError:"),
    ),
    NamedMutant(
        "can_read_memory: a memory no longer active readable in lists (cosmic-ray survivor)",
        (
            (
                "memories/access.py",
                'if memory.status != "active":\n            return False',
                'if memory.status != "active":\n            return True',
            ),
        ),
        ("tests/memories/test_access.py::test_a_version_no_longer_active_is_readable_as_history_only",),
        survivor=("memories/access.py", r"ReplaceFalseWithTrue$", r"^\s*return False$"),
        context=r'memory\.status != "active":\n-\s+return False',
    ),
]


# The access pass of 2026-12-03: survivors in the rules a hidden read is audited by, the proposal rule, the read
# rule's scope test asked alone, and a principal's repr; killed by tests added in that pass.
_ACCESS_MODULE, _ACCESS_TESTS = "memories/access.py", "tests/memories/test_access.py"
_DENIAL_TEST = f"{_ACCESS_TESTS}::test_the_denial_rule_of_a_memory_is_the_first_rule_that_hides_it"


def _access_mutant(name: str, old: str, new: str, test: str, operator: str, line: str, context: str = "") -> NamedMutant:
    return NamedMutant(
        f"access: {name} (cosmic-ray survivor)",
        ((_ACCESS_MODULE, old, new),),
        (test,),
        survivor=(_ACCESS_MODULE, operator, line),
        context=context,
    )


NAMED_MUTANTS += [
    _access_mutant(
        "the token's narrowing named for a scope the membership does not read",
        "if scope is not None and self._membership_reads(scope):",
        "if scope is not None or self._membership_reads(scope):",
        f"{_ACCESS_TESTS}::test_scope_access_matrix",
        r"ReplaceAndWithOr$",
        r"^if scope is not None and self\._membership_reads\(scope\):$",
    ),
    _access_mutant(
        "a readable memory's denial named a proposal, a hidden proposal's none",
        "        if not self.can_read_memory(memory, history=True):\n            return DenialRule.PROPOSAL",
        "        if self.can_read_memory(memory, history=True):\n            return DenialRule.PROPOSAL",
        _DENIAL_TEST,
        r"ReplaceUnaryOperator_Delete_Not$",
        r"^if not self\.can_read_memory\(memory, history=True\):$",
    ),
    _access_mutant(
        "any proposal with a proposer readable by everyone who reads its scope",
        "if memory.created_by_id is not None and memory.created_by_id == self.user.pk:",
        "if memory.created_by_id is not None or memory.created_by_id == self.user.pk:",
        _DENIAL_TEST,
        r"ReplaceAndWithOr$",
        r"^if memory\.created_by_id is not None and memory\.created_by_id == self\.user\.pk:$",
    ),
    _access_mutant(
        "a memory of a scope the principal does not read readable",
        "        if memory.scope_id not in self.readable_scope_ids:\n            return False",
        "        if memory.scope_id not in self.readable_scope_ids:\n            return True",
        _DENIAL_TEST,
        r"ReplaceFalseWithTrue$",
        r"^\s*return False$",
        context=r"memory\.scope_id not in self\.readable_scope_ids:\n-\s+return False",
    ),
    _access_mutant(
        "a proposal replacing a memory readable by everyone who reads its scope",
        "return original is not None and (self.is_admin or self.outranks_author_of(original))",
        "return original is not None or (self.is_admin or self.outranks_author_of(original))",
        _DENIAL_TEST,
        r"ReplaceAndWithOr$",
        r"^return original is not None and \(self\.is_admin or self\.outranks_author_of\(original\)\)$",
    ),
    *(
        _access_mutant(
            f"the organization compared with {op}, so a memory of an organization with a {size} id passes its test",
            "        if memory.organization_id != self.organization_id:\n            return False",
            f"        if memory.organization_id {op} self.organization_id:\n            return False",
            f"{_ACCESS_TESTS}::test_the_organization_is_checked_on_its_own_not_only_through_the_scope",
            operator,
            r"^if memory\.organization_id != self\.organization_id:$",
            context=r"if memory\.organization_id != self\.organization_id:\n\+.*\n\s+return False",
        )
        for op, size, operator in (
            (">", "smaller", r"ReplaceComparisonOperator_NotEq_Gt$"),
            ("<", "larger", r"ReplaceComparisonOperator_NotEq_Lt$"),
        )
    ),
    _access_mutant(
        "a connector principal's repr without its connector",
        "        if self.connector is not None:\n            via =",
        "        if not self.connector is not None:\n            via =",
        f"{_ACCESS_TESTS}::test_a_principal_says_who_acts_and_how",
        r"AddNot$",
        r"^if self\.connector is not None:$",
    ),
]

NAMED_MUTANTS += [
    NamedMutant(
        "patch: a superseded version taken for a redacted one (cosmic-ray survivor)",
        (
            (
                "memories/services/memories/lifecycle.py",
                '        if memory.status == Memory.Status.REDACTED:\n            raise Conflict("A redacted memory cannot',
                '        if memory.status >= Memory.Status.REDACTED:\n            raise Conflict("A redacted memory cannot',
            ),
        ),
        ("tests/memories/test_lifecycle.py::test_an_earlier_version_takes_metadata_changes_and_a_redacted_one_does_not",),
        survivor=(
            "memories/services/memories/lifecycle.py",
            r"ReplaceComparisonOperator_Eq_GtE$",
            r"^if memory\.status == Memory\.Status\.REDACTED:$",
        ),
        context=r"A redacted memory cannot be changed",
    ),
]

# What the passes before this machine measured (2026-12-01 13:04–16:27 UTC): their cosmic-ray sessions were lost
# with that machine, so they are carried here as figures — (target, mutants, run, killed, survived) — and their
# survivors as (module, line, operator, source line, inside an annotation), re-judged on every report by the same
# EXPLAINED and named-mutant rules as this machine's.
EARLIER_AT = (
    "2026-12-01 13:04–16:27 UTC on the machine before this one (sessions lost with it), and the audit chain's "
    "19:54 UTC pass on this one (its session's line numbers predate record_many's per-event addresses, so it is "
    "kept here by source line)"
)
EARLIER_FIGURES = [
    ("scoring", 217, 217, 206, 11),
    ("embedding signature guard", 24, 18, 13, 5),
    ("slack signature check", 21, 13, 8, 5),
    ("access (Principal)", 267, 18, 12, 6),
    ("audit chain", 136, 32, 18, 14),
]
_CONFIDENCE = "def confidence(match: float, thresholds: ConfidenceThresholds | None = None) -> Confidence:"
_SCORING, _STORE, _SLACK, _ACCESS = (
    "memories/retrieval/scoring.py",
    "memories/embeddings/store.py",
    "connectors/sources/slack/source.py",
    "memories/access.py",
)
_WINDOW = "if abs(time.time() - sent_at) > SIGNATURE_WINDOW_SECONDS:"
EARLIER_SURVIVORS = [
    *((_SCORING, 127, f"ReplaceBinaryOperator_BitOr_{op}", _CONFIDENCE, True) for op in ("Add", "Sub", "Mul", "Div")),
    (_SCORING, 146, "ReplaceComparisonOperator_Is_Eq", "if mode is RankingMode.DENSE:", False),
    (_SCORING, 148, "ReplaceComparisonOperator_Is_Eq", "if mode is RankingMode.LEXICAL:", False),
    (_SCORING, 154, "ReplaceComparisonOperator_Is_Eq", "if mode is RankingMode.FULL:", False),
    (_SCORING, 146, "ReplaceComparisonOperator_Is_LtE", "if mode is RankingMode.DENSE:", False),
    (_SCORING, 148, "ReplaceComparisonOperator_Is_GtE", "if mode is RankingMode.LEXICAL:", False),
    (_SCORING, 97, "NumberReplacer", "heaviest = max(selective, default=0.0)", False),
    (_SCORING, 97, "NumberReplacer", "heaviest = max(selective, default=0.0)", False),
    (
        _STORE,
        26,
        "ReplaceBinaryOperator_Mul_Div",
        "def check_signature(embedder: Embedder, *, record_if_missing: bool) -> bool:",
        False,
    ),
    (
        _STORE,
        50,
        "ReplaceBinaryOperator_Mul_Div",
        "def embed_for_store(texts: Sequence[str], *, for_write: bool) -> Matrix:",
        False,
    ),
    (
        _STORE,
        37,
        "ReplaceComparisonOperator_NotEq_Gt",
        "if (stored.provider, stored.model, stored.dim) != signature_of(embedder):",
        False,
    ),
    (_STORE, 60, "ExceptionReplacer", "except EmbeddingUnavailable as exc:", False),
    (_STORE, 65, "ExceptionReplacer", "except EmbeddingFailed as exc:", False),
    (_SLACK, 231, "ReplaceBinaryOperator_Sub_Div", _WINDOW, False),
    (_SLACK, 231, "ReplaceComparisonOperator_Gt_Eq", _WINDOW, False),
    (_SLACK, 231, "ReplaceComparisonOperator_Gt_GtE", _WINDOW, False),
    (_SLACK, 225, "ReplaceOrWithAnd", "if not timestamp or not signature:", False),
    (_SLACK, 229, "ExceptionReplacer", "except ValueError:", False),
    (_ACCESS, 142, "ReplaceBinaryOperator_BitOr_Sub", "def _token_scope_ids(self) -> frozenset[int] | None:", True),
    (
        _ACCESS,
        373,
        "ReplaceComparisonOperator_Eq_Lt",
        "if winner.author_id is not None and winner.author_id == loser.author_id:",
        False,
    ),
    (
        _ACCESS,
        223,
        "ReplaceTrueWithFalse",
        "return self.can_read_memory(memory, history=True) and memory.scope_id in self.writable_scope_ids",
        False,
    ),
    (_ACCESS, 207, "ReplaceFalseWithTrue", "return False", False),
    (_AUDIT, 111, "ReplaceBinaryOperator_BitOr_Add", "def _chain_lock(organization_id: int | None) -> None:", True),
    *(
        (
            _AUDIT,
            238,
            f"ReplaceBinaryOperator_BitOr_{op}",
            "def _as_stored_many(details: Sequence[dict[str, Any]], ip: str | None)",
            True,
        )
        for op in ("Add", "Div")
    ),
    *(
        (_AUDIT, 52, f"ReplaceBinaryOperator_BitOr_{op}", "def _valid_address(ip: str | None) -> str | None:", True)
        for op in ("Sub", "Mul", "Div")
    ),
    (_AUDIT, 63, "ReplaceBinaryOperator_BitOr_Mul", "def _as_stored(details: dict[str, Any], ip: str | None)", True),
    (_AUDIT, 125, "ReplaceBinaryOperator_BitOr_Div", "details: dict[str, Any] | None = None,", True),
    (
        _AUDIT,
        214,
        "ReplaceTrueWithFalse",
        "for event, action, details in zip(events, actions, stored_details, strict=True):",
        False,
    ),
    (_AUDIT, 84, "ReplaceOrWithAnd", 'str(event.actor_user_id or ""),', False),
    (_AUDIT, 85, "ReplaceOrWithAnd", 'str(event.actor_token_id or ""),', False),
    (_AUDIT, 93, "ReplaceOrWithAnd", '"ip": event.ip or "",', False),
    (
        _AUDIT,
        210,
        "ReplaceOrWithAnd",
        "stored_ip, stored_details = _as_stored_many([event.details or {} for event in events], current_client_ip())",
        False,
    ),
    (
        _AUDIT,
        114,
        "NumberReplacer",
        'cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [7301, organization_id or 0])',
        False,
    ),
    (_ACCESS, 319, "NumberReplacer", "return max(clearance_names(self.organization_id), default=0)", False),
    (
        _ACCESS,
        395,
        "NumberReplacer",
        "if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:",
        False,
    ),
]


def render_earlier(now: Counter[str]) -> list[str]:
    """The earlier passes' table and survivors, and their sum with this machine's figures (`now`)."""
    rows = [
        "| target | mutants | run | killed | survived | explained or killed since |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    judged = [
        (
            module,
            line,
            operator,
            source,
            ANNOTATION_REASON if annotation else explanation(module, operator, source) or killed_since(module, operator, source),
        )
        for module, line, operator, source, annotation in EARLIER_SURVIVORS
    ]
    modules = {t.name: t.module for t in TARGETS}
    for name, mutants, ran, killed, survived in EARLIER_FIGURES:
        answered = sum(1 for module, *_rest, why in judged if module == modules[name] and why)
        rows.append(f"| {name} | {mutants} | {ran} | {killed} | {survived} | {answered} |")
    unexplained = sum(1 for *_rest, why in judged if not why)
    ran = sum(f[2] for f in EARLIER_FIGURES)
    killed = sum(f[3] for f in EARLIER_FIGURES)
    lines = [
        f"### Earlier passes ({EARLIER_AT})",
        "",
        "Measured then and kept here as figures; a target sampled then and again now was sampled independently, so "
        "the two samples may overlap.",
        "",
        *rows,
        "",
        f"Earlier and this machine's passes together: {ran + now['ran']} mutants run, {killed + now['killed']} killed, "
        f"{len(judged) + now['survived']} survived ({unexplained + now['unexplained']} unexplained).",
        "",
        f"The earlier passes' {len(judged)} survivors ({unexplained} unexplained now):",
        "",
    ]
    for module, line, operator, source, why in judged:
        lines.append(f"- `{module}:{line}` {operator} on `{source}` — {why or '**unexplained**'}")
    return lines


# The audit chain (this machine's first pass, a random sample): the survivors it found and the mutants of the
# same kinds the sample did not reach, each killed by a test written with that pass (tests/audit).
_CHAIN_TESTS = "tests/audit/test_chain.py"
_TAMPER_TESTS = "tests/audit/test_tamper_evidence.py"
NAMED_MUTANTS += [
    NamedMutant(
        "audit digest: the actor's user id no longer hashed (cosmic-ray survivor)",
        ((_AUDIT, 'str(event.actor_user_id or ""),', 'str(event.actor_user_id and ""),'),),
        (f"{_CHAIN_TESTS}::test_changing_who_acted_or_from_where_is_detected_at_that_event",),
        survivor=(_AUDIT, r"ReplaceOrWithAnd$", r'str\(event\.actor_user_id or ""\),'),
    ),
    NamedMutant(
        "audit digest: the actor's token id no longer hashed (cosmic-ray survivor)",
        ((_AUDIT, 'str(event.actor_token_id or ""),', 'str(event.actor_token_id and ""),'),),
        (f"{_CHAIN_TESTS}::test_changing_who_acted_or_from_where_is_detected_at_that_event",),
        survivor=(_AUDIT, r"ReplaceOrWithAnd$", r'str\(event\.actor_token_id or ""\),'),
    ),
    NamedMutant(
        "audit digest: the client address no longer hashed (cosmic-ray survivor)",
        ((_AUDIT, '"ip": event.ip or "",', '"ip": event.ip and "",'),),
        (f"{_CHAIN_TESTS}::test_changing_who_acted_or_from_where_is_detected_at_that_event",),
        survivor=(_AUDIT, r"ReplaceOrWithAnd$", r'"ip": event\.ip or "",'),
    ),
    NamedMutant(
        "audit digest: keys no longer sorted",
        ((_AUDIT, "sort_keys=True", "sort_keys=False"),),
        (f"{_CHAIN_TESTS}::test_the_event_digest_format_is_frozen_so_chains_written_by_earlier_versions_still_verify",),
        survivor=(_AUDIT, r"ReplaceTrueWithFalse$", r"blob = json\.dumps\(payload, sort_keys=True"),
    ),
    NamedMutant(
        "record: actor label cut one character short",
        (
            (
                _AUDIT,
                "actor_label=actor.label[:320],\n            action=action.value,\n            target_type=target_type,",
                "actor_label=actor.label[:319],\n            action=action.value,\n            target_type=target_type,",
            ),
        ),
        (f"{_CHAIN_TESTS}::test_labels_and_target_ids_longer_than_their_columns_are_cut_to_fit_by_record_and_record_many",),
    ),
    NamedMutant(
        "record_many: every event's details dropped",
        ((_AUDIT, "[event.details or {} for event in events]", "[event.details and {} for event in events]"),),
        (f"{_CHAIN_TESTS}::test_record_many_stores_each_events_own_details_and_a_batch_of_one_keeps_its_address",),
        survivor=(_AUDIT, r"ReplaceOrWithAnd$", r"\[event\.details or \{\} for event in events\]"),
    ),
    NamedMutant(
        "record_many: every event stored with the request's address, even one given its own",
        (
            (
                _AUDIT,
                "[context_ip if event.ip is None else event.ip for event in events]",
                "[context_ip for event in events]",
            ),
        ),
        (f"{_CHAIN_TESTS}::test_record_many_stores_each_events_own_details_and_a_batch_of_one_keeps_its_address",),
    ),
    NamedMutant(
        "verifier: links compared with < instead of !=",
        (
            (
                _AUDIT,
                "if event.prev_hash != expected_prev or _event_digest(event) != event.hash:\n            return ChainReport(",
                "if event.prev_hash < expected_prev or _event_digest(event) != event.hash:\n            return ChainReport(",
            ),
        ),
        (f"{_CHAIN_TESTS}::test_removing_or_changing_any_single_event_is_detected_where_it_happened",),
    ),
    NamedMutant(
        "verifier: the walk starts after event 1",
        (
            (
                _AUDIT,
                "after_id = cut.last_event_id if cut is not None else 0",
                "after_id = cut.last_event_id if cut is not None else 1",
            ),
        ),
        (f"{_TAMPER_TESTS}::test_the_first_event_of_a_fresh_database_is_verified_too",),
    ),
    NamedMutant(
        "verifier: a head signed at the retention cut must still be there",
        ((_AUDIT, "head.last_event_id <= after_id", "head.last_event_id < after_id"),),
        (f"{_TAMPER_TESTS}::test_retention_past_or_at_the_signed_head_still_verifies",),
    ),
    NamedMutant(
        "chain head after retention removed every event: the cut's hash as a tuple",
        ((_AUDIT, '.values_list("last_hash", flat=True)', '.values_list("last_hash", flat=False)'),),
        (f"{_TAMPER_TESTS}::test_retention_that_removes_every_event_lets_the_chain_go_on_from_the_cut",),
    ),
    NamedMutant(
        "verifier: a bad signature reports one event verified",
        (
            (
                _AUDIT,
                "ok=False, count=0, first_broken=checkpoint.last_event_id",
                "ok=False, count=1, first_broken=checkpoint.last_event_id",
            ),
        ),
        (f"{_TAMPER_TESTS}::test_a_checkpoint_with_a_wrong_signature_reports_that_nothing_was_verified",),
    ),
]


_RESTORE_ENQUEUE = (
    "Memory.Status.ACTIVE:\n            transaction.on_commit(lambda: post_write_enqueue(memory.pk))\n    return memory"
)
NAMED_MUTANTS += [
    NamedMutant(
        "memory_restore: post-write work enqueued only for a memory that is not active (cosmic-ray survivor)",
        (
            (
                "memories/services/memories/lifecycle.py",
                f"        if memory.status == {_RESTORE_ENQUEUE}",
                f"        if not memory.status == {_RESTORE_ENQUEUE}",
            ),
        ),
        ("tests/memories/test_authority_redaction_hold.py::test_a_restored_memory_gets_its_post_write_work_again",),
        survivor=("memories/services/memories/lifecycle.py", r"AddNot$", r"^if memory\.status == Memory\.Status\.ACTIVE:$"),
    ),
]

_LIFECYCLE = "memories/services/memories/lifecycle.py"
_DISTINCT_PAIR = "loser.organization_id != winner.organization_id or loser.pk == winner.pk:"
NAMED_MUTANTS += [
    NamedMutant(
        "redaction reason: 1,000 characters refused (cosmic-ray survivor)",
        ((_LIFECYCLE, "if len(reason) > 1000:", "if len(reason) >= 1000:"),),
        ("tests/memories/test_lifecycle.py::test_a_redaction_reason_of_exactly_1000_characters_is_accepted_and_one_more_is_not",),
        survivor=(_LIFECYCLE, r"ReplaceComparisonOperator_Gt_GtE$", r"^if len\(reason\) > 1000:$"),
    ),
    NamedMutant(
        "supersede: a derived title re-derived only when the content did not change (cosmic-ray survivor)",
        (
            (
                _LIFECYCLE,
                'if "content" in changes and "title" not in changes and old.title',
                'if not "content" in changes and "title" not in changes and old.title',
            ),
        ),
        ("tests/memories/test_lifecycle.py::test_a_title_derived_from_the_content_follows_new_content_and_a_given_title_stays",),
        survivor=(_LIFECYCLE, r"AddNot$", r'^if "content" in changes and "title" not in changes'),
    ),
    NamedMutant(
        "supersede with an existing memory: a pair of two organizations accepted (cosmic-ray survivor)",
        ((_LIFECYCLE, _DISTINCT_PAIR, _DISTINCT_PAIR.replace(" or ", " and ")),),
        (
            "tests/memories/test_lifecycle.py::"
            "test_superseding_with_an_existing_memory_needs_two_distinct_active_memories_of_one_organization",
        ),
        survivor=(_LIFECYCLE, r"ReplaceOrWithAnd$", r"^if loser is None or winner is None or loser\.organization_id"),
    ),
]

# The last unexplained survivors of the 2026-12-03 passes over access and the lifecycle services, killed by tests
# added (or, for the proposal rule and patching an earlier version, already added) after those passes.
_LIFECYCLE_TESTS = "tests/memories/test_lifecycle.py"
_HOLD_DAYS = "if not urgent and settings.CORTEX_REDACTION_HOLD_DAYS > 0:"
_PATCH_REDACTED = (
    '        if memory.status == Memory.Status.REDACTED:\n            raise Conflict("A redacted memory cannot be changed."'
)
NAMED_MUTANTS += [
    _access_mutant(
        "a proposal readable by every member whose user id is at least its proposer's",
        "if memory.created_by_id is not None and memory.created_by_id == self.user.pk:",
        "if memory.created_by_id is not None and memory.created_by_id <= self.user.pk:",
        _DENIAL_TEST,
        r"ReplaceComparisonOperator_Eq_LtE$",
        r"^if memory\.created_by_id is not None and memory\.created_by_id == self\.user\.pk:$",
    ),
    *(
        NamedMutant(
            f"patch: an earlier version refused as redacted (status {op} redacted; cosmic-ray survivor)",
            ((_LIFECYCLE, _PATCH_REDACTED, _PATCH_REDACTED.replace("==", op)),),
            (f"{_LIFECYCLE_TESTS}::test_an_earlier_version_takes_metadata_changes_and_a_redacted_one_does_not",),
            survivor=(_LIFECYCLE, operator, r"^if memory\.status == Memory\.Status\.REDACTED:$"),
            context=r"A redacted memory cannot be changed",
        )
        for op, operator in ((">", r"ReplaceComparisonOperator_Eq_Gt$"), (">=", r"ReplaceComparisonOperator_Eq_GtE$"))
    ),
    NamedMutant(
        "supersede with an existing memory: a loser of a larger organization id than the winner's accepted (cosmic-ray survivor)",
        ((_LIFECYCLE, _DISTINCT_PAIR, _DISTINCT_PAIR.replace("!=", "<")),),
        (f"{_LIFECYCLE_TESTS}::test_superseding_with_an_existing_memory_needs_two_distinct_active_memories_of_one_organization",),
        survivor=(
            _LIFECYCLE,
            r"ReplaceComparisonOperator_NotEq_Lt$",
            r"^if loser is None or winner is None or loser\.organization_id",
        ),
    ),
    NamedMutant(
        "supersede with an existing memory: the winner's back link set only when it already had one (cosmic-ray survivor)",
        (
            (
                _LIFECYCLE,
                "Memory.objects.filter(pk=winner.pk, supersedes__isnull=True).update(supersedes=loser)",
                "Memory.objects.filter(pk=winner.pk, supersedes__isnull=False).update(supersedes=loser)",
            ),
        ),
        (f"{_LIFECYCLE_TESTS}::test_superseding_with_an_existing_memory_needs_two_distinct_active_memories_of_one_organization",),
        survivor=(_LIFECYCLE, r"ReplaceTrueWithFalse$", r"supersedes__isnull=True\)\.update\(supersedes=loser\)$"),
    ),
    NamedMutant(
        "supersede: the check that the memory is still current removed (status < active; cosmic-ray survivor)",
        (
            (
                _LIFECYCLE,
                '    if old.status != Memory.Status.ACTIVE:\n        raise Conflict(f"This memory is {old.status}',
                '    if old.status < Memory.Status.ACTIVE:\n        raise Conflict(f"This memory is {old.status}',
            ),
        ),
        (f"{_LIFECYCLE_TESTS}::test_a_revision_of_an_earlier_version_is_refused_and_proposes_nothing",),
        survivor=(_LIFECYCLE, r"ReplaceComparisonOperator_NotEq_Lt$", r"^if old\.status != Memory\.Status\.ACTIVE:$"),
    ),
    NamedMutant(
        "redaction: a hold of one day made final at once (`> 1`; cosmic-ray survivor)",
        ((_LIFECYCLE, _HOLD_DAYS, _HOLD_DAYS.replace("> 0", "> 1")),),
        ("tests/memories/test_authority_redaction_hold.py::test_a_one_day_hold_is_a_hold",),
        survivor=(_LIFECYCLE, r"NumberReplacer$", r"^if not urgent and settings\.CORTEX_REDACTION_HOLD_DAYS > 0:$"),
    ),
]
EXPLAINED += [
    (
        _LIFECYCLE,
        r"ReplaceComparisonOperator_Gt_NotEq$",
        r"^if not urgent and settings\.CORTEX_REDACTION_HOLD_DAYS > 0:$",
        "equivalent: the setting is read with `env_int(..., minimum=0)` (cortex_site/settings.py), which refuses a "
        "negative number at start-up, so `!= 0` and `> 0` agree on every value it can hold",
    ),
]

# The survivors of the first pass over the audit checkpoints and retention (2026-12-02 00:03 UTC), killed by tests
# added to tests/audit/test_tamper_evidence.py after it.
_SIGNATURE_WRONG = 'ok=False, count=0, first_broken=start.last_event_id, reason="a checkpoint\'s signature is wrong"'
_NOTHING_EXPIRED = "        if not expired:\n            return RetentionResult(removed=0, more=False)"
_CUT_FORGED = 'return RetentionResult(removed=0, more=False, refused="a checkpoint\'s signature is wrong")'
_EVENT_FORGED = 'return RetentionResult(removed=0, more=False, refused=f"event {event.pk} does not verify")'
_PREFIX_LINK = "iterator(chunk_size=2000):\n            if event.prev_hash != expected_prev"


def _audit_mutant(name: str, old: str, new: str, test: str, operator: str, line: str) -> NamedMutant:
    return NamedMutant(
        f"{name} (cosmic-ray survivor)", ((_AUDIT, old, new),), (f"{_TAMPER_TESTS}::{test}",), survivor=(_AUDIT, operator, line)
    )


NAMED_MUTANTS += [
    _audit_mutant(
        "periodic checkpoint: a forged start reports one event verified",
        _SIGNATURE_WRONG,
        _SIGNATURE_WRONG.replace("count=0", "count=1"),
        "test_the_periodic_checkpoint_counts_every_event_and_refuses_a_forged_start",
        r"NumberReplacer$",
        r"^ok=False, count=0, first_broken=start\.last_event_id",
    ),
    _audit_mutant(
        "periodic checkpoint: the first walk starts after event 1",
        "after_id=start.last_event_id if start else 0,",
        "after_id=start.last_event_id if start else 1,",
        "test_the_first_event_of_a_fresh_database_is_verified_too",
        r"NumberReplacer$",
        r"^after_id=start\.last_event_id if start else 0,$",
    ),
    _audit_mutant(
        "periodic checkpoint: the first walk counts from one",
        "counted=start.event_count if start else 0,",
        "counted=start.event_count if start else 1,",
        "test_the_periodic_checkpoint_counts_every_event_and_refuses_a_forged_start",
        r"NumberReplacer$",
        r"^counted=start\.event_count if start else 0,$",
    ),
    _audit_mutant(
        "explicit checkpoint: the same head signed again",
        "if latest is None or latest.last_event_id < report.head_id:",
        "if latest is None or latest.last_event_id <= report.head_id:",
        "test_an_explicit_checkpoint_signs_a_head_once_and_a_newer_one_again",
        r"ReplaceComparisonOperator_Lt_(LtE|Eq|Gt|GtE)$",
        r"^if latest is None or latest\.last_event_id < report\.head_id:$",
    ),
    _audit_mutant(
        "retention: 999 events a batch by default",
        "batch_size: int = 1000, now",
        "batch_size: int = 999, now",
        "test_retention_removes_a_thousand_at_a_time_unless_told",
        r"NumberReplacer$",
        r"^def enforce_retention\(",
    ),
    _audit_mutant(
        "retention: never more than one batch",
        "[: batch_size + 1]",
        "[: batch_size + 0]",
        "test_retention_says_more_only_when_more_than_a_batch_is_old",
        r"NumberReplacer$",
        r"values_list\(\"id\", flat=True\)\[: batch_size \+ 1\]\)$",
    ),
    _audit_mutant(
        "retention: more to do when nothing was old enough",
        _NOTHING_EXPIRED,
        _NOTHING_EXPIRED.replace("more=False", "more=True"),
        "test_retention_with_nothing_old_enough_removes_nothing_and_has_nothing_more",
        r"ReplaceFalseWithTrue$",
        r"^return RetentionResult\(removed=0, more=False\)$",
    ),
    _audit_mutant(
        "retention: more to do when exactly a batch was old",
        "more = len(expired) > batch_size",
        "more = len(expired) >= batch_size",
        "test_retention_says_more_only_when_more_than_a_batch_is_old",
        r"ReplaceComparisonOperator_Gt_GtE$",
        r"^more = len\(expired\) > batch_size$",
    ),
    _audit_mutant(
        "retention: a forged cut reports one event removed",
        _CUT_FORGED,
        _CUT_FORGED.replace("removed=0", "removed=1"),
        "test_retention_refuses_to_go_on_from_a_forged_cut",
        r"NumberReplacer$",
        r"refused=\"a checkpoint's signature is wrong\"\)$",
    ),
    _audit_mutant(
        "retention: a forged link below the expected one let through",
        _PREFIX_LINK,
        _PREFIX_LINK.replace("!=", ">"),
        "test_retention_refuses_a_prefix_whose_link_is_forged_either_way",
        r"ReplaceComparisonOperator_NotEq_(Lt|Gt)$",
        r"^if event\.prev_hash != expected_prev or _event_digest\(event\) != event\.hash:$",
    ),
    _audit_mutant(
        "retention: a forged link above the expected one let through",
        _PREFIX_LINK,
        _PREFIX_LINK.replace("!=", "<"),
        "test_retention_refuses_a_prefix_whose_link_is_forged_either_way",
        r"ReplaceComparisonOperator_NotEq_(Lt|Gt)$",
        r"^if event\.prev_hash != expected_prev or _event_digest\(event\) != event\.hash:$",
    ),
    _audit_mutant(
        "retention: a refused prefix says there is more",
        _EVENT_FORGED,
        _EVENT_FORGED.replace("more=False", "more=True"),
        "test_retention_refuses_a_prefix_whose_link_is_forged_either_way",
        r"ReplaceFalseWithTrue$",
        r'refused=f"event \{event\.pk\} does not verify"\)$',
    ),
]

_HEAD_ANCHOR = "start.kind == AuditCheckpoint.Kind.HEAD"
_FIRST_PREFIX = "id__gt=cut.last_event_id if cut else 0, id__lte=last_id"
NAMED_MUTANTS += [
    _audit_mutant(
        "periodic checkpoint: a forged start reported as verified",
        _SIGNATURE_WRONG,
        _SIGNATURE_WRONG.replace("ok=False", "ok=True"),
        "test_the_periodic_checkpoint_counts_every_event_and_refuses_a_forged_start",
        r"ReplaceFalseWithTrue$",
        r"^ok=False, count=0, first_broken=start\.last_event_id",
    ),
    _audit_mutant(
        "retention: a forged cut says there is more",
        _CUT_FORGED,
        _CUT_FORGED.replace("more=False", "more=True"),
        "test_retention_refuses_to_go_on_from_a_forged_cut",
        r"ReplaceFalseWithTrue$",
        r"refused=\"a checkpoint's signature is wrong\"\)$",
    ),
    _audit_mutant(
        "periodic checkpoint: a retention cut taken for a head whose event must still be there",
        _HEAD_ANCHOR,
        _HEAD_ANCHOR.replace("==", ">="),
        "test_the_periodic_checkpoint_goes_on_from_a_retention_cut",
        r"ReplaceComparisonOperator_Eq_GtE$",
        r"^start\.kind == AuditCheckpoint\.Kind\.HEAD$",
    ),
    _audit_mutant(
        "retention: the first cut starts after event 1",
        _FIRST_PREFIX,
        _FIRST_PREFIX.replace("else 0", "else 1"),
        "test_retention_on_a_fresh_database_starts_before_event_1",
        r"NumberReplacer$",
        r"id__gt=cut\.last_event_id if cut else 0, id__lte=last_id\)$",
    ),
]

# The selectors' survivors of the first pass over them (2026-12-01 23:14 UTC), killed by tests/memories/test_selectors.py.
_SELECTORS = "memories/selectors/memories.py"
_SELECTOR_TESTS = "tests/memories/test_selectors.py"
_BACK = "while cursor.supersedes_id and len(chain) < limit"
_FORWARD = "while cursor.superseded_by_id and len(chain) < limit and cursor.superseded_by_id not in seen:"


def _selector_mutant(name: str, old: str, new: str, test: str, operator: str, line: str) -> NamedMutant:
    return NamedMutant(
        f"selectors: {name} (cosmic-ray survivor)",
        ((_SELECTORS, old, new),),
        (f"{_SELECTOR_TESTS}::{test}",),
        survivor=(_SELECTORS, operator, line),
    )


NAMED_MUTANTS += [
    _selector_mutant(
        "a proposal not opened for history",
        "memories = readable_base(principal, proposals=True).select_related",
        "memories = readable_base(principal, proposals=False).select_related",
        "test_a_proposal_is_opened_by_its_proposer_and_never_listed",
        r"ReplaceTrueWithFalse$",
        r"readable_base\(principal, proposals=True\)",
    ),
    _selector_mutant(
        "proposals listed by default",
        "*, proposals: bool = False) -> QuerySet[Memory]:",
        "*, proposals: bool = True) -> QuerySet[Memory]:",
        "test_a_proposal_is_opened_by_its_proposer_and_never_listed",
        r"ReplaceFalseWithTrue$",
        r"^def readable_base\(",
    ),
    _selector_mutant(
        "the row locked when no update was asked for, and not when one was",
        "    if for_update:\n",
        "    if not for_update:\n",
        "test_only_a_fetch_for_update_locks_the_memorys_row",
        r"AddNot$",
        r"^if for_update:$",
    ),
    _selector_mutant(
        "an older version inserted second",
        "chain.insert(0, older)",
        "chain.insert(1, older)",
        "test_the_chain_runs_oldest_first_from_any_version",
        r"NumberReplacer$",
        r"^chain\.insert\(",
    ),
    _selector_mutant(
        "the chain walked back past its limit",
        _BACK,
        _BACK.replace("< limit", "<= limit"),
        "test_the_chain_stops_at_its_limit_in_either_direction",
        r"ReplaceComparisonOperator_Lt_(Gt|GtE)$",
        r"^while cursor\.supersedes_id and len\(chain\) < limit",
    ),
    _selector_mutant(
        "the chain walked forward past its limit",
        _FORWARD,
        _FORWARD.replace("superseded_by_id and len(chain)", "superseded_by_id or len(chain)"),
        "test_the_chain_stops_at_its_limit_in_either_direction",
        r"ReplaceAndWithOr$",
        r"^while cursor\.superseded_by_id and len\(chain\) < limit",
    ),
    _selector_mutant(
        "a chain of 51 versions by default",
        "limit: int = 50) -> list[Memory]:",
        "limit: int = 51) -> list[Memory]:",
        "test_the_chain_holds_fifty_versions_unless_told",
        r"NumberReplacer$",
        r"^def supersession_chain\(",
    ),
    _selector_mutant(
        "the timeline's start ignored",
        "    if since is not None:",
        "    if not since is not None:",
        "test_the_timeline_keeps_to_its_window",
        r"AddNot$",
        r"^if since is not None:$",
    ),
    _selector_mutant(
        "the timeline's end ignored",
        "    if until is not None:",
        "    if not until is not None:",
        "test_the_timeline_keeps_to_its_window",
        r"AddNot$",
        r"^if until is not None:$",
    ),
    _selector_mutant(
        "an organization that cannot open the memory ends the search",
        "        except NotFound:\n            continue",
        "        except KeyError:\n            continue",
        "test_a_memory_opened_in_the_wrong_organization_names_the_one_that_holds_it",
        r"ExceptionReplacer$",
        r"^except NotFound:$",
    ),
    _selector_mutant(
        "suggestions by name only",
        "Q(user__name__icontains=prefix) | Q(user__email__icontains=prefix)",
        "Q(user__name__icontains=prefix) & Q(user__email__icontains=prefix)",
        "test_author_suggestions_match_a_members_name_or_email",
        r"ReplaceBinaryOperator_BitOr_\w+$",
        r"Q\(user__name__icontains=prefix\) \| Q\(user__email__icontains=prefix\)",
    ),
    _selector_mutant(
        "twenty-one suggestions by default",
        'prefix: str = "", *, limit: int = 20)',
        'prefix: str = "", *, limit: int = 21)',
        "test_author_suggestions_stop_at_the_limit_of_twenty_unless_told",
        r"NumberReplacer$",
        r"^def author_suggestions\(",
    ),
    _selector_mutant(
        "a prefix read to 101 characters",
        "prefix.strip()[:100]",
        "prefix.strip()[:101]",
        "test_author_suggestions_read_the_first_hundred_characters_of_a_prefix",
        r"NumberReplacer$",
        r"^prefix = prefix\.strip\(\)\[:100\]$",
    ),
    _selector_mutant(
        "named authors added only at the limit",
        "if len(names) < limit:",
        "if len(names) == limit:",
        "test_author_suggestions_add_the_named_authors_of_readable_memories_while_under_the_limit",
        r"ReplaceComparisonOperator_Lt_Eq$",
        r"^if len\(names\) < limit:$",
    ),
    _selector_mutant(
        "named authors never added",
        'for name in named.order_by("author_name")',
        'for name in named.none().order_by("author_name")',
        "test_author_suggestions_add_the_named_authors_of_readable_memories_while_under_the_limit",
        r"ZeroIterationForLoop$",
        r'^for name in named\.order_by\("author_name"\)',
    ),
    _selector_mutant(
        "a list oldest first by default",
        "    oldest_first: bool = False",
        "    oldest_first: bool = True",
        "test_a_list_is_newest_first_unless_asked",
        r"ReplaceFalseWithTrue$",
        r"^oldest_first: bool = False$",
    ),
    _selector_mutant(
        "a list in the other order from the one asked",
        "    if filters.oldest_first:",
        "    if not filters.oldest_first:",
        "test_a_list_is_newest_first_unless_asked",
        r"AddNot$",
        r"^if filters\.oldest_first:$",
    ),
]


def load_record() -> dict[str, Any]:
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    return {"targets": {}, "passes": [], "named": None, **record}


def save_record(record: dict[str, Any]) -> None:
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def killed_since(module: str, operator: str, source: str, diff: str = "") -> str:
    """Why a survivor is no longer one: a named mutant re-making it was killed (the record's named results)."""
    named = load_record()["named"]
    if not named:
        return ""
    killed = {r["name"] for r in named["results"] if r["killed"]}
    for mutant in NAMED_MUTANTS:
        if mutant.survivor is None or mutant.name not in killed:
            continue
        where, pattern, line = mutant.survivor
        if where != module or not re.search(pattern, operator) or not re.search(line, source):
            continue
        if not mutant.context or not diff or re.search(mutant.context, diff):
            tests = ", ".join(t.split("::")[-1] for t in mutant.tests)
            return f"killed by a test added after this pass ({tests}; re-made by hand below)"
    return ""


def run_named(work: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """Apply each named mutant to the copy, run its tests, restore; killed means the tests failed."""
    results = []
    for mutant in NAMED_MUTANTS:
        modules = sorted({module for module, _old, _new in mutant.edits})
        for module, old, new in mutant.edits:
            path = work / module
            text = path.read_text()
            if text.count(old) != 1:
                raise SystemExit(f"named mutant {mutant.name!r}: {module} no longer holds the text it mutates once")
            path.write_text(text.replace(old, new))
        started = time.monotonic()
        try:
            command = f"{PYTEST} --reuse-db -m 'not slow' {' '.join(mutant.tests)}"
            run = subprocess.run(command, shell=True, cwd=work, env=env, capture_output=True, text=True)  # noqa: S602
        finally:
            for module in modules:
                shutil.copy2(ROOT / module, work / module)
        last = (run.stdout.strip() or run.stderr.strip() or "no output").splitlines()[-1]
        results.append(
            {"name": mutant.name, "killed": run.returncode != 0, "seconds": round(time.monotonic() - started), "tests": last}
        )
        _say(f"named mutant {mutant.name!r}: {'killed' if run.returncode else 'SURVIVED'} ({last})")
    return results


@dataclass
class Outcome:
    target: Target
    baseline_seconds: float = 0.0
    baseline_ok: bool = True
    generated: int = 0  # mutants cosmic-ray made in the target's lines
    filtered: int = 0  # of those, left out by operator
    ran: int = 0
    killed: int = 0
    timeouts: int = 0
    incompetent: int = 0
    survivors: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""


def _say(message: str) -> None:
    print(f"r70: {message}", flush=True)


def copy_tree(into: Path) -> None:
    """The working tree as it is (uncommitted edits included), without ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    if into.exists():
        shutil.rmtree(into)
    for raw in listed:
        if not raw:
            continue
        source = ROOT / raw.decode()
        if not source.is_file():
            continue
        destination = into / raw.decode()
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)


def function_lines(path: Path, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """The (first, last) line of each named function (`Class.method` or `function`)."""
    tree = ast.parse(path.read_text())
    found: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found[f"{prefix}{child.name}"] = (child.lineno, child.end_lineno or child.lineno)

    visit(tree, "")
    missing = [name for name in names if name not in found]
    if missing:
        raise SystemExit(f"{path}: no function {', '.join(missing)} (renamed? update TARGETS)")
    return [found[name] for name in names]


def write_config(target: Target, path: Path, *, timeout: float) -> None:
    operators = ", ".join(f"'{pattern}'" for pattern in EXCLUDED_OPERATORS)
    path.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{target.module}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f'test-command = "{target.command}"\n\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n\n'
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = [{operators}]\n"
    )


def apply_filters(session: Path, work: Path, target: Target, outcome: Outcome) -> None:
    """Skip mutants outside the target's functions (not counted) and those of excluded operators (counted as filtered)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    ranges = function_lines(work / target.module, target.functions) if target.functions else None
    excluded = re.compile("|".join(f"(?:{pattern})" for pattern in EXCLUDED_OPERATORS))
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            mutation = item.mutations[0]
            line = mutation.start_pos[0]
            if ranges is not None and not any(first <= line <= last for first, last in ranges):
                db.set_result(item.job_id, WorkResult(output="outside the target", worker_outcome=WorkerOutcome.SKIPPED))
            elif excluded.match(mutation.operator_name):
                db.set_result(item.job_id, WorkResult(output="Filtered operator", worker_outcome=WorkerOutcome.SKIPPED))


def tally(session: Path, work: Path, target: Target, outcome: Outcome) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    lines = (work / target.module).read_text().splitlines()
    annotations = annotation_lines(work / target.module)
    with use_db(str(session), WorkDB.Mode.open) as db:
        completed = db.completed_work_items
        pending = len(db.pending_work_items)
    outside = sum(1 for _item, result in completed if result.output == "outside the target")
    outcome.generated = len(completed) + pending - outside
    outcome.filtered = sum(1 for _item, result in completed if result.output == "Filtered operator")
    for item, result in completed:
        if result.worker_outcome == WorkerOutcome.SKIPPED:
            continue
        outcome.ran += 1
        if result.test_outcome == TestOutcome.INCOMPETENT or result.worker_outcome != WorkerOutcome.NORMAL:
            outcome.incompetent += 1
        elif result.test_outcome == TestOutcome.SURVIVED:
            mutation = item.mutations[0]
            line = mutation.start_pos[0]
            text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            outcome.survivors.append(
                {
                    "job": item.job_id,
                    "line": line,
                    "operator": mutation.operator_name.removeprefix("core/"),
                    "source": text,
                    "diff": result.diff or "",
                    "annotation": in_annotation(annotations, tuple(mutation.start_pos)),
                }
            )
        else:
            outcome.killed += 1
            if result.output == "timeout":
                outcome.timeouts += 1
    judge(outcome)


def judge(outcome: Outcome) -> None:
    """Why each survivor is one: equivalent (an annotation, EXPLAINED), killed since by a named mutant, or not known."""
    module = outcome.target.module
    for s in outcome.survivors:
        operator = "core/" + s["operator"]
        s["why"] = (
            ANNOTATION_REASON
            if s["annotation"]
            else explanation(module, operator, s["source"], s["diff"]) or killed_since(module, operator, s["source"], s["diff"])
        )


# A session's tally is cumulative over its passes, so the time of one pass is not recorded with it.
_RECORDED = ("generated", "filtered", "ran", "killed", "timeouts", "incompetent")


def recorded(outcome: Outcome, at: str) -> dict[str, Any]:
    entry: dict[str, Any] = {key: getattr(outcome, key) for key in _RECORDED}
    entry["at"] = at
    kept = ("line", "operator", "source", "diff", "annotation")
    entry["survivors"] = [{key: s[key] for key in kept} for s in outcome.survivors]
    return entry


def from_record(target: Target, entry: dict[str, Any]) -> Outcome:
    outcome = Outcome(target, **{key: entry[key] for key in _RECORDED})
    outcome.survivors = [dict(s) for s in entry["survivors"]]
    outcome.note = f"as recorded {entry['at']} (no session of it on this machine)"
    judge(outcome)
    return outcome


def slug_of(target: Target) -> str:
    return re.sub(r"\W+", "-", target.name).strip("-")


def forget_survivors(session: Path, work: Path, target: Target) -> None:
    """Unexplained survivors of an earlier pass become pending again, to be run against the tests added since."""
    import sqlite3

    earlier = Outcome(target)
    tally(session, work, target, earlier)
    jobs = [(s["job"],) for s in earlier.survivors if not s["why"]]
    with sqlite3.connect(session) as db:
        db.executemany("DELETE FROM work_results WHERE job_id = ?", jobs)


def run_target(target: Target, work: Path, env: dict[str, str], *, fresh: bool, retest: bool, deadline: float) -> Outcome:
    outcome = Outcome(target)
    slug = slug_of(target)
    config, session = HOME / f"{slug}.toml", HOME / f"{slug}.sqlite"
    if deadline - time.monotonic() <= 0:
        outcome.note = "not run: the time budget was spent"
        if session.exists():
            tally(session, work, target, outcome)
        return outcome
    command = target.command
    started = time.monotonic()
    baseline = subprocess.run(command, shell=True, cwd=work, env=env, capture_output=True, text=True)  # noqa: S602
    outcome.baseline_seconds = time.monotonic() - started
    if baseline.returncode != 0:
        outcome.baseline_ok = False
        last = (baseline.stdout.strip() or baseline.stderr.strip() or "no output").splitlines()[-1]
        outcome.note = f"the targeted tests fail without any mutant: {last}"
        _say(f"{target.name}: baseline FAILED\n{baseline.stdout[-3000:]}{baseline.stderr[-2000:]}")
        return outcome
    _say(f"{target.name}: baseline passed in {outcome.baseline_seconds:.1f} s")
    # A surviving mutant runs the whole subset: its limit must leave room for a loaded machine, or a slow
    # survivor would be counted as killed by the timeout.
    write_config(target, config, timeout=max(target.timeout, 4 * outcome.baseline_seconds))
    if fresh or not session.exists():
        session.unlink(missing_ok=True)
        subprocess.run([COSMIC_RAY, "init", str(config), str(session)], cwd=work, env=env, check=True)
        apply_filters(session, work, target, outcome)
    elif retest:
        forget_survivors(session, work, target)
    remaining = deadline - time.monotonic()
    if remaining > 0:
        began = time.monotonic()
        # Its own process group, so the budget can stop it (and the test run it started) at once.
        runner = subprocess.Popen([COSMIC_RAY, "exec", str(config), str(session)], cwd=work, env=env, start_new_session=True)
        try:
            runner.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            outcome.note = "stopped by the time budget"
        finally:
            if runner.poll() is None:  # the budget, or this script stopped: stop cosmic-ray and its test run
                os.killpg(runner.pid, signal.SIGTERM)
                runner.wait()
        outcome.seconds = time.monotonic() - began
    else:
        outcome.note = "not run: the time budget was spent"
    # A stopped run may leave a mutant in the copy: put the module back before the next target.
    shutil.copy2(ROOT / target.module, work / target.module)
    tally(session, work, target, outcome)
    return outcome


def render(outcomes: list[Outcome], summary: str, skipped: list[str]) -> str:
    rows = [
        "| target | module | tests | mutants | run | killed | survived | explained | not run | s / mutant |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for o in outcomes:
        considered = o.generated - o.filtered
        survived = len(o.survivors)
        explained = sum(1 for s in o.survivors if s["why"])
        per = f"{o.seconds / o.ran:.1f}" if o.ran and o.seconds else "–"
        where = o.target.module + (f" ({', '.join(o.target.functions)})" if o.target.functions else "")
        tests = ", ".join(Path(t).name for t in o.target.tests)
        rows.append(
            f"| {o.target.name} | `{where}` | {tests} | {considered} | {o.ran} | {o.killed} | {survived} | {explained} | "
            f"{considered - o.ran} | {per} |"
        )
    totals = Counter[str]()
    for o in outcomes:
        totals["mutants"] += o.generated - o.filtered
        totals["ran"] += o.ran
        totals["killed"] += o.killed
        totals["survived"] += len(o.survivors)
        totals["unexplained"] += sum(1 for s in o.survivors if not s["why"])
    lines = [
        "Mutation testing with cosmic-ray over the code that decides access, ranking, webhook signatures and the "
        "audit chain; each target runs its own targeted tests (`-x`, `--reuse-db`, one embedded PostgreSQL + Redis "
        "for the whole run). `mutants` counts those of the operators kept (see the script's docstring for the ones "
        "left out); `not run` were left by the time budget (cosmic-ray picks pending mutants at random, so a "
        "partial target is a random sample).",
        "",
        *rows,
        "",
        f"Total: {totals['mutants']} mutants, {totals['ran']} run, {totals['killed']} killed, "
        f"{totals['survived']} survived ({totals['unexplained']} unexplained).",
        "",
        summary,
    ]
    named = load_record()["named"]
    if named:
        lines += [
            "",
            f"### Named mutants, made by hand ({named['at']})",
            "",
            "The four survivors issue 18 names, as they were made then, and the cosmic-ray survivors killed by tests "
            "written after their pass (re-made here, so the kill is checked without re-running the whole subset); for "
            "the audit chain also mutants of the kinds its sample found that the sample did not reach.",
            "",
            "| mutant | result | tests |",
            "| --- | --- | --- |",
            *(f"| {r['name']} | {'killed' if r['killed'] else '**survived**'} | {r['tests']} |" for r in named["results"]),
        ]
    if skipped:
        lines += ["", "Targets never run (no session here, nothing recorded): " + ", ".join(skipped) + "."]
    notes = [f"- {o.target.name}: {o.note}" for o in outcomes if o.note]
    if notes:
        lines += ["", *notes]
    survivors = [(o, s) for o in outcomes for s in o.survivors]
    if survivors:
        lines += ["", "### Survivors", ""]
        for o, s in survivors:
            why = s["why"] or "**unexplained**"
            lines.append(f"- `{o.target.module}:{s['line']}` {s['operator']} on `{s['source']}` — {why}")
    return "\n".join([*lines, "", *render_earlier(totals)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="target names (or a unique part of one) to run; default all")
    parser.add_argument("--budget-minutes", type=float, default=float(os.environ.get("MUTATION_BUDGET_MINUTES", "90")))
    parser.add_argument("--fresh", action="store_true", help="discard earlier sessions and start every target anew")
    parser.add_argument(
        "--retest-survivors", action="store_true", help="run the survivors of earlier sessions again (after new tests)"
    )
    parser.add_argument("--named", action="store_true", help="run only the named mutants (the survivors issue 18 found)")
    parser.add_argument("--no-report", action="store_true", help="print, do not write docs/reliability.md")
    parser.add_argument(
        "--report-only", action="store_true", help="run nothing: report the sessions of earlier passes (their log included)"
    )
    args = parser.parse_args(argv)
    # Stopped with SIGTERM (or SIGINT where a background shell ignores it): unwind, so the embedded
    # services are stopped and the copy restored by the `finally` blocks.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from cortex_site.runner import embedded_services, ensure_dev_connector_key

    targets = TARGETS
    if args.only:
        targets = [t for t in TARGETS if any(part.lower() in t.name.lower() for part in args.only)]
    HOME.mkdir(parents=True, exist_ok=True)
    # A copy of its own per pass: passes over different targets may run side by side (sessions are per target).
    work = HOME / f"tree-{os.getpid()}"
    copy_tree(work)
    if args.report_only:
        try:
            return report(work, {}, None, args.no_report)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    home = Path(tempfile.mkdtemp(prefix="cortex-mutation-home-"))
    deadline = time.monotonic() + args.budget_minutes * 60
    outcomes: list[Outcome] = []
    began = datetime.now(tz=UTC)
    try:
        os.environ["CORTEX_HOME"] = str(home)
        ensure_dev_connector_key(home)
        with embedded_services(home, durable=False) as services:
            env = {
                **os.environ,
                **services,
                "DJANGO_SETTINGS_MODULE": "cortex_site.settings",
                "CORTEX_TESTING": "1",
                "SECRET_KEY": "test-only-secret-key-not-for-production",
                "CORTEX_EMBEDDER": "hash",
                "CELERY_TASK_ALWAYS_EAGER": "1",
            }
            # The copy, not the worktree, must be what the tests import.
            where = subprocess.run(
                [PYTHON, "-c", "import memories; print(memories.__file__)"],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            if not where.startswith(str(work)):
                raise SystemExit(f"the tests would import {where}, not the copy in {work}")
            if args.named:
                record = load_record()
                record["named"] = {"at": f"{began:%Y-%m-%d %H:%M} UTC", "results": run_named(work, env)}
                save_record(record)
                targets = []
            for target in targets:
                outcome = run_target(target, work, env, fresh=args.fresh, retest=args.retest_survivors, deadline=deadline)
                outcomes.append(outcome)
                _say(
                    f"{target.name}: {outcome.ran}/{outcome.generated - outcome.filtered} run, {outcome.killed} killed, "
                    f"{len(outcome.survivors)} survived"
                )
        ran = ", ".join(f"{o.target.name} {o.ran}" for o in outcomes)
        summary = (
            f"{began:%Y-%m-%d %H:%M} UTC, {args.budget_minutes:.0f} min budget"
            f"{', survivors re-run' if args.retest_survivors else ''}: mutants run per target (cumulative): {ran}"
        )
        return report(work, {o.target.name: o for o in outcomes}, summary, args.no_report)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def report(work: Path, ran_now: dict[str, Outcome], new_pass: str | None, no_report: bool) -> int:
    """Every target as it stands — run in this pass, in a session on this machine, or as last recorded — with the
    passes that produced the figures; the record is brought up to date with this machine's sessions."""
    record = load_record()
    at = f"{datetime.now(tz=UTC):%Y-%m-%d %H:%M} UTC"
    outcomes, skipped = [], []
    for target in TARGETS:
        session = HOME / f"{slug_of(target)}.sqlite"
        if target.name in ran_now or session.exists():
            outcome = ran_now.get(target.name) or Outcome(target)
            if target.name not in ran_now:
                tally(session, work, target, outcome)
            if session.exists():
                record["targets"][slug_of(target)] = recorded(outcome, at)
        elif slug_of(target) in record["targets"]:
            outcome = from_record(target, record["targets"][slug_of(target)])
        else:
            skipped.append(target.name)
            continue
        outcomes.append(outcome)
    if new_pass:
        record["passes"].append(new_pass)
    save_record(record)
    summary = "Passes that produced these figures (sessions accumulate; each ran pending mutants in random order):\n\n" + (
        "\n".join(f"- {line}" for line in record["passes"]) or "- none logged"
    )
    body = render(outcomes, summary, skipped)
    print(body)
    if not no_report:
        write_section("mutation", "Mutation testing (the suite's own strength)", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
