"""How Cortex runs: `python -m cortex_site.runner <command>`.

  run       everything on one machine (`make run`): embedded PostgreSQL + Redis unless
            DATABASE_URL / REDIS_URL are set, migrate, collect static files, seed the demo
            organization on first start, then web (uvicorn) + Celery worker + Celery beat until
            Ctrl-C / SIGTERM. Production-safe: DEBUG off, the secret generated under CORTEX_HOME.
  dev       the same with DEBUG on and the web server reloading on code changes (`make dev`)
  web       the ASGI server alone        (what the docker-compose `web` service runs)
  worker    a Celery worker alone        (docker-compose `worker`)
  beat      Celery beat alone            (docker-compose `beat`)
  socket    Slack Socket Mode receiver   (docker-compose `slack-socket`)
  migrate   apply migrations             (docker-compose `migrate`)
  services  only the embedded services, printing their URLs, until Ctrl-C (for benchmarks)

While `run`, `dev` or `services` runs, $CORTEX_HOME/run/services.json (0600) records the URLs
its children use, so `cortex ...` / `manage.py cortex ...` in another terminal find them.
  test      the test suite against throwaway embedded services (`make test`); extra
            arguments go to pytest

`run` starts its children with the same commands the containers use, so the code path
is the same in development and production.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from cortex_site import running
from cortex_site.embedded import (
    EmbeddedPostgres,
    EmbeddedRedis,
    EmbeddedServiceError,
    _pid_alive,
    _run_as,
    _service_ids,
    _service_user,
    secure_home,
)
from cortex_site.env import cortex_home, ensure_secret_key, read_secret_key
from cortex_site.queues import UnknownQueueError, worker_queues

PYTHON = sys.executable
ROOT = Path(__file__).resolve().parent.parent


def _home() -> Path:
    return cortex_home()


def _say(message: str) -> None:
    print(f"cortex: {message}", flush=True)


class RunLock:
    """One `make run` per CORTEX_HOME.

    An exclusive flock on run/cortex.lock, held while we run, decides between two starts racing
    each other; the pid in run/cortex.pid names the holder in messages. A pid file left by a dead
    process is stale and is cleared.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / "run" / "cortex.pid"
        self.lock_path = home / "run" / "cortex.lock"
        self._lock_file: IO[str] | None = None

    def _refuse(self, pid: int | str) -> EmbeddedServiceError:
        return EmbeddedServiceError(
            f"Cortex is already running from {self.path.parent.parent} (pid {pid}). "
            f"Stop it first (Ctrl-C in its terminal, or `kill {pid}`), or use another CORTEX_HOME."
        )

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_file = open(self.lock_path, "a+")  # noqa: SIM115 - held open for the life of the run
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            holder = self.path.read_text().strip() if self.path.exists() else "unknown"
            raise self._refuse(holder) from None
        self._lock_file = lock_file
        if self.path.exists():
            try:
                pid = int(self.path.read_text().strip())
            except ValueError:
                pid = -1
            if pid > 0 and pid != os.getpid() and _pid_alive(pid):
                self.release()
                raise self._refuse(pid)
            _say(f"clearing a stale lock left by pid {pid} (that process is gone)")
        self.path.write_text(f"{os.getpid()}\n")

    def release(self) -> None:
        try:
            if self.path.read_text().strip() == str(os.getpid()):
                self.path.unlink()
        except FileNotFoundError:
            pass
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None


@contextmanager
def embedded_services(home: Path, *, durable: bool = True) -> Iterator[dict[str, str]]:
    """Start what DATABASE_URL / REDIS_URL do not already point at; stop it again on exit."""
    started: list[EmbeddedPostgres | EmbeddedRedis] = []
    env: dict[str, str] = {}
    # CORTEX_HOME holds secrets (the secret key, the database password, the Redis state) even when
    # both services are external: its owner's only, whatever created it.
    secure_home(home)
    try:
        if not os.environ.get("DATABASE_URL"):
            postgres = EmbeddedPostgres(home / "pg", durable=durable)
            _say(f"starting PostgreSQL + pgvector (data in {postgres.data_dir})")
            env["DATABASE_URL"] = postgres.start()
            started.append(postgres)
        if not os.environ.get("REDIS_URL"):
            redis_server = EmbeddedRedis(home / "redis")
            _say(f"starting Redis (data in {redis_server.data_dir})")
            env["REDIS_URL"] = redis_server.start()
            started.append(redis_server)
        yield env
    finally:
        for service in reversed(started):
            try:
                service.stop()
            except EmbeddedServiceError as exc:
                _say(f"warning: {exc}")


