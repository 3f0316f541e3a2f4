"""The embedded services are closed to every other local user.

Found by the outside pass: PostgreSQL's socket was open to anyone with `trust` authentication, and
Redis ran as root with world-readable data files and CONFIG available to whoever saw the password.
Here a second local user (`nobody`, switched to with setuid when the suite runs as root) tries to
reach them, the file modes are read back, and a cluster made by an older Cortex is migrated.

Every test uses its own CORTEX_HOME under /tmp: PostgreSQL's Unix socket path must stay short.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from cortex_site.embedded import (
    PG_SYSTEM_USER,
    PG_USER,
    REDIS_DISABLED_COMMANDS,
    SERVICE_USER,
    EmbeddedPostgres,
    EmbeddedRedis,
    remove_tree,
)

AS_ROOT = os.geteuid() == 0
OTHER_USER = "nobody"
# The system interpreter: the suite's own may live under root's home, which nobody can enter.
OTHER_PYTHON = "/usr/bin/python3"
needs_root = pytest.mark.skipif(not AS_ROOT, reason="acting as a second local user needs root (setuid to nobody)")


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ctx-", dir="/tmp"))
    yield path
    EmbeddedPostgres(path / "pg").stop()
    EmbeddedRedis(path / "redis").stop()
    remove_tree(path)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _as_other_user(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Python code run by another, unprivileged local user (its own uid, gid and no extra groups)."""
    entry = pwd.getpwnam(OTHER_USER)
    return subprocess.run(
        [OTHER_PYTHON, "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", **env},
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
    )


def _assert_home_is_owner_only(home: Path) -> None:
    info = home.stat()
    if AS_ROOT:
        # Root's CORTEX_HOME: entered (not listed) by the service user's private group, nobody else.
        assert _mode(home) == 0o710
        assert (info.st_uid, info.st_gid) == (0, pwd.getpwnam(SERVICE_USER).pw_gid)
    else:
        assert _mode(home) == 0o700


def _passwordless(url: str) -> str:
    scheme, rest = url.split("://", 1)
    credentials, location = rest.split("@", 1)
    return f"{scheme}://{credentials.split(':', 1)[0]}@{location}"


# -- PostgreSQL ---------------------------------------------------------------------------------
def test_postgres_wants_a_password_kept_owner_only_and_its_files_are_private(home: Path) -> None:
    postgres = EmbeddedPostgres(home / "pg")
    url = postgres.start()
    password = (home / "postgres_password").read_text().strip()
    assert len(password) >= 32
    assert f":{password}@" in url  # the children get it inside DATABASE_URL
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_setting('password_encryption')").fetchone() == ("scram-sha-256",)
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [PG_USER]).fetchone()
        assert stored is not None and stored[0].startswith("SCRAM-SHA-256$")

    # The same OS user, at the same socket, without the password or with a wrong one: refused.
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(_passwordless(url), connect_timeout=5)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(url.replace(password, "0" * len(password)), connect_timeout=5)

    hba = (home / "pg" / "pg_hba.conf").read_text()
    methods = {line.split()[-1] for line in hba.splitlines() if line.strip() and not line.startswith("#")}
    assert methods == {"scram-sha-256"}

    _assert_home_is_owner_only(home)
    for directory in (home / "pg", home / "run", home / "log"):
        assert _mode(directory) == 0o700, directory
    assert _mode(home / "run" / ".s.PGSQL.5432") == 0o700
    for private_file in (home / "postgres_password", home / "log" / "postgres.log", home / "pg" / "pg_hba.conf"):
        assert _mode(private_file) == 0o600, private_file
    if AS_ROOT:
        assert (home / "pg").stat().st_uid == pwd.getpwnam(PG_SYSTEM_USER).pw_uid


