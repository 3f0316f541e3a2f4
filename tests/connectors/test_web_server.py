"""The web server as `make run` starts it (`runner.web_command()`: uvicorn with WEB_CONCURRENCY
processes, each drawing its database connections from a pool) answering signed GitHub deliveries
sent at once, on the test database and against the loopback GitHub stub.

Tasks run eagerly inside the web processes here (the test environment's CELERY_TASK_ALWAYS_EAGER),
so every accepted delivery is a memory by the time its answer arrives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from django.db import connection
from github_webhooks import github_fixture, github_signature
from support.stub_server import StubResponse, StubServer

from audit.models import AuditEvent
from audit.services import verify_chain
from connectors.models import Connector, Delivery
from cortex_site.embedded import free_port
from cortex_site.runner import ROOT, web_command
from memories.models import Memory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = "robvanderleek/create-issue-branch"
PROCESSES = 2
POOL_MAX = 3
DELIVERIES = 24


def _test_database_url() -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit((parts.scheme, parts.netloc, f"/{connection.settings_dict['NAME']}", parts.query, parts.fragment))


WEB_APPLICATION_NAME = "cortex-web-under-test"


def _web_backends() -> int:
    """The web server's connections to the test database (it names them: PGAPPNAME, read by libpq), not
    those of anything else the test session runs against it, such as a worker keeping its own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            [WEB_APPLICATION_NAME],
        )
        return int(cursor.fetchone()[0])


@pytest.fixture
def web_server_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The server's address and its supervising process (the web processes are its children)."""
    port = free_port()
    # web_command() reads where to listen and how many processes from the environment, as `make run` does.
    monkeypatch.setenv("HOST", "127.0.0.1")
    monkeypatch.setenv("PORT", str(port))
    monkeypatch.setenv("WEB_CONCURRENCY", str(PROCESSES))
    command = web_command()
    assert command[command.index("--workers") + 1] == str(PROCESSES)
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "DJANGO_SETTINGS_MODULE": "cortex_site.settings",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DB_POOL_MAX_SIZE": str(POOL_MAX),
        "PGAPPNAME": WEB_APPLICATION_NAME,
    }
    env.pop("DB_POOL", None)  # the web server's own default: cortex_site/asgi.py turns the pool on
    log = tmp_path / "web.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the web server did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.2)
        yield url, process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def web_server(web_server_process: tuple[str, subprocess.Popen[bytes]]) -> str:
    return web_server_process[0]


def _github_answers(stub_server: StubServer) -> None:
    stub_server.route("GET", rf"/repos/{REPO}/pulls/\d+/files", StubResponse(json=[]))
    # The recorded PR reverts #111, which Cortex never stored: GitHub answers it as missing.
    stub_server.route("GET", f"/repos/{REPO}/pulls/111", StubResponse(status=404, json={"message": "Not Found"}))


def _delivery_headers(body: bytes, delivery_id: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": delivery_id,
        "X-Hub-Signature-256": github_signature(body),
    }


def test_several_web_processes_answer_a_burst_of_deliveries_once_each_on_pooled_connections(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer, web_server: str
) -> None:
    _github_answers(stub_server)
    connector = make_github(acme["exec"])
    template = github_fixture("pull_request__closed_merged.json")
    bodies = [template.replace(b'"number": 117', f'"number": {1000 + i}'.encode()) for i in range(DELIVERIES)]
    assert len(set(bodies)) == DELIVERIES  # each its own pull request
    delivery_ids = [str(uuid.uuid4()) for _ in bodies]

    def send(index: int) -> int:
        headers = _delivery_headers(bodies[index], delivery_ids[index])
        with httpx.Client(timeout=60) as client:
            return client.post(
                f"{web_server}/api/webhooks/github/{connector.pk}", content=bodies[index], headers=headers
            ).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(send, range(DELIVERIES)))
        # GitHub's retries of the first eight: answered, and nothing new stored.
        retried = list(pool.map(send, range(8)))

    assert statuses == [200] * DELIVERIES
    assert retried == [200] * 8
    deliveries = Delivery.objects.filter(connector=connector)
    assert sorted(deliveries.values_list("delivery_id", flat=True)) == sorted(delivery_ids)
    assert set(deliveries.values_list("status", flat=True)) == {Delivery.Status.PROCESSED}
    assert Memory.objects.filter(organization_id=connector.organization_id, source="GitHub").count() == DELIVERIES
    # Each delivery's accept event, appended by its worker after the answer, once; the retries add none.
    accepted = AuditEvent.objects.filter(organization=acme["org"], action="webhook.accept")
    assert sorted(accepted.values_list("target_id", flat=True)) == sorted(
        str(pk) for pk in deliveries.values_list("pk", flat=True)
    )
    assert not AuditEvent.objects.filter(organization=acme["org"], action="webhook.duplicate").exists()
    assert verify_chain(acme["org"]).ok
    # The connections outlive the requests that used them (a plain connection is closed when its
    # request ends) and stay within the pools' bound.
    assert 1 <= _web_backends() <= PROCESSES * POOL_MAX