def _manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([PYTHON, str(ROOT / "manage.py"), *args], check=True, env=env, cwd=ROOT)  # noqa: S603


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **extra}
    env.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")
    env.setdefault("CORTEX_HOME", str(_home()))
    return env


def web_concurrency() -> int:
    """Web server processes: WEB_CONCURRENCY, else one per CPU this process may run on.

    Django runs a request's sync code under the GIL, so one process uses at most about one core;
    the processes share the one port (the MCP endpoint is stateless, static files and sessions
    live in files and PostgreSQL/Redis, so any process can answer any request)."""
    value = os.environ.get("WEB_CONCURRENCY", "").strip()
    if not value:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    try:
        workers = int(value)
    except ValueError:
        workers = 0
    if workers < 1:
        raise EmbeddedServiceError(f"WEB_CONCURRENCY={value!r}: give the number of web server processes (1 or more).")
    return workers


def web_command(*, reload: bool = False) -> list[str]:
    host = os.environ.get("HOST", "127.0.0.1")
    port = os.environ.get("PORT", "8000")
    if reload:
        # Only our code and templates: the embedded services write under .cortex all the time.
        watched = [
            arg for name in ("cortex_site", "memories", "connectors", "audit", "templates") for arg in ("--reload-dir", name)
        ]
        return [
            PYTHON,
            "-m",
            "uvicorn",
            "cortex_site.asgi:application",
            "--host",
            host,
            "--port",
            port,
            "--reload",
            *watched,
            "--reload-include",
            "*.html",
            "--no-server-header",
        ]
    # Not `uvicorn --workers`: its processes share one listening socket and split keep-alive
    # connections unevenly; cortex_site/web_server.py gives each process a socket of its own.
    return [PYTHON, "-m", "cortex_site.web_server", "--host", host, "--port", port, "--workers", str(web_concurrency())]


def worker_command() -> list[str]:
    """A Celery worker on CORTEX_WORKER_QUEUES (default: every queue), named CORTEX_WORKER_NAME@host.

    Several workers may share one broker: tasks are acknowledged only after they ran, one at a
    time per process (cortex_site/celery.py), so each delivery is taken by exactly one of them.
    """
    concurrency = os.environ.get("CELERY_CONCURRENCY", "2")
    try:
        queues = worker_queues()
    except UnknownQueueError as exc:
        raise EmbeddedServiceError(str(exc)) from None
    name = os.environ.get("CORTEX_WORKER_NAME", "cortex").strip() or "cortex"
    return [
        PYTHON,
        "-m",
        "celery",
        "-A",
        "cortex_site",
        "worker",
        "-Q",
        ",".join(queues),
        "--concurrency",
        concurrency,
        "--loglevel",
        "INFO",
        "-n",
        f"{name}@%h",
    ]


def socket_command() -> list[str]:
    """Slack's Socket Mode receiver (one connection per socket-mode Slack connector; idle without any)."""
    return [PYTHON, str(ROOT / "manage.py"), "slack_socket_mode"]


def beat_command(home: Path) -> list[str]:
    schedule = home / "run" / "celerybeat-schedule"
    schedule.parent.mkdir(parents=True, exist_ok=True)
    return [PYTHON, "-m", "celery", "-A", "cortex_site", "beat", "--loglevel", "INFO", "--schedule", str(schedule)]


def supervised_commands(home: Path, *, dev: bool = False) -> dict[str, list[str]]:
    """What `make run` keeps running, by runner subcommand: one docker-compose service each."""
    return {
        "web": web_command(reload=dev),
        "worker": worker_command(),
        "beat": beat_command(home),
        "socket": socket_command(),
    }


def _unreachable(path: Path, user: str) -> Path | None:
    """The first directory on the way to `path` that `user` may not pass (no search bit for it), if any."""
    uid, gid = _service_ids(user)
    for directory in [*reversed(path.parents)]:
        info = directory.stat()
        bit = 0o100 if info.st_uid == uid else 0o010 if info.st_gid == gid else 0o001
        if not info.st_mode & bit:
            return directory
    return None