@needs_root
def test_another_local_user_cannot_reach_postgres_even_knowing_the_password(home: Path) -> None:
    url = EmbeddedPostgres(home / "pg").start()
    socket_path = home / "run" / ".s.PGSQL.5432"
    probe = f"""
import socket, sys
for path in ({str(socket_path)!r}, {str(home / "postgres_password")!r}, {str(home / "pg" / "PG_VERSION")!r}):
    try:
        if path.endswith("5432"):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
        else:
            open(path).read()
        print("OPENED", path)
    except PermissionError:
        print("DENIED", path)
try:
    import os
    os.listdir({str(home)!r})
    print("LISTED")
except PermissionError:
    print("DENIED listing")
"""
    result = _as_other_user(probe)
    assert result.returncode == 0, result.stderr
    assert "OPENED" not in result.stdout and "LISTED" not in result.stdout, result.stdout
    assert result.stdout.count("DENIED") == 4, result.stdout

    # PostgreSQL's own client, run as that user with the right password in its environment.
    psql = EmbeddedPostgres(home / "pg").bin_dir / "psql"
    entry = pwd.getpwnam(OTHER_USER)
    attempt = subprocess.run(
        [str(psql), "-h", str(home / "run"), "-U", PG_USER, "-d", "cortex", "-tAc", "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "PGPASSWORD": url.split(":")[2].split("@")[0], "PGCONNECT_TIMEOUT": "5"},
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
    )
    assert attempt.returncode != 0
    assert "Permission denied" in attempt.stderr, attempt.stderr


def test_a_trust_cluster_made_by_an_older_cortex_gets_a_password_on_start_and_keeps_its_data(home: Path) -> None:
    old = EmbeddedPostgres(home / "pg")
    data = home / "pg"
    # What an older Cortex left: a world-readable CORTEX_HOME, a `trust` cluster, a running server.
    data.mkdir(mode=0o700)
    home.chmod(0o755)
    (home / "run").mkdir(mode=0o777)
    (home / "log").mkdir()
    if AS_ROOT:
        entry = pwd.getpwnam(PG_SYSTEM_USER)
        for path in (data, home / "run", home / "log"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    old._run("initdb", "-D", str(data), "-U", PG_USER, "--auth=trust", "--encoding=UTF8", "--no-instructions")
    old._run(
        "pg_ctl",
        "-D",
        str(data),
        "-l",
        str(home / "log" / "postgres.log"),
        "-w",
        "-o",
        f"-c listen_addresses='' -c unix_socket_directories='{home / 'run'}'",
        "start",
    )
    trusting = f"postgresql://{PG_USER}@/postgres?host={home / 'run'}"
    with psycopg.connect(trusting, autocommit=True) as conn:
        conn.execute("CREATE DATABASE cortex")
    with psycopg.connect(trusting.replace("/postgres?", "/cortex?"), autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (note text)")
        conn.execute("INSERT INTO kept VALUES ('from the old version')")

    url = EmbeddedPostgres(home / "pg").start()  # reuses the running server and migrates it live
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(trusting, connect_timeout=5)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT note FROM kept").fetchall() == [("from the old version",)]
    assert "trust" not in (data / "pg_hba.conf").read_text()
    _assert_home_is_owner_only(home)
    assert _mode(home / "run") == 0o700

    # And after a restart the password is still the one in postgres_password.
    EmbeddedPostgres(home / "pg").stop()
    assert EmbeddedPostgres(home / "pg").start() == url
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (1,)


# -- Redis --------------------------------------------------------------------------------------
def test_redis_refuses_admin_commands_keeps_flushdb_and_its_files_are_private(home: Path) -> None:
    server = EmbeddedRedis(home / "redis")
    client = redis.Redis.from_url(server.start())
    client.set("cortex:search", "leadership offsite")
    for command in (("CONFIG", "GET", "*"), ("CONFIG", "SET", "dir", "/root/.ssh"), ("DEBUG", "SLEEP", "0"), ("FLUSHALL",)):
        with pytest.raises(redis.ResponseError, match="unknown command"):
            client.execute_command(*command)
    for name in ("MODULE", "REPLICAOF", "SLAVEOF", "MONITOR", "ACL", "SHUTDOWN", "MIGRATE"):
        assert name in REDIS_DISABLED_COMMANDS
        with pytest.raises(redis.ResponseError, match="unknown command"):
            client.execute_command(name, "HELP" if name in {"MODULE", "ACL"} else "NO")
    assert client.get("cortex:search") == b"leadership offsite"
    # Django's cache.clear() empties its own database with FLUSHDB, which stays.
    redis.Redis.from_url(server.url.rsplit("/", 1)[0] + "/1").flushdb()
    assert client.get("cortex:search") == b"leadership offsite"

    pid = server._pid()
    assert pid is not None
    import psutil

    owner = psutil.Process(pid).uids().effective
    if AS_ROOT:
        assert owner == pwd.getpwnam(SERVICE_USER).pw_uid, "Redis must not run as root"
    else:
        assert owner == os.geteuid()

    server.stop()  # SIGTERM: saves the RDB snapshot as SHUTDOWN would
    assert not server.is_running()
    files = [home / "redis" / "dump.rdb", home / "redis" / "appendonly.aof", home / "log" / "redis.log"]
    for path in files:
        assert _mode(path) == 0o600, path
    assert _mode(home / "redis") == 0o700
    _assert_home_is_owner_only(home)

    # A snapshot written before the restart is read back after it: nothing lost by the SIGTERM stop.
    again = redis.Redis.from_url(EmbeddedRedis(home / "redis").start())
    assert again.get("cortex:search") == b"leadership offsite"


def test_world_readable_redis_files_of_an_older_cortex_are_made_private_on_start(home: Path) -> None:
    server = EmbeddedRedis(home / "redis")
    redis.Redis.from_url(server.start()).set("cortex:kept", "1")
    server.stop()
    # What an older Cortex left: root-owned 0644 data files.
    for path in (home / "redis").iterdir():
        path.chmod(0o644)
        if AS_ROOT:
            os.chown(path, 0, 0)
    (home / "redis").chmod(0o755)
    client = redis.Redis.from_url(EmbeddedRedis(home / "redis").start())
    assert client.get("cortex:kept") == b"1"
    for path in (home / "redis").iterdir():
        assert _mode(path) == 0o600, path
    assert _mode(home / "redis") == 0o700


@needs_root
def test_another_local_user_cannot_read_redis_files(home: Path) -> None:
    server = EmbeddedRedis(home / "redis")
    redis.Redis.from_url(server.start()).set("cortex:search", "leadership offsite")
    server.stop()
    targets = [home / "redis" / "appendonly.aof", home / "redis" / "dump.rdb", home / "redis" / "redis.state"]
    probe = f"""
for path in {[str(path) for path in targets]!r}:
    try:
        open(path, "rb").read()
        print("OPENED", path)
    except PermissionError:
        print("DENIED", path)
"""
    result = _as_other_user(probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("DENIED") == len(targets), result.stdout
