"""How the web server is started: WEB_CONCURRENCY processes (default: one per CPU), and database
connections from a pool in the web server only (DB_POOL, turned on by cortex_site/asgi.py)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from support.settings_env import settings_env

from cortex_site import runner, web_server
from cortex_site.embedded import EmbeddedServiceError, free_port

ROOT = Path(__file__).resolve().parents[2]
PRINT_DATABASE = (
    "from django.conf import settings; db = settings.DATABASES['default']; "
    "print(json.dumps({'pool': db.get('OPTIONS', {}).get('pool'), 'max_age': db['CONN_MAX_AGE']}))"
)


def _workers(command: list[str]) -> str:
    return command[command.index("--workers") + 1]


def test_the_web_server_runs_one_process_per_cpu_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    assert _workers(runner.web_command()) == str(len(os.sched_getaffinity(0)))
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    assert _workers(runner.web_command()) == "3"
    # The reloading development server is one process: uvicorn cannot reload several.
    assert "--workers" not in runner.web_command(reload=True)


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_web_concurrency_that_is_not_a_count_is_refused_in_words(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("WEB_CONCURRENCY", value)
    with pytest.raises(EmbeddedServiceError, match=r"WEB_CONCURRENCY=.*number of web server processes"):
        runner.web_command()


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter importing the real settings (nothing connects to the URLs)."""
    return subprocess.run(
        [sys.executable, "-c", code], env=settings_env(**env), cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_web_server_draws_connections_from_a_pool_and_other_processes_do_not() -> None:
    web = _python(f"import json, cortex_site.asgi; {PRINT_DATABASE}", DB_CONN_MAX_AGE="60", DB_POOL_MAX_SIZE="7")
    assert web.returncode == 0, web.stderr[-3000:]
    # The pool is what persists: Django refuses CONN_MAX_AGE with one, so it is 0 whatever was asked.
    assert json.loads(web.stdout.splitlines()[-1]) == {"pool": {"min_size": 7, "max_size": 7, "timeout": 10.0}, "max_age": 0}

    worker = _python(f"import json, django; django.setup(); {PRINT_DATABASE}", DB_CONN_MAX_AGE="60")
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert json.loads(worker.stdout.splitlines()[-1]) == {"pool": None, "max_age": 60}

    # An operator can turn it off for the web server too (e.g. behind PgBouncer).
    unpooled = _python(f"import json, cortex_site.asgi; {PRINT_DATABASE}", DB_POOL="0")
    assert unpooled.returncode == 0, unpooled.stderr[-3000:]
    assert json.loads(unpooled.stdout.splitlines()[-1])["pool"] is None


def test_a_pool_smaller_than_its_minimum_stops_start_up_with_a_sentence() -> None:
    result = _python("import django; django.setup()", DB_POOL="1", DB_POOL_MIN_SIZE="5", DB_POOL_MAX_SIZE="2")
    assert result.returncode != 0
    assert "DB_POOL_MAX_SIZE=2 must be at least DB_POOL_MIN_SIZE=5" in result.stderr


def test_the_web_server_imports_its_views_before_its_first_request() -> None:
    # Django would load the URLconf (every view) on the first request a process serves.
    web = _python("import sys, cortex_site.asgi; print('cortex_site.urls' in sys.modules, 'connectors.webhooks' in sys.modules)")
    assert web.returncode == 0, web.stderr[-3000:]
    assert web.stdout.splitlines()[-1] == "True True"

    # A process that only sets Django up (a worker, the CLI) does not pay for it.
    worker = _python("import sys, django; django.setup(); print('cortex_site.urls' in sys.modules)")
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert worker.stdout.splitlines()[-1] == "False"


def test_the_web_server_refuses_an_address_already_in_use_in_words() -> None:
    # Its sockets share their port (SO_REUSEPORT) between its own processes only: a port some other
    # server holds — or a second Cortex — is refused, not quietly split.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "cortex_site.web_server", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"127.0.0.1:{port} is already in use" in done.stderr


async def _empty_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


def test_a_web_process_freezes_what_it_built_to_start_once_it_listens() -> None:
    # A full collection walked every object Django and the MCP SDK made at start-up, ~0.2 s holding
    # the GIL, inside webhook bursts (docs/benchmarks.md): frozen, the collector leaves them alone.
    server = web_server._Server(uvicorn.Config(_empty_app, lifespan="on", log_level="warning"))

    async def serve_until_started(sock: socket.socket) -> int:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        frozen = gc.get_freeze_count()
        server.should_exit = True
        await serving
        return frozen

    gc.unfreeze()
    try:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            assert asyncio.run(serve_until_started(sock)) > 0
    finally:
        gc.unfreeze()  # this test process goes on collecting as it did


def test_without_so_reuseport_every_web_process_shares_one_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    # Platforms without SO_REUSEPORT still run several processes, on one socket as uvicorn --workers does.
    monkeypatch.delattr(socket, "SO_REUSEPORT")
    port = free_port()
    sockets = web_server.listening_sockets("127.0.0.1", port, 3)
    try:
        assert len(sockets) == 3 and len({id(sock) for sock in sockets}) == 1
        assert sockets[0].getsockname() == ("127.0.0.1", port)
    finally:
        sockets[0].close()


def test_each_web_process_gets_a_socket_of_its_own_on_the_one_port() -> None:
    port = free_port()
    sockets = web_server.listening_sockets("127.0.0.1", port, 3)
    try:
        assert len({sock.fileno() for sock in sockets}) == 3
        assert {sock.getsockname() for sock in sockets} == {("127.0.0.1", port)}
        assert all(sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


def test_a_web_process_starts_and_answers_with_the_database_and_redis_down(tmp_path: Path) -> None:
    # Its warm-up (pool filled, broker connected) waits a while and gives up; the process listens all
    # the same and says what is down, as it did before it warmed up (cortex_site/asgi.py).
    port = free_port()
    env = settings_env(
        DATABASE_URL=f"postgresql://nobody@127.0.0.1:{free_port()}/nothing",
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
    )
    log = tmp_path / "web.log"
    command = [sys.executable, "-m", "cortex_site.web_server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with log.open("wb") as output:
        server = subprocess.Popen(command, env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
                break
            except httpx.TransportError:
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert answer.status_code == 503
        checks = answer.json()["checks"]
        assert not checks["database"]["ok"] and not checks["broker"]["ok"]
        assert "web process starting cold" in log.read_text()
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_the_web_server_refuses_a_process_count_that_is_not_one_or_more(value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cortex_site.web_server", "--port", str(free_port()), "--workers", value],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "give the number of web processes (1 or more)" in done.stderr


@pytest.mark.django_db(transaction=True)
def test_warming_up_starts_every_request_thread_each_connecting_to_the_database_once() -> None:
    # The pool starts a thread only when a request finds none idle, and Django makes a thread's
    # database wrapper on its first query: the first answers of a burst paid both.
    from concurrent.futures import ThreadPoolExecutor

    from django.db.backends.signals import connection_created

    from cortex_site.asgi import _warm_threads

    connected: list[str] = []

    def record(**_: object) -> None:
        connected.append(threading.current_thread().name)

    connection_created.connect(record, weak=False)
    threads = ThreadPoolExecutor(max_workers=4, thread_name_prefix="warm-up-test")
    try:
        _warm_threads(threads, 4)
        started = {thread.name for thread in threading.enumerate() if thread.name.startswith("warm-up-test")}
        assert len(started) == 4
        assert sorted(connected) == sorted(started)
    finally:
        connection_created.disconnect(record)
        threads.shutdown()
