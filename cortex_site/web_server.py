"""The production web server: uvicorn on several processes, each with a listening socket of its own.

`uvicorn --workers N` shares one listening socket between its processes. The first process to wake
accepts every connection waiting (asyncio's accept loop) and keeps each for its keep-alive life:
under a webhook burst one process held 17 of 20 connections and queued their answers on its own
core while the other process idled (docs/benchmarks.md). Here each process listens on a socket of
its own, all bound to the same address with SO_REUSEPORT, and the kernel spreads new connections
over them. The sockets are bound by this supervising process and outlive a web process that dies:
connections that reach its socket wait there for its replacement.

    python -m cortex_site.web_server --host 127.0.0.1 --port 8000 --workers 2

`runner.web_command()` builds this command line for `make run` and the container image; the
reloading development server (`make dev`) is plain uvicorn, one process. `kill -HUP` the
supervising process to replace every web process (new code) without refusing a request.
"""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import signal
import socket
import sys
import time

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Process

APPLICATION = "cortex_site.asgi:application"
# How long a replacement may take to be ready on SIGHUP: it imports Django and fills its pool, on
# cores the running processes are busy with.
RESTART_READY_SECONDS = 120

logger = logging.getLogger("uvicorn.error")


class AddressInUseError(OSError):
    """Something already listens on the address: another Cortex, or another program."""


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _bound(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a recent server's TIME_WAIT is no obstacle
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUseError(exc.errno, f"{host}:{port} is already in use (is Cortex running?)") from None
        raise
    sock.set_inheritable(True)
    return sock


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """A socket per web process, bound to host:port with SO_REUSEPORT and not yet listening (each
    process listens on its own once it is ready, so none is handed connections while it imports).

    SO_REUSEPORT would let these join sockets another process of ours already has on the port,
    and the two servers would split its traffic without a word: a plain bind first refuses a port
    in use, as uvicorn's own bind did. Where the platform has no SO_REUSEPORT that plain socket is
    the one every process shares, as under `uvicorn --workers`.
    """
    probe = _bound(host, port, reuse_port=False)
    if not hasattr(socket, "SO_REUSEPORT"):
        return [probe] * count
    probe.close()
    return [_bound(host, port, reuse_port=True) for _ in range(count)]


class _Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        # What the process built to start (Django, every view, the MCP SDK: ~230,000 objects the
        # collector tracks) lives until it exits; frozen, the collector stops walking it. A full
        # collection walked it all — 124 ms on a quiet core, 210–224 ms of GIL under a webhook
        # burst, one in each process during the burst (docs/benchmarks.md).
        gc.collect()
        gc.freeze()


class WebProcess(Process):
    """uvicorn's supervised process (health-checked by its parent), serving with `_Server`."""

    @property
    def server(self) -> uvicorn.Server:
        if self._server is None:
            self._server = _Server(config=self.config)
        return self._server


class WebServer:
    """One uvicorn process per socket, each replaced when it dies or stops answering uvicorn's health
    check; SIGHUP replaces them one by one (new code, no request refused: a replacement is ready
    before the process it replaces stops); SIGINT or SIGTERM stops them all (each finishing the
    requests it has)."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket]) -> None:
        self.config = config
        self.sockets = sockets
        self.processes: list[WebProcess] = []
        self.signals: list[int] = []  # a signal handler only records; the loop below acts

    def _start(self, sock: socket.socket) -> WebProcess:
        process = WebProcess(self.config, [sock])
        process.start()
        return process

    @property
    def stopping(self) -> bool:
        return signal.SIGINT in self.signals or signal.SIGTERM in self.signals

    def run(self) -> int:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda signum, _frame: self.signals.append(signum))
        self.processes = [self._start(sock) for sock in self.sockets]
        code = 0
        while not self.stopping and not code:
            time.sleep(0.5)
            if signal.SIGHUP in self.signals:
                self.signals.remove(signal.SIGHUP)
                self._replace_all()
            code = self._replace_the_dead()
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.join()
        return code

    def _replace_all(self) -> None:
        logger.info("Received SIGHUP: replacing the web processes one by one.")
        for index, old in enumerate(self.processes):
            if self.stopping:
                return
            new = self._start(self.sockets[index])
            if not new.wait_until_ready(RESTART_READY_SECONDS):
                new.kill()
                new.join()
                logger.error("Web process [%s] was not ready in time; keeping [%s] and the rest.", new.pid, old.pid)
                return
            old.terminate()
            old.join()
            self.processes[index] = new

    def _replace_the_dead(self) -> int:
        for index, process in enumerate(self.processes):
            if self.stopping or process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()  # dead, or alive but not answering: hung
            process.join()
            if process.exitcode == STARTUP_FAILURE:
                # It failed before serving (the application does not import, say): so would its replacement.
                logger.error("Web process [%s] failed to start; stopping.", process.pid)
                return STARTUP_FAILURE
            logger.warning("Web process [%s] died (exit %s); starting another.", process.pid, process.exitcode)
            self.processes[index] = self._start(self.sockets[index])
        return 0


def _count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: give the number of web processes (1 or more)")
    return int(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve Cortex on several processes, a listening socket each.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=_count, default=1, help="web processes (WEB_CONCURRENCY in make run)")
    args = parser.parse_args(argv)
    config = uvicorn.Config(
        APPLICATION,
        host=args.host,
        port=args.port,
        workers=args.workers,
        # Client addresses are taken from X-Forwarded-For by Cortex itself, and only from the proxies
        # in CORTEX_TRUSTED_PROXIES (audit.middleware); uvicorn's default would believe any loopback client.
        proxy_headers=False,
        server_header=False,
    )
    try:
        sockets = listening_sockets(args.host, args.port, args.workers)
    except AddressInUseError as exc:
        logger.error("%s", exc.strerror)
        return 1
    return WebServer(config, sockets).run()


if __name__ == "__main__":
    sys.exit(main())
