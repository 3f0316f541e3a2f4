"""The README's test command and CI's stay the same command."""

import os
from pathlib import Path

import pytest

from cortex_site import runner
from cortex_site.embedded import EmbeddedServiceError

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    ci_commands = [
        line.strip()
        for line in ci.splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert ci_commands == ["make test"]
    head = readme.split("\n## ", 1)[0]
    assert "make run" in head
    assert "make test" in head


def test_makefile_test_target_runs_the_whole_suite() -> None:
    makefile = (ROOT / "Makefile").read_text()
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "cortex_site.runner test" in test_recipe
    assert "-m" not in test_recipe.split("cortex_site.runner test", 1)[1]  # no marker filter: slow tests run too


def test_the_test_command_runs_serially_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_TEST_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert runner.pytest_worker_args([]) == []


def test_auto_takes_one_process_per_cpu_as_far_as_redis_has_databases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_TEST_WORKERS", "auto")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert runner.pytest_worker_args([]) == ["-n", "2", "--dist", "loadgroup"]
    # More CPUs than Redis has databases for (three per worker): capped.
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(32)))
    assert runner.pytest_worker_args([]) == ["-n", str(runner.MAX_TEST_WORKERS), "--dist", "loadgroup"]
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert runner.pytest_worker_args([]) == []


@pytest.mark.parametrize(("value", "expected"), [("0", []), ("1", []), ("3", ["-n", "3", "--dist", "loadgroup"])])
def test_cortex_test_workers_chooses_the_number_of_processes(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: list[str]
) -> None:
    monkeypatch.setenv("CORTEX_TEST_WORKERS", value)
    assert runner.pytest_worker_args(["tests/memories"]) == expected


@pytest.mark.parametrize("value", ["two", "-1", "Auto", str(runner.MAX_TEST_WORKERS + 1)])
def test_a_bad_cortex_test_workers_is_refused_with_what_to_give(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CORTEX_TEST_WORKERS", value)
    with pytest.raises(EmbeddedServiceError, match="CORTEX_TEST_WORKERS"):
        runner.pytest_worker_args([])


@pytest.mark.parametrize("args", [["-n", "0"], ["-n4"], ["--numprocesses=3"], ["--dist=load"], ["-p", "no:xdist"], ["--pdb"]])
def test_options_given_to_pytest_win_over_the_default(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.setenv("CORTEX_TEST_WORKERS", "2")
    assert runner.pytest_worker_args(["tests/memories", *args]) == []


def test_the_leak_package_and_the_replica_tests_are_each_one_unit_of_work_under_xdist() -> None:
    from conftest import xdist_group_of

    leaks = {
        xdist_group_of("tests/hardening/leaks/test_leaks.py::test_rest_surfaces[memory-list]"),
        xdist_group_of("tests/hardening/leaks/test_fail_closed.py::test_nobody_reads_anything"),
    }
    assert leaks == {"leaks"}
    assert xdist_group_of("tests/hardening/scale/test_replica.py::test_lag") == "replica"
    alone = "tests/hardening/scale/test_workers.py::test_tasks_are_routed_by_kind_of_work"
    assert xdist_group_of(alone) == alone
