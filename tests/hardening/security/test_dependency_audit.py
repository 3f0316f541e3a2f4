"""The offline dependency audit of `make reliability` (bench/reliability/r80_security.py): installed versions
matched against OSV advisories as the PyPA advisory database writes them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def security() -> ModuleType:
    spec = importlib.util.spec_from_file_location("r80_security", ROOT / "bench" / "reliability" / "r80_security.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("r80_security", module)
    spec.loader.exec_module(module)
    return module


def _advisory(directory: Path, name: str, text: str) -> None:
    path = directory / "vulns" / name.split("-")[0].lower() / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


RANGES = """id: {id}
affected:
- package:
    ecosystem: {ecosystem}
    name: {package}
  ranges:
  - type: ECOSYSTEM
    events:
{events}
"""


def _ranged(directory: Path, id: str, package: str, events: str, ecosystem: str = "PyPI", extra: str = "") -> None:
    _advisory(directory, id, extra + RANGES.format(id=id, package=package, ecosystem=ecosystem, events=events))


def test_ranges_and_version_lists_match_as_osv_defines_them(security: ModuleType, tmp_path: Path) -> None:
    # Two branches fixed separately: 4.2.x fixed in 4.2.15, 5.0.x in 5.0.8.
    two_branches = '    - introduced: "4.2"\n    - fixed: 4.2.15\n    - introduced: "5.0"\n    - fixed: 5.0.8\n'
    _ranged(tmp_path, "PYSEC-1", "Django", two_branches)
    _ranged(tmp_path, "PYSEC-2", "some_package", '    - introduced: "0"\n    - last_affected: 1.4.0\n')
    _ranged(tmp_path, "PYSEC-3", "unfixed", '    - introduced: "2.0"\n')
    _advisory(
        tmp_path,
        "GHSA-listed",
        "id: GHSA-listed\naliases: [CVE-1]\naffected:\n- package: {ecosystem: PyPI, name: listed}\n  versions: [1.0.0, 1.1.0]\n",
    )
    cases = {
        "django": ("5.0.7", True),
        "some-package": ("1.4.0", True),  # the advisory's some_package, PEP 503-normalised
        "unfixed": ("2.3", True),
        "listed": ("1.1", True),  # 1.1 == 1.1.0
    }
    found, files = security.match_advisories({name: version for name, (version, _) in cases.items()}, tmp_path)
    assert files == 4
    assert {(a.id, a.package, a.installed, a.fixed) for a in found} == {
        ("PYSEC-1", "django", "5.0.7", "5.0.8"),
        ("PYSEC-2", "some-package", "1.4.0", ""),
        ("PYSEC-3", "unfixed", "2.3", ""),
        ("GHSA-listed", "listed", "1.1", ""),
    }
    assert next(a for a in found if a.id == "GHSA-listed").aliases == ("CVE-1",)


@pytest.mark.parametrize(
    ("installed", "affected"),
    [("4.1.9", False), ("4.2", True), ("4.2.14", True), ("4.2.15", False), ("4.9", False), ("5.0.0", True), ("5.0.8", False)],
)
def test_the_last_event_at_or_below_the_version_decides(security: ModuleType, installed: str, affected: bool) -> None:
    events = [{"introduced": "5.0"}, {"fixed": "5.0.8"}, {"introduced": "4.2"}, {"fixed": "4.2.15"}]  # unsorted, as OSV allows
    assert security._in_range(security.Version(installed), events) is affected


def test_fixed_outside_the_range_last_affected_and_withdrawn_or_other_ecosystems_do_not_match(
    security: ModuleType, tmp_path: Path
) -> None:
    _ranged(tmp_path, "PYSEC-fixed", "django", '    - introduced: "0"\n    - fixed: 5.2.1\n')
    _ranged(tmp_path, "PYSEC-last", "celery", '    - introduced: "0"\n    - last_affected: 5.6.9\n')
    _ranged(tmp_path, "PYSEC-gone", "redis", '    - introduced: "0"\n', extra="withdrawn: 2024-01-01T00:00:00Z\n")
    _ranged(tmp_path, "GHSA-npm", "redis", '    - introduced: "0"\n', ecosystem="npm")
    found, _ = security.match_advisories({"django": "5.2.19", "celery": "5.7.0", "redis": "8.1.0"}, tmp_path)
    assert found == []
