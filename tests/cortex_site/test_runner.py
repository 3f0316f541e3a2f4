"""The dev runner and its embedded services: data survives restarts, locks are honest, and
`python -m cortex_site.runner run` starts and stops everything (the end-to-end tests are slow).

Every test uses its own CORTEX_HOME under /tmp: PostgreSQL's Unix socket path must stay short.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest
import redis

from cortex_site.embedded import (
    EmbeddedPostgres,
    EmbeddedRedis,
    EmbeddedServiceError,
    free_port,
    remove_tree,
    shared_buffers,
)
from cortex_site.runner import RunLock

ROOT = Path(__file__).resolve().parents[2]
# Variables of the test run itself that must not leak into a runner started from a test.
# CELERY_TASK_ALWAYS_EAGER too: under `make run` the demo seed's post-write work goes to the worker.
_SUITE_ONLY = (
    "DATABASE_URL",
    "REDIS_URL",
    "CORTEX_TESTING",
    "SECRET_KEY",
    "DEBUG",
    "CORTEX_DEMO",
    "CORTEX_HOME",
    "PORT",
    "HOST",
    "CELERY_TASK_ALWAYS_EAGER",
)


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ctx-", dir="/tmp"))
    yield path
    # Whatever a failing test left running must not outlive it.
    EmbeddedPostgres(path / "pg").stop()
    EmbeddedRedis(path / "redis").stop()
    remove_tree(path)


def _runner_env(home: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _SUITE_ONLY}
    return {**env, "CORTEX_HOME": str(home), **extra}


def _dead_pid() -> int:
    """A pid that belonged to a process which has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# -- PostgreSQL --------------------------------------------------------------------------------
