"""Run a function in a child process under an address-space limit, a CPU limit and a wall-clock deadline.

Used for parsing untrusted documents: whatever a crafted file makes the parser do, the cost is
capped and paid by a short-lived child, not by the web server or worker that asked.

Children come from multiprocessing's fork server: it is started once, single-threaded, with the
extraction module preloaded, so each child is a cheap fork of a small clean process (forking the
multi-threaded server itself could inherit locks held by other threads). The function and its
arguments must be importable and picklable without Django.
"""

from __future__ import annotations

import multiprocessing
import resource
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

# The parsers too: imported once in the fork server, not in every child.
_PRELOAD = ["memories.services.extraction", "lxml.etree", "pypdf"]
_lock = threading.Lock()
_context: Any = None


class LimitExceeded(Exception):
    """The child used more than it was allowed: `reason` is "memory", "time" or "crashed"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _forkserver() -> Any:
    global _context
    with _lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            # Instead of the default ['__main__']: re-importing the server's entry script in the fork
            # server is useless here, and for some entry points (pytest, uvicorn) it is not harmless.
            context.set_forkserver_preload(_PRELOAD)
            _context = context
        return _context


def _child(conn: Connection, memory_bytes: int, cpu_seconds: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # SIGXCPU at the soft limit ends the process (its default action), the hard limit a second later for sure.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    try:
        outcome: tuple[str, Any] = ("ok", fn(*args))
    except MemoryError:
        outcome = ("memory", None)
    except Exception as exc:  # noqa: BLE001 - sent to the parent, which re-raises it there: nothing is hidden
        outcome = ("error", exc)
    try:
        conn.send(outcome)
    except MemoryError:
        conn.send(("memory", None))
    conn.close()


def run_bounded(
    fn: Callable[..., Any], args: tuple[Any, ...], *, memory_bytes: int, cpu_seconds: int, wall_seconds: float
) -> Any:
    """`fn(*args)` in a child limited to `memory_bytes` of address space and `cpu_seconds` of CPU,
    answered within `wall_seconds`; re-raises what `fn` raised, or LimitExceeded."""
    context = _forkserver()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, memory_bytes, cpu_seconds, fn, args), daemon=True)
    process.start()
    sender.close()
    try:
        if not receiver.poll(wall_seconds):
            raise LimitExceeded("time")
        try:
            status, value = receiver.recv()
        except EOFError:
            # The child died without answering: the CPU limit's SIGXCPU, or a crash (a signal, the OOM killer).
            process.join(5)
            raise LimitExceeded("time" if process.exitcode == -signal.SIGXCPU else "crashed") from None
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join(5)
    if status == "memory":
        raise LimitExceeded("memory")
    if status == "error":
        raise value
    return value