def _chunked(body: bytes, size: int = 16 * 1024) -> Iterator[bytes]:
    """The body as an iterator: httpx sends it chunked, with no Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_a_delivery_sent_chunked_is_read_whole_and_one_over_the_limit_is_refused_unread(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer, web_server: str
) -> None:
    # Django is served as WSGI there, which reads only a declared length: the layer in front
    # (cortex_site/body_limits.py) declares it for a chunked body within the limit.
    _github_answers(stub_server)
    connector = make_github(acme["exec"])
    body = github_fixture("pull_request__closed_merged.json")
    address = f"{web_server}/api/webhooks/github/{connector.pk}"

    answer = httpx.post(address, content=_chunked(body), headers=_delivery_headers(body, str(uuid.uuid4())), timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.request.headers.get("transfer-encoding") == "chunked"
    assert Delivery.objects.get(connector=connector).status == Delivery.Status.PROCESSED
    assert Memory.objects.filter(organization_id=connector.organization_id, source="GitHub").count() == 1

    too_large = b'{"padding": "' + b"x" * (3 * 1024 * 1024) + b'"}'
    refused = httpx.post(
        address, content=_chunked(too_large), headers=_delivery_headers(too_large, str(uuid.uuid4())), timeout=60
    )
    assert refused.status_code == 413 and refused.json()["error_code"] == "PAYLOAD_TOO_LARGE"
    assert Delivery.objects.filter(connector=connector).count() == 1
    rejected = AuditEvent.objects.get(organization=acme["org"], action="webhook.reject")
    assert rejected.details["error_code"] == "PAYLOAD_TOO_LARGE"


def _tcp_sockets(port: int) -> dict[int, str]:
    """The machine's TCP sockets whose local port is `port`: inode → state (0A listening, 01 established)."""
    sockets = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                sockets[int(fields[9])] = fields[3]
    return sockets


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def _web_processes(server: subprocess.Popen[bytes], port: int) -> dict[int, set[int]]:
    """The server's children that listen on the port: pid → the listening sockets each holds."""
    listening = {inode for inode, state in _tcp_sockets(port).items() if state == "0A"}
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    held = {int(pid): _socket_inodes(int(pid)) & listening for pid in children}
    return {pid: inodes for pid, inodes in held.items() if inodes}


def _listening_web_processes(server: subprocess.Popen[bytes], port: int, *, gone: int | None = None) -> dict[int, set[int]]:
    """`_web_processes` once every one of them listens (the first answers while another may still be
    importing Django) and, if given, the process `gone` is not among them."""
    deadline = time.monotonic() + 90
    while True:
        processes = _web_processes(server, port)
        if len(processes) == PROCESSES and gone not in processes:
            return processes
        assert time.monotonic() < deadline, f"{PROCESSES} web processes expected, listening: {processes}"
        time.sleep(0.2)


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def test_a_web_process_has_filled_its_database_pool_before_it_listens(
    web_server_process: tuple[str, subprocess.Popen[bytes]],
) -> None:
    # A process that took its first requests cold made them wait while it opened its connections
    # (docs/benchmarks.md): each now opens them in its startup, before its socket listens.
    url, server = web_server_process
    processes = _listening_web_processes(server, _port(url))
    assert len(processes) == PROCESSES
    # Only the fixture's /healthz has been answered, by one of them; every pool is full all the same.
    assert _web_backends() == PROCESSES * POOL_MAX


def test_each_web_process_listens_on_a_socket_of_its_own_and_new_connections_reach_every_one(
    web_server_process: tuple[str, subprocess.Popen[bytes]],
) -> None:
    # uvicorn's own --workers shares one socket, and one process could take a burst's connections
    # while the other idled (docs/benchmarks.md); with SO_REUSEPORT the kernel spreads them.
    url, server = web_server_process
    port = _port(url)
    processes = _listening_web_processes(server, port)
    assert all(len(inodes) == 1 for inodes in processes.values())
    assert len(set().union(*processes.values())) == PROCESSES

    clients = [httpx.Client(timeout=30) for _ in range(20)]
    try:
        assert {client.get(f"{url}/healthz").status_code for client in clients} == {200}
        established = {inode for inode, state in _tcp_sockets(port).items() if state == "01"}
        served = {pid: len(_socket_inodes(pid) & established) for pid in processes}
        # 20 connections spread by a hash of their addresses: all on one process has odds of 1 in 2^19.
        assert sum(served.values()) == 20
        assert all(count > 0 for count in served.values()), served
    finally:
        for client in clients:
            client.close()


def test_a_web_process_that_dies_is_replaced_on_the_same_socket(
    web_server_process: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, server = web_server_process
    port = _port(url)
    before = _listening_web_processes(server, port)
    victim = next(iter(before))
    os.kill(victim, signal.SIGKILL)

    after = _listening_web_processes(server, port, gone=victim)
    # The socket outlived its process: the replacement listens on it, and no socket was added or lost.
    assert set().union(*after.values()) == set().union(*before.values())
    for _ in range(20):  # new connections, whichever socket the kernel hands each to
        with httpx.Client(timeout=60) as client:
            assert client.get(f"{url}/healthz").status_code == 200


def test_sighup_replaces_every_web_process_without_refusing_a_request(
    web_server_process: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, server = web_server_process
    port = _port(url)
    before = _listening_web_processes(server, port)
    server.send_signal(signal.SIGHUP)

    statuses: list[int | str] = []
    deadline = time.monotonic() + 180
    while True:
        try:
            with httpx.Client(timeout=60) as client:  # a new connection each time: any socket, any process
                statuses.append(client.get(f"{url}/healthz").status_code)
        except httpx.HTTPError as exc:
            statuses.append(type(exc).__name__)
        after = _web_processes(server, port)
        if len(after) == PROCESSES and not set(after) & set(before):
            break
        assert time.monotonic() < deadline, f"not every web process was replaced: {before} → {after}"
        time.sleep(0.05)
    assert set(statuses) == {200}, statuses
    # The same sockets, now each held by a new process.
    assert set().union(*after.values()) == set().union(*before.values())