def test_postgres_keeps_its_data_across_restarts_and_stale_pid_files(home: Path) -> None:
    postgres = EmbeddedPostgres(home / "pg")
    url = postgres.start()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (note text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
        extension = conn.execute("SELECT name FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    assert extension == ("vector",)
    postgres.stop()
    assert not postgres.is_running()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)

    again = EmbeddedPostgres(home / "pg")
    assert again.start() == url  # the same data, at the same address
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT note FROM kept").fetchall() == [("still here",)]
    # Starting while it already runs reuses the running server instead of failing.
    assert EmbeddedPostgres(home / "pg").start() == url
    again.stop()

    # A postmaster.pid left by a crash (its process is gone) does not block the next start.
    (home / "pg" / "postmaster.pid").write_text(f"{_dead_pid()}\n{home / 'pg'}\n")
    assert EmbeddedPostgres(home / "pg").start() == url
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT note FROM kept").fetchall() == [("still here",)]


def test_postgres_buffer_cache_is_a_quarter_of_the_memory_within_bounds_or_as_configured(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CORTEX_PG_SHARED_BUFFERS", raising=False)
    memory = psutil.virtual_memory().total
    cgroup = Path("/sys/fs/cgroup/memory.max")
    if cgroup.exists() and cgroup.read_text().strip() != "max":
        memory = min(memory, int(cgroup.read_text()))
    expected = max(128, min(4096, memory // 4 // 2**20))
    assert shared_buffers() == f"{expected}MB"
    # Configured: PostgreSQL runs with what was asked.
    monkeypatch.setenv("CORTEX_PG_SHARED_BUFFERS", "160MB")
    postgres = EmbeddedPostgres(home / "pg")
    with psycopg.connect(postgres.start()) as conn:
        assert conn.execute("SHOW shared_buffers").fetchone() == ("160MB",)
    postgres.stop()
    # A size PostgreSQL would not read is refused before the server is asked to start, saying how to write one.
    for wrong in ("lots", "1.5GB", "512 mb"):
        monkeypatch.setenv("CORTEX_PG_SHARED_BUFFERS", wrong)
        with pytest.raises(EmbeddedServiceError, match=r"e\.g\. 512MB or 2GB"):
            EmbeddedPostgres(home / "pg").start()
        assert not EmbeddedPostgres(home / "pg").is_running()


def test_postgres_refuses_a_pid_file_naming_a_live_stranger(home: Path) -> None:
    postgres = EmbeddedPostgres(home / "pg")
    postgres.start()
    postgres.stop()
    pid_file = home / "pg" / "postmaster.pid"
    pid_file.write_text(f"{os.getpid()}\n{home / 'pg'}\n")
    with pytest.raises(EmbeddedServiceError) as caught:
        EmbeddedPostgres(home / "pg").start()
    message = str(caught.value)
    assert f"names pid {os.getpid()}" in message
    assert "not PostgreSQL" in message
    assert "delete that postmaster.pid file" in message

    # The runner's command line says the same sentence, exits 2, and shows no traceback.
    result = subprocess.run(
        [sys.executable, "-m", "cortex_site.runner", "services"],
        env=_runner_env(home),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "cortex: error:" in result.stdout
    assert f"names pid {os.getpid()}" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert not (home / "run" / "cortex.pid").exists()  # the failed start released its lock

    # Once the stranger's pid file is gone, the same data starts again.
    pid_file.unlink()
    assert EmbeddedPostgres(home / "pg").start()


# -- Redis -------------------------------------------------------------------------------------
def test_redis_keeps_its_data_across_a_restart(home: Path) -> None:
    server = EmbeddedRedis(home / "redis")
    url = server.start()
    redis.Redis.from_url(url).set("cortex:kept", "still here")
    server.stop()
    assert not server.is_running()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()

    new_url = EmbeddedRedis(home / "redis").start()  # port and password may change: use what start() returns
    client = redis.Redis.from_url(new_url)
    assert client.get("cortex:kept") == b"still here"
    # Password-protected: a client without the password is refused.
    anonymous = new_url.replace(new_url.split("@")[0] + "@", "redis://")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(anonymous).get("cortex:kept")


def test_redis_pid_files_dead_are_cleared_live_strangers_refused(home: Path) -> None:
    server = EmbeddedRedis(home / "redis")
    server.start()
    server.stop()
    server.pid_file.write_text(f"{os.getpid()}\n")
    with pytest.raises(EmbeddedServiceError, match=rf"names pid {os.getpid()}, which is a running .* process, not our Redis"):
        EmbeddedRedis(home / "redis").start()
    server.pid_file.write_text(f"{_dead_pid()}\n")
    assert EmbeddedRedis(home / "redis").start()


# -- the run lock ------------------------------------------------------------------------------------
def test_a_stale_run_lock_from_a_dead_process_is_cleared(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = RunLock(home)
    lock.path.parent.mkdir(parents=True)
    dead = _dead_pid()
    lock.path.write_text(f"{dead}\n")
    lock.acquire()
    assert lock.path.read_text().strip() == str(os.getpid())
    assert f"clearing a stale lock left by pid {dead}" in capsys.readouterr().out
    lock.release()
    assert not lock.path.exists()


def test_a_run_lock_held_by_a_live_process_is_refused_with_a_clear_message(home: Path) -> None:
    holder = subprocess.Popen(["sleep", "60"])
    try:
        lock = RunLock(home)
        lock.path.parent.mkdir(parents=True)
        lock.path.write_text(f"{holder.pid}\n")
        with pytest.raises(EmbeddedServiceError, match=rf"Cortex is already running from {home} \(pid {holder.pid}\)"):
            lock.acquire()
        result = subprocess.run(
            [sys.executable, "-m", "cortex_site.runner", "services"],
            env=_runner_env(home),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2
        assert f"cortex: error: Cortex is already running from {home} (pid {holder.pid})" in result.stdout
        assert "Traceback" not in result.stdout + result.stderr
        assert lock.path.read_text().strip() == str(holder.pid)  # the holder's lock is left alone
        assert not (home / "pg").exists()  # nothing was started
    finally:
        holder.kill()
        holder.wait()


# -- end to end: `python -m cortex_site.runner run` ------------------------------------------------------
class RunningCortex:
    def __init__(self, home: Path, log: Path, **env: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.home = home
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cortex_site.runner", "run"],
                env=_runner_env(home, HOST="127.0.0.1", PORT=str(self.port), CELERY_CONCURRENCY="1", **env),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.process.poll() is None, f"runner exited early ({self.process.returncode}):\n{self.output()[-4000:]}"
            assert time.monotonic() < deadline, f"{text!r} never appeared:\n{self.output()[-4000:]}"
            time.sleep(0.2)

    def wait_healthy(self, timeout: float = 240) -> dict[str, object]:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"runner exited early ({self.process.returncode}):\n{self.output()[-4000:]}"
            try:
                response = httpx.get(f"{self.base}/healthz", timeout=10)
                last = (response.status_code, response.text[:500])
                assert response.status_code in {200, 503}, last
                if response.status_code == 200:
                    return response.json()
            except httpx.TransportError as exc:
                last = exc
            time.sleep(0.5)
        raise AssertionError(f"/healthz never answered 200 within {timeout}s (last: {last}):\n{self.output()[-4000:]}")

    def our_processes(self) -> set[int]:
        """Every process this run owns: its own descendants and the daemonized PostgreSQL and Redis."""
        pids = {child.pid for child in psutil.Process(self.process.pid).children(recursive=True)}
        for pid_file in (self.home / "pg" / "postmaster.pid", self.home / "redis" / "redis.pid"):
            pid = int(pid_file.read_text().split()[0])
            pids.add(pid)
            pids |= {child.pid for child in psutil.Process(pid).children(recursive=True)}
        return pids

    def stop(self, timeout: float = 90) -> int:
        # A clean stop waits for web, worker, beat, Redis and PostgreSQL in turn: on a loaded 2-core
        # machine that has taken more than 30 s.
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"the runner did not stop within {timeout}s after SIGTERM:\n{self.output()[-4000:]}") from None


def _processes_mentioning(home: Path) -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(home) in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE and proc.pid != os.getpid():
            found.append(f"{proc.pid}: {cmdline}")
    return found


def _sign_in(base: str, email: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=20)
    login_page = client.get("/login/")
    assert login_page.status_code == 200
    token = client.cookies["csrftoken"]
    response = client.post("/login/", data={"username": email, "password": password, "csrfmiddlewaretoken": token})
    assert response.status_code == 302, response.text[:2000]
    assert response.headers["location"] == "/"
    return client


CORTEX_SCRIPT = Path(sys.executable).parent / "cortex"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `cortex` console script as an operator runs it: from another directory, with nothing
    in the environment but CORTEX_HOME."""
    return subprocess.run(
        [str(CORTEX_SCRIPT), *args], env=_runner_env(home), cwd=home, capture_output=True, text=True, timeout=120
    )


def test_the_cli_says_in_one_sentence_when_nothing_runs(home: Path) -> None:
    for command in ([str(CORTEX_SCRIPT), "org", "create", "newco"], [sys.executable, str(ROOT / "manage.py"), "cortex", "demo"]):
        result = subprocess.run(command, env=_runner_env(home), cwd=home, capture_output=True, text=True, timeout=120)
        assert result.returncode == 2
        assert result.stderr.strip() == f"cortex: Cortex is not running from {home}: start `make run` first, or set DATABASE_URL."
        assert result.stdout == ""


def test_the_cli_gives_its_usage_when_nothing_runs_and_then_says_so(home: Path) -> None:
    not_running = f"cortex: Cortex is not running from {home}: start `make run` first, or set DATABASE_URL."
    asked = _cli(home, "--help")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith("usage: cortex [-h]")
    assert "org                 organizations" in asked.stdout
    assert asked.stderr.strip() == not_running
    scoped = _cli(home, "org", "-h")
    assert (scoped.returncode, scoped.stdout.startswith("usage: cortex org [-h] command")) == (0, True), scoped.stderr
    bare = _cli(home)
    assert bare.returncode == 2
    assert bare.stderr.startswith("usage: cortex [-h]")
    assert bare.stderr.strip().endswith(f"cortex: error: the following arguments are required: command\n{not_running}")


def test_the_cli_names_itself_once_and_says_in_one_sentence_what_is_missing(home: Path) -> None:
    unreachable = "postgresql://nobody@/nowhere?host=/nonexistent"
    no_key = subprocess.run(
        [str(CORTEX_SCRIPT), "org", "create", "newco"],
        env=_runner_env(home, DATABASE_URL=unreachable),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert no_key.returncode == 2
    assert no_key.stderr.strip().startswith(f"cortex: SECRET_KEY is not set and {home / 'secret_key'} does not exist")
    assert "Traceback" not in no_key.stderr
    # Usage and its errors need no database, and name the command as it was typed: `cortex org`.
    env = _runner_env(home, DATABASE_URL=unreachable, REDIS_URL="redis://127.0.0.1:9/0", SECRET_KEY="only-for-this-test")
    for args, code in ((["org", "--help"], 0), (["org", "rename"], 2)):
        result = subprocess.run([str(CORTEX_SCRIPT), *args], env=env, cwd=home, capture_output=True, text=True, timeout=120)
        assert result.returncode == code, result.stderr
        assert (result.stdout + result.stderr).startswith("usage: cortex org "), result.stdout + result.stderr
    assert "cortex org: error: argument command: invalid choice: 'rename'" in result.stderr


def _operator_cli_works_beside_the_runner(run: RunningCortex) -> None:
    state = run.home / "run" / "services.json"
    assert state.stat().st_mode & 0o777 == 0o600  # it holds the Redis password
    assert (run.home / "secret_key").stat().st_mode & 0o777 == 0o600
    created = _cli(run.home, "org", "create", "newco", "--name", "Newco Labs")
    assert created.returncode == 0, created.stderr
    added = _cli(
        run.home, "user", "add", "nia@newco.test", "--org", "newco", "--clearance", "Manager", "--password", "pw-for-nia-1"
    )
    assert added.returncode == 0, added.stderr
    # The app sees what the CLI wrote: Nia signs in to Newco Labs.
    nia = _sign_in(run.base, "nia@newco.test", "pw-for-nia-1")
    assert nia.get("/api/me").json()["organization"] == {"slug": "newco", "name": "Newco Labs"}


def _production_pages_show_no_debug_information(run: RunningCortex, client: httpx.Client) -> None:
    for response in (httpx.get(f"{run.base}/no-such-page/", timeout=20), client.get("/no-such-page/")):
        assert response.status_code == 404
        assert "We couldn’t find that page" in response.text
        # Django's debug 404 lists the URL patterns it tried; ours lists nothing.
        assert "URLconf" not in response.text
        assert "api/" not in response.text.replace('href="/api/', "")
        assert "DEBUG = True" not in response.text
    # Static files are served as in production: hashed names, long-lived caching.
    page = client.get("/")
    hashed = [part.split('"')[0] for part in page.text.split('href="/static/')[1:] if part.split('"')[0].endswith(".css")]
    assert hashed and all(len(name.split(".")) >= 3 for name in hashed), hashed
    css = client.get(f"/static/{hashed[0]}")
    assert css.status_code == 200
    assert "immutable" in css.headers.get("cache-control", "")


@pytest.mark.slow
def test_run_serves_the_demo_stops_cleanly_on_sigterm_and_keeps_data(home: Path) -> None:
    log = home / "runner.log"
    first = RunningCortex(home, log)
    try:
        # "up" is announced only once the web server accepts connections.
        first.wait_for_output(f"Cortex is up on http://127.0.0.1:{first.port}")
        assert httpx.get(f"{first.base}/login/", timeout=20).status_code == 200
        health = first.wait_healthy()
        assert all(check["ok"] for check in health["checks"].values())  # type: ignore[attr-defined]
        ada = _sign_in(first.base, "ada@acme.test", "cortex-demo")
        shell = ada.get("/")
        assert shell.status_code == 200
        assert "Acme Robotics" in shell.text
        assert ada.get("/api/me").json()["organization"]["slug"] == "acme"
        assert "cortex-demo" in first.output()  # the demo credentials are printed on start
        _operator_cli_works_beside_the_runner(first)
        _production_pages_show_no_debug_information(first, ada)
        owned = first.our_processes()
        assert len(owned) >= 5  # web, worker, beat, postgres, redis (and their helpers)
        names = {psutil.Process(pid).name() for pid in owned}
        assert "postgres" in names
        assert any(name.startswith("redis-server") for name in names)
    finally:
        code = first.stop()
    assert code == 0, first.output()[-4000:]
    leftovers = [pid for pid in owned if _alive(pid)]
    assert not leftovers, [psutil.Process(pid).cmdline() for pid in leftovers]
    assert not _processes_mentioning(home)
    assert not (home / "run" / "cortex.pid").exists()
    assert not (home / "run" / "services.json").exists()  # the CLI no longer finds a dead run
    assert "stopped; data kept in" in first.output()

    # A stale lock (a dead pid) from a crashed run does not stop the next start.
    (home / "run" / "cortex.pid").write_text(f"{_dead_pid()}\n")
    second = RunningCortex(home, log, CORTEX_DEMO="0")
    try:
        second.wait_healthy()
        # The demo data of the first run is still there (nothing re-seeded it: CORTEX_DEMO=0).
        eve = _sign_in(second.base, "eve@acme.test", "cortex-demo")
        assert eve.get("/api/me").json()["clearance"] == "Employee"
        assert "clearing a stale lock" in second.output()
    finally:
        code = second.stop()
    assert code == 0, second.output()[-4000:]
    assert not _processes_mentioning(home)
