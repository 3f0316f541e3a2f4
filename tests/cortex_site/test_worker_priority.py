"""A Celery worker lowers its CPU priority (CORTEX_WORKER_NICE, default 10) as it starts, so on the
cores it shares with the web server the answers come first (cortex_site/celery.py).

Each case runs in a fresh interpreter: a process cannot raise its priority back, and the worker's
start-up signal (celeryd_init) is sent there as Celery's worker sends it, to the handlers connected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.settings_env import settings_env

from cortex_site.celery import session_autogroup_nice

ROOT = Path(__file__).resolve().parents[2]

# What the worker's main process does before it starts its pool, then what it runs at.
START_WORKER = (
    "import json, os, django; django.setup();"
    "from celery.signals import celeryd_init; from cortex_site.celery import session_autogroup_nice;"
    "celeryd_init.send(sender='cortex@test', instance=None, conf=None, options={});"
    "print(json.dumps({'nice': os.getpriority(os.PRIO_PROCESS, 0), 'autogroup': session_autogroup_nice(), "
    "'leader': os.getsid(0) == os.getpid()}))"
)


def _start_worker(
    env: dict[str, str] | None = None, *, own_session: bool = True, preexec: Callable[[], object] | None = None
) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", START_WORKER],
        env=settings_env(**(env or {})),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=own_session,
        preexec_fn=preexec,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outcome: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return outcome


def test_a_worker_in_a_session_of_its_own_runs_at_nice_10_and_so_does_its_session() -> None:
    started = _start_worker()
    assert started["leader"] is True
    assert started["nice"] == 10
    # With the kernel's autogroup scheduling, sessions share the CPU first: a nice value only weighs
    # within its session, so the worker's session (make run gives it one) is lowered too.
    if started["autogroup"] is not None:
        assert started["autogroup"] == 10


def test_the_nice_value_is_a_setting_and_0_leaves_the_worker_as_it_started() -> None:
    assert _start_worker({"CORTEX_WORKER_NICE": "15"})["nice"] == 15
    unchanged = _start_worker({"CORTEX_WORKER_NICE": "0"})
    assert unchanged["nice"] == 0
    if unchanged["autogroup"] is not None:
        assert unchanged["autogroup"] == 0


def test_a_worker_started_lower_stays_there() -> None:
    # Lowering is all it does: raising priority back would need privileges, and whoever started it at 17 meant it.
    assert _start_worker(preexec=lambda: os.nice(17))["nice"] == 17


def test_a_worker_sharing_its_callers_session_leaves_that_session_alone() -> None:
    # Started from a terminal (no session of its own), lowering the session would lower the terminal's
    # every process: only the worker's own priority changes.
    before = session_autogroup_nice()
    started = _start_worker(own_session=False)
    assert started["leader"] is False
    assert started["nice"] == 10
    assert started["autogroup"] == before
    assert session_autogroup_nice() == before


@pytest.mark.parametrize(
    ("printed", "nice"),
    [("/autogroup-39556 nice 5\n", 5), ("", None)],  # a session in the root group: the kernel prints nothing
)
def test_the_session_autogroup_is_read_as_the_kernel_prints_it(
    printed: str, nice: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc_file = tmp_path / "autogroup"
    proc_file.write_text(printed)
    monkeypatch.setattr("cortex_site.celery.AUTOGROUP", proc_file)
    assert session_autogroup_nice() == nice
    monkeypatch.setattr("cortex_site.celery.AUTOGROUP", tmp_path / "absent")
    assert session_autogroup_nice() is None


@pytest.mark.parametrize("value", ["20", "-1", "low"])
def test_a_nice_value_outside_0_to_19_stops_start_up_in_words(value: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=settings_env(CORTEX_WORKER_NICE=value),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "CORTEX_WORKER_NICE" in result.stderr
