"""Run schemathesis (`--checks all`) against a live Cortex server's /api/schema/, once per principal.

Shared by tests/hardening/test_openapi_contract.py (small budget, in `make test`) and
bench/reliability/r20_schema.py (the full run, in `make reliability`). Both seed the same
organization through the real services, start a real HTTP server, and run the schemathesis CLI
exactly as an outside client would — the engine, its phases (examples, coverage, fuzzing,
stateful) and every check — reading its JSON report for operations, cases and failures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memories.models import Membership

CONFIG = Path(__file__).with_name("schemathesis.toml")

# The principals every run covers: who they are, and why they are different.
PRINCIPALS = {
    "admin": "Executive admin with every grant",
    "member": "Employee member writing engineering only",
    "read_only": "read-only token of a Manager",
    "narrowed": "Manager token narrowed to the sales scope",
}


def seed_contract_org(*, slug: str = "contract", stub_url: str = "http://127.0.0.1:9") -> dict[str, str]:
    """An organization with scopes, memories and a connector; answers each principal's token secret.

    The connector's API address is the loopback `stub_url`: a connection test or sync the run
    triggers never leaves this machine.
    """
    # Imported here: the bench's driver process runs schemathesis without setting Django up.
    from connectors.services.connectors import connector_create
    from memories.access import Principal
    from memories.models import Membership, Scope
    from memories.services import tenancy
    from memories.services.memories import MemoryDraft, memory_create

    org = tenancy.organization_create(slug=slug, name="Contract Test Org")
    for scope in ("engineering", "sales"):
        tenancy.scope_create(organization=org, slug=scope)
    tenancy.scope_create(organization=org, slug="handbook", visibility=Scope.Visibility.ALL_MEMBERS, members_can_write=False)

    def member(clearance: str, grants: dict[str, bool], *, admin: bool = False) -> Membership:
        membership = tenancy.member_add(
            organization=org,
            email=f"{clearance.lower()}@{slug}.test",
            clearance=clearance,
            role=Membership.Role.ADMIN if admin else Membership.Role.MEMBER,
        )
        for scope_slug, can_write in grants.items():
            tenancy.grant_set(
                membership=membership, scope=Scope.objects.get(organization=org, slug=scope_slug), can_write=can_write
            )
        return Membership.objects.select_related("organization", "user").get(pk=membership.pk)

    admin = member("Executive", {"engineering": True, "sales": True, "handbook": True}, admin=True)
    manager = member("Manager", {"engineering": True, "sales": True})
    employee = member("Employee", {"engineering": True})
    for author, scope, text in (
        (admin, "engineering", "The deploy freeze starts every Friday at 15:00 and ends Monday at 09:00."),
        (manager, "sales", "Enterprise discounts above 20 percent need the sales director's approval."),
        (employee, "engineering", "Rotate the staging database password every ninety days."),
        (admin, "handbook", "Expense reports are due by the fifth working day of the month."),
    ):
        memory_create(principal=Principal(author), draft=MemoryDraft(content=text, scope=scope, tags=["contract"]))
    connector_create(
        principal=Principal(admin),
        kind="github",
        name="Contract repos",
        scope="engineering",
        config={"repositories": ["acme/robots"], "api_url": stub_url},
        credentials={"token": "ghp_contract-test-not-real"},
    )

    def token(membership: Membership, **options: Any) -> str:
        return tenancy.token_create(membership=membership, name="contract", **options)[1]

    return {
        "admin": token(admin),
        "member": token(employee),
        "read_only": token(manager, read_only=True),
        "narrowed": token(manager, scope_slugs=["sales"]),
    }


@dataclass
class ContractRun:
    """What one schemathesis run over the whole schema found, for one principal."""

    principal: str
    operations: int
    cases: int
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    exit_code: int = 0
    output: str = ""

    @property
    def clean(self) -> bool:
        return self.exit_code == 0 and not self.failures and not self.errors


def fetch_schema(base_url: str) -> bytes:
    """The OpenAPI document as /api/schema/ serves it (fetched once: building it takes seconds on a loaded machine)."""
    import requests

    response = requests.get(f"{base_url}/api/schema/", headers={"Accept": "application/json"}, timeout=120)
    response.raise_for_status()
    return response.content


def run_schemathesis(
    base_url: str,
    *,
    principal: str,
    token: str,
    max_examples: int,
    phases: str = "examples,coverage,fuzzing,stateful",
    seed: int = 1,
    workers: int = 1,
    extra: list[str] | None = None,
) -> ContractRun:
    """The schemathesis CLI with `--checks all` against `base_url`/api/schema/ as `token`'s principal."""
    with tempfile.TemporaryDirectory(prefix="cortex-schemathesis-") as tmp:
        report = Path(tmp) / "report.json"
        schema = Path(tmp) / "schema.json"
        schema.write_bytes(fetch_schema(base_url))
        command = [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(CONFIG),
            "run",
            str(schema),
            "--url",
            base_url,
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {token}",
            "--max-examples",
            str(max_examples),
            "--phases",
            phases,
            "--seed",
            str(seed),
            "--workers",
            str(workers),
            "--generation-database",
            "none",
            "--continue-on-failure",
            # Seconds per request: the machine running the suite may be loaded; a slow answer is not a contract failure.
            "--request-timeout",
            "60",
            "--no-color",
            "--report",
            "json",
            "--report-json-path",
            str(report),
            *(extra or []),
        ]
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env.pop(name, None)
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, cwd=tmp)
        output = (done.stdout + done.stderr).replace(token, "<token>")
        data: dict[str, Any] = json.loads(report.read_text()) if report.exists() else {}
    return summarise(principal, data, done.returncode, output)


def summarise(principal: str, data: dict[str, Any], exit_code: int, output: str) -> ContractRun:
    """A ContractRun from schemathesis's JSON report (its `failures`, `errors`, `operations`, `test_cases`)."""
    operations = (data.get("operations") or {}).get("tested", 0)
    cases = (data.get("test_cases") or {}).get("generated", 0)
    failures = [
        f"{failure['code']} {failure['title']} ×{failure['count']}: {', '.join(failure['operations'])}"
        for failure in data.get("failures", [])
    ]
    errors = [f"{error['title']} ×{error['count']}" for error in data.get("errors", [])]
    if not data:
        errors.append("no report written")
    return ContractRun(principal, operations, cases, failures, errors, exit_code, output)
