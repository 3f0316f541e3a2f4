"""What every benchmark driver shares: running one measured phase in a child process.

Each phase runs in its own interpreter (its own database, a fresh Django) and reports back with one
line `RESULT <json>` on stdout; everything else it prints is passed through as progress.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_phase(script: Path, env: dict[str, str], *args: str, flag: str = "--phase") -> dict[str, Any]:
    """Run `script <flag> *args` with `env` and return the JSON of its RESULT line."""
    command = [sys.executable, str(script), flag, *args]
    print(f"\n== {' '.join(args)}", flush=True)
    result: dict[str, Any] = {}
    with subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
            else:
                print(line, end="", flush=True)
    if child.returncode != 0:
        raise SystemExit(f"phase {' '.join(args)} failed (exit {child.returncode})")
    return result


def purge_task_queues() -> int:
    """Drop every task left in the broker's queues (a bench's Redis outlives its database): a worker
    would otherwise spend the measured minutes on the last run's tasks, for rows that no longer
    exist. Returns how many were dropped. Needs Django set up."""
    from cortex_site.celery import app

    return int(app.control.purge() or 0)


def load_module(name: str, path: Path) -> ModuleType:
    """A module loaded from its file under `name` (a file whose own name is taken, or another version of one)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