def app_user() -> tuple[str | None, str]:
    """Who web, worker and beat run as: as root, the unprivileged service user, if it can run Cortex.

    (user, "") to drop privileges; (None, why) to stay root — why is empty when we are not root.
    The service user already runs PostgreSQL and Redis, and the children hold both servers'
    passwords (in DATABASE_URL / REDIS_URL), so running them as that user grants it nothing its
    credentials do not; root's rights are what is given up. It needs the interpreter, the virtual
    environment and this source tree (read), CORTEX_HOME (enter; the secret key reaches the
    children in their environment) and a directory of its own for beat's schedule and caches.
    """
    user = _service_user()
    if user is None:
        return None, ""
    interpreter = Path(os.path.realpath(PYTHON))
    for path in (interpreter, ROOT / "manage.py"):
        blocked = _unreachable(path, user)
        if blocked is not None:
            mode = blocked.stat().st_mode & 0o777
            return None, (
                f"{user} cannot reach {path} ({blocked} is mode {mode:04o}, owner {blocked.owner()}), "
                "so web, worker and beat stay root; see docs/reliability.md, Security"
            )
    try:
        probe = subprocess.run(  # noqa: S603 - our own interpreter
            [PYTHON, "-c", "import celery, django, uvicorn, cortex_site"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            **_run_as(user),
        )
    except OSError as exc:
        return None, f"{user} cannot run {PYTHON} ({exc.strerror}), so web, worker and beat stay root"
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{user} cannot import Cortex ({last}), so web, worker and beat stay root"
    return user, ""


def app_home(home: Path, user: str) -> Path:
    """The service user's own directory under CORTEX_HOME (0700): beat's schedule, HOME for caches."""
    path = home / "app"
    (path / "run").mkdir(parents=True, exist_ok=True)
    owner = _service_ids(user)
    for directory in (path, path / "run", *(path / "run").iterdir()):
        os.chown(directory, *owner)
        directory.chmod(0o700 if directory.is_dir() else 0o600)
    return path


class Supervisor:
    """Runs child processes until one dies or we are told to stop; then stops them all."""

    def __init__(self, user: str | None = None) -> None:
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.stopping = False
        self.user = user  # as root: the children run as this unprivileged user (see app_user)

    def spawn(self, name: str, command: Sequence[str], env: dict[str, str]) -> None:
        # Own process group, so a terminal's Ctrl-C reaches us once and we stop children in order.
        self.children[name] = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True, **_run_as(self.user))  # noqa: S603

    def request_stop(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def wait_until_listening(self, host: str, port: int, timeout: float = 120) -> bool:
        """True once something accepts connections on host:port; False if we are stopping, a child
        died, or time ran out (then `wait()` reports what happened)."""
        target = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)  # noqa: S104 - a client address
        deadline = time.monotonic() + timeout
        while not self.stopping and time.monotonic() < deadline:
            if any(child.poll() is not None for child in self.children.values()):
                return False
            try:
                with socket.create_connection((target, port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.3)
        return False

    def wait(self) -> int:
        while not self.stopping:
            for name, child in self.children.items():
                code = child.poll()
                if code is not None:
                    _say(f"{name} exited with code {code}; stopping everything")
                    self.stopping = True
                    return code or 1
            time.sleep(0.3)
        return 0

    def stop_all(self, timeout: float = 20) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for name, child in self.children.items():
            remaining = max(0.1, deadline - time.monotonic())
            try:
                child.wait(remaining)
            except subprocess.TimeoutExpired:
                _say(f"{name} did not stop in time; killing it")
                child.kill()
                child.wait()


def ensure_dev_connector_key(home: Path) -> None:
    """A development Fernet key for connector credentials, made once under CORTEX_HOME (0600).

    Production sets CORTEX_CONNECTOR_KEY itself; without it the connectors.E001 check stops start-up.
    """
    if os.environ.get("CORTEX_CONNECTOR_KEY"):
        return
    from cryptography.fernet import Fernet

    key_file = home / "connector_key"
    if not (key_file.exists() and key_file.read_text().strip()):
        home.mkdir(parents=True, exist_ok=True)
        partial = key_file.with_name(f".connector_key.{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(Fernet.generate_key().decode())
        os.replace(partial, key_file)
    os.environ["CORTEX_CONNECTOR_KEY"] = key_file.read_text().strip()


def _one_machine_defaults(home: Path, *, dev: bool) -> None:
    """Settings for serving on this machine over plain HTTP, unless the operator set them.

    DEBUG is off for `run` (no debug pages, static files as in production); `dev` turns it on.
    Cookies are marked Secure and HSTS sent only when the public address is https: over plain
    http://127.0.0.1 a Secure session cookie would never come back and nobody could sign in.
    """
    if dev:
        os.environ["DEBUG"] = "1"
    os.environ.setdefault("DEBUG", "0")
    # Mail (invitations, password resets, the daily digest) is printed to this terminal unless the
    # operator configured a backend: one machine has no mail server to hand it to.
    os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
    host = os.environ.get("HOST", "127.0.0.1")
    if not os.environ.get("CORTEX_BASE_URL"):
        # Links, MCP and OAuth addresses name where this server really listens (PORT may not be 8000).
        shown = "127.0.0.1" if host in {"", "0.0.0.0", "::"} else host  # noqa: S104 - a listen address compared
        os.environ["CORTEX_BASE_URL"] = f"http://{shown}:{os.environ.get('PORT', '8000')}"
    base_url = os.environ["CORTEX_BASE_URL"]
    https = base_url.startswith("https://")
    for name in ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
        os.environ.setdefault(name, "1" if https else "0")
    if not https:
        os.environ.setdefault("SECURE_HSTS_SECONDS", "0")
    hosts = ["127.0.0.1", "localhost", "[::1]"]
    if host not in {"", "0.0.0.0", "::", *hosts}:  # noqa: S104 - a listen address compared, not bound
        hosts.append(host)
    public = urlsplit(base_url).hostname if base_url else None
    if public and public not in hosts:
        hosts.append(public)
    os.environ.setdefault("ALLOWED_HOSTS", ",".join(hosts))
    if not os.environ.get("SECRET_KEY"):
        ensure_secret_key(home)


def cmd_run(args: argparse.Namespace, *, dev: bool = False) -> int:
    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    _one_machine_defaults(home, dev=dev)
    workers = 1 if dev else web_concurrency()  # a bad WEB_CONCURRENCY stops us before anything starts
    ensure_dev_connector_key(home)
    lock = RunLock(home)
    lock.acquire()
    user, why = app_user()
    if why:
        _say(f"warning: {why}")
    supervisor = Supervisor(user)
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    signal.signal(signal.SIGINT, supervisor.request_stop)
    try:
        with embedded_services(home) as service_env:
            env = _child_env(service_env)
            running.write_state(home, env)
            _say("applying migrations")
            _manage("migrate", "--no-input", "-v", "0", env=env)
            if not dev:
                _say("collecting static files")
                _manage("collectstatic", "--no-input", "-v", "0", env=env)
            if os.environ.get("CORTEX_DEMO", "1").strip().lower() not in {"0", "false", "no", "off"}:
                _manage("cortex", "demo", "--first-start", env=env)
            if supervisor.stopping:
                return 0
            commands = supervised_commands(home, dev=dev)
            if user is not None:
                # CORTEX_HOME's files stay root's: the key travels in the environment (readable
                # only by the children's user and root), beat keeps its schedule in the user's own directory.
                own = app_home(home, user)
                env = {**env, "HOME": str(own), "SECRET_KEY": os.environ.get("SECRET_KEY") or read_secret_key(home) or ""}
                commands["beat"] = beat_command(own)
                _say(f"web, worker and beat run as {user}")
            for name, command in commands.items():
                supervisor.spawn(name, command, env)
            host, port = os.environ.get("HOST", "127.0.0.1"), os.environ.get("PORT", "8000")
            # Say "up" only once the web server accepts connections (it takes seconds to import).
            if supervisor.wait_until_listening(host, int(port)):
                mode = (
                    "development mode: DEBUG on, reloading on code changes; "
                    if dev
                    else f"{workers} web process{'es' if workers != 1 else ''}; "
                )
                _say(f"Cortex is up on http://{host}:{port}  ({mode}Ctrl-C stops everything)")
            code = supervisor.wait()
            _say("stopping web, worker, beat and the Slack socket receiver")
            supervisor.stop_all()
            _say("stopping embedded services")
        _say("stopped; data kept in " + str(home))
        return code
    except subprocess.CalledProcessError as exc:
        _say(f"start-up step failed: {' '.join(map(str, exc.cmd[1:3]))} (exit {exc.returncode})")
        supervisor.stop_all()
        return 1
    finally:
        running.clear_state(home)
        lock.release()


def _exec(command: list[str]) -> int:
    env = _child_env({})
    os.execvpe(command[0], command, env)  # noqa: S606 - replaces this process, as a container entrypoint should


def cmd_services(args: argparse.Namespace) -> int:
    home = _home()
    stop = {"flag": False}

    def _stop(signum: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    lock = RunLock(home)
    lock.acquire()
    try:
        with embedded_services(home) as env:
            running.write_state(home, _child_env(env))
            for key, value in env.items():
                print(f"export {key}='{value}'", flush=True)
            _say("services are up (Ctrl-C stops them)")
            while not stop["flag"]:
                time.sleep(0.3)
    finally:
        running.clear_state(home)
        lock.release()
    return 0


# Each xdist worker takes three Redis databases of its own (cortex_site/settings.py: 3 * (n + 1) ...
# + 2); Redis has 16, so gw0..gw3 fit.
MAX_TEST_WORKERS = 4
DEFAULT_TEST_WORKERS = "0"
# Options that choose the distribution themselves, or that need the tests in this process (a debugger).
_XDIST_OPTIONS = ("-n", "--numprocesses", "--dist", "--pdb", "--trace")


def pytest_worker_args(pytest_args: Sequence[str]) -> list[str]:
    """The pytest-xdist options for `cortex_site.runner test`: CORTEX_TEST_WORKERS processes, `auto` for one
    per CPU this process may run on (at most MAX_TEST_WORKERS); unset, 0 or 1 runs serially in one process
    (DEFAULT_TEST_WORKERS: serial until the whole suite has been proven green in parallel twice running).

    `--dist loadgroup`: the groups tests/conftest.py names (the leak package with its committed world)
    each stay together on one worker, the rest are shared out test by test. Options given on the command line
    (`-n`, `--dist`, `-p no:xdist`, `--pdb`) win: then nothing is added."""
    for arg in pytest_args:
        if arg in {"no:xdist", "-pno:xdist"} or any(arg == option or arg.startswith(option) for option in _XDIST_OPTIONS):
            return []
    value = os.environ.get("CORTEX_TEST_WORKERS", "").strip() or DEFAULT_TEST_WORKERS
    if value == "auto":
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        workers = min(cpus, MAX_TEST_WORKERS)
    else:
        try:
            workers = int(value)
        except ValueError:
            workers = -1
        if not 0 <= workers <= MAX_TEST_WORKERS:
            raise EmbeddedServiceError(
                f"CORTEX_TEST_WORKERS={value!r}: give the number of test processes, 0 to {MAX_TEST_WORKERS}, "
                "or auto for one per CPU (0 or 1: serial, in one process)."
            )
    if workers <= 1:
        return []
    return ["-n", str(workers), "--dist", "loadgroup"]


def cmd_test(args: argparse.Namespace) -> int:
    """Run pytest against throwaway embedded services, removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="cortex-test-"))
    os.environ["CORTEX_HOME"] = str(home)
    ensure_dev_connector_key(home)
    try:
        with embedded_services(home, durable=False) as service_env:
            env = _child_env(service_env)
            env["CORTEX_TESTING"] = "1"
            env.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")
            # Fast, deterministic vectors and in-process tasks unless a test asks otherwise
            # (the local model and a real worker each have their own tests).
            env.setdefault("CORTEX_EMBEDDER", "hash")
            env.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
            command = [PYTHON, "-m", "pytest", *pytest_worker_args(args.pytest_args), *args.pytest_args]
            _say("running " + " ".join(command[2:]))
            return subprocess.run(command, env=env, cwd=ROOT).returncode  # noqa: S603
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cortex_site.runner", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run")
    sub.add_parser("dev")
    sub.add_parser("web")
    sub.add_parser("worker")
    sub.add_parser("beat")
    sub.add_parser("socket")
    sub.add_parser("migrate")
    sub.add_parser("services")
    test = sub.add_parser("test")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `test` belongs to pytest, options included.
    args = argparse.Namespace(command="test", pytest_args=argv[1:]) if argv[:1] == ["test"] else parser.parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "dev":
            return cmd_run(args, dev=True)
        if args.command == "services":
            return cmd_services(args)
        if args.command == "test":
            return cmd_test(args)
        if args.command == "web":
            return _exec(web_command())
        if args.command == "worker":
            return _exec(worker_command())
        if args.command == "beat":
            return _exec(beat_command(_home()))
        if args.command == "socket":
            return _exec(socket_command())
        if args.command == "migrate":
            return _exec([PYTHON, str(ROOT / "manage.py"), "migrate", "--no-input"])
    except EmbeddedServiceError as exc:
        _say(f"error: {exc}")
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
