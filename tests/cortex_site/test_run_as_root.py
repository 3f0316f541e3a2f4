"""`make run` as root: web, worker and beat run as the unprivileged service user when it can run Cortex
(cortex_site/runner.py: app_user), and the runner says why when it cannot. Switching users needs root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cortex_site.embedded import SERVICE_USER, _run_as
from cortex_site.runner import ROOT, _unreachable, app_user

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching to the service user needs root")


def test_not_root_nothing_is_switched_and_nothing_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        # CI and this machine run as root: ask as an ordinary user would (the effective uid is the
        # operating system's answer, the one thing outside Cortex here).
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert app_user() == (None, "")


@as_root
def test_a_root_only_directory_on_the_way_is_named() -> None:
    # Not under pytest's tmp_path: its base directories are 0700 themselves.
    base = Path(tempfile.mkdtemp(prefix="cortex-run-as-", dir="/tmp"))
    try:
        base.chmod(0o755)
        closed = base / "closed"
        (closed / "inner").mkdir(parents=True)
        target = closed / "inner" / "python"
        target.write_text("")
        closed.chmod(0o700)

        assert _unreachable(target, SERVICE_USER) == closed

        closed.chmod(0o711)  # search only: passing through is all the user needs
        assert _unreachable(target, SERVICE_USER) is None
    finally:
        shutil.rmtree(base, ignore_errors=True)


@as_root
def test_the_decision_matches_what_the_service_user_can_really_run() -> None:
    user, why = app_user()
    try:
        runs = (
            subprocess.run(
                [sys.executable, "-c", "import cortex_site"], cwd=ROOT, capture_output=True, check=False, **_run_as(SERVICE_USER)
            ).returncode
            == 0
        )
    except PermissionError:  # the interpreter itself cannot be executed by that user
        runs = False
    if runs:
        assert (user, why) == (SERVICE_USER, "")
    else:
        # It stays root, and says which directory keeps the service user out.
        assert user is None
        assert SERVICE_USER in why and "stay root" in why
        blocked = _unreachable(Path(os.path.realpath(sys.executable)), SERVICE_USER)
        assert blocked is not None and str(blocked) in why
