"""Reliability step `schema`: schemathesis `--checks all` over every operation of /api/schema/, per principal.

    .venv/bin/python bench/reliability/r20_schema.py                      # the full run
    .venv/bin/python bench/reliability/r20_schema.py --max-examples 5     # a quicker one

Starts embedded PostgreSQL and Redis, seeds one organization through the services (scopes,
memories, a GitHub connector pointed at a loopback stub, tokens of four principals: admin, member,
read-only, narrowed), starts Cortex's web server as `make run` does (DEBUG off) on loopback, then
runs the schemathesis CLI against it once per principal — every phase (examples, coverage,
fuzzing, stateful), every check — and writes section `schema` of docs/reliability.md: operations
× cases per principal and the failures (0 expected). Throttles are raised for the run (the contract
is what is tested here, not the rate limits; 429 stays documented on every operation).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import harness  # noqa: E402
from recall import database_url, drop_database, ensure_database  # noqa: E402

from reliability.report import write_section  # noqa: E402


def _by_path(name: str, path: Path) -> Any:
    """A module loaded from its file: bench/connectors.py (the name `connectors` is the Django app's) and
    tests/support modules (the package's __init__ needs Django set up, which this driver never does)."""
    return harness.load_module(name, path)


_helpers = _by_path("bench_connectors", ROOT / "bench" / "connectors.py")
free_port = _helpers.free_port  # type: ignore[attr-defined]
wait_http = _helpers.wait_http  # type: ignore[attr-defined]

HOME = Path(os.environ.get("CORTEX_BENCH_HOME") or Path(tempfile.gettempdir()) / "cortex-reliability-schema").resolve()
DATABASE = "cortex_reliability_schema"


def seed_phase(stub_url: str) -> None:
    """In a child with the run's environment: a fresh database, migrated and seeded; prints the tokens."""
    drop_database()
    ensure_database()
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command
    from support.openapi_contract import seed_contract_org

    call_command("migrate", verbosity=0)
    cache.clear()
    print("RESULT " + json.dumps(seed_contract_org(stub_url=stub_url)), flush=True)


def drive(args: argparse.Namespace) -> int:
    contract = _by_path("openapi_contract", ROOT / "tests" / "support" / "openapi_contract.py")
    stub_server = _by_path("stub_server", ROOT / "tests" / "support" / "stub_server.py")
    principals, run_schemathesis, StubServer = contract.PRINCIPALS, contract.run_schemathesis, stub_server.StubServer

    from cortex_site.runner import embedded_services, ensure_dev_connector_key, web_command

    HOME.mkdir(parents=True, exist_ok=True)
    ensure_dev_connector_key(HOME)
    stub = StubServer()  # the seeded connector's "GitHub": a connection test or sync stays on loopback
    stub.start()
    port = free_port()
    with embedded_services(HOME) as services:
        env = {**os.environ, **services}
        env.update(
            DJANGO_SETTINGS_MODULE="cortex_site.settings",
            CORTEX_HOME=str(HOME),
            DATABASE_URL=database_url(services["DATABASE_URL"], DATABASE),
            SECRET_KEY=env.get("SECRET_KEY") or "reliability-only-secret-key",
            CORTEX_DEMO="0",
            CORTEX_EMBEDDER="hash",
            CORTEX_API_RATE="1000000/min",
            CORTEX_LOGIN_FAILURES_PER_ADDRESS="1000000",
            CELERY_TASK_ALWAYS_EAGER="0",
            HOST="127.0.0.1",
            PORT=str(port),
            ALLOWED_HOSTS="127.0.0.1,localhost",
            PYTHONUNBUFFERED="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        seeded = subprocess.run(
            [sys.executable, __file__, "--seed-database", stub.url], env=env, cwd=ROOT, capture_output=True, text=True, check=True
        )
        tokens = json.loads(next(line for line in seeded.stdout.splitlines() if line.startswith("RESULT "))[7:])
        os.environ.update(HOST="127.0.0.1", PORT=str(port))  # web_command() reads where to listen from here
        log = (HOME / "web.log").open("w")
        web = subprocess.Popen(web_command(), env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            base_url = f"http://127.0.0.1:{port}"
            wait_http(f"{base_url}/healthz", timeout=300)
            runs = []
            for name in args.principals:
                started = time.monotonic()
                run = run_schemathesis(
                    base_url,
                    principal=name,
                    token=tokens[name],
                    max_examples=args.max_examples,
                    phases=args.phases,
                    seed=args.seed,
                    workers=args.workers,
                )
                seconds = time.monotonic() - started
                runs.append((run, seconds))
                print(
                    f"{name}: {run.operations} operations, {run.cases} cases, {len(run.failures)} failure kinds, {seconds:.0f} s"
                )
                for line in run.failures + run.errors:
                    print(f"  {line}")
                (HOME / f"schemathesis-{name}.txt").write_text(run.output)
        finally:
            web.terminate()
            web.wait(timeout=30)
            log.close()
            stub.stop()
    rows = [
        "| principal | who | operations | cases | run time | failures |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for run, seconds in runs:
        found = "; ".join(run.failures + run.errors) or "0"
        rows.append(
            f"| {run.principal} | {principals[run.principal]} | {run.operations} | {run.cases} | {seconds:.0f} s | {found} |"
        )
    total_cases = sum(run.cases for run, _ in runs)
    total_failures = sum(len(run.failures) + len(run.errors) for run, _ in runs)
    body = (
        f"schemathesis {schemathesis_version()} `--checks all`, phases {args.phases}, `--max-examples {args.max_examples}`, "
        f"seed {args.seed}, against Cortex's web server (DEBUG off) on loopback, one run per principal's token.\n\n"
        + "\n".join(rows)
        + f"\n\n{total_cases} cases in all; {total_failures} failure kinds "
        f"(each kind counts every operation it names; the per-principal outputs are in {HOME}/schemathesis-*.txt)."
    )
    write_section("schema", "API contract (schemathesis)", body)
    return 0 if total_failures == 0 else 1


def schemathesis_version() -> str:
    from importlib.metadata import version

    return version("schemathesis")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-examples", type=int, default=25)
    parser.add_argument("--phases", default="examples,coverage,fuzzing,stateful")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--principals", nargs="+", default=["admin", "member", "read_only", "narrowed"])
    parser.add_argument("--seed-database", dest="seed_url", help=argparse.SUPPRESS)  # the child that seeds
    args = parser.parse_args()
    if args.seed_url:
        seed_phase(args.seed_url)
        return 0
    return drive(args)


if __name__ == "__main__":
    raise SystemExit(main())
