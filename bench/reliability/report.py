"""Shared by the `make reliability` steps: each step writes its own section of docs/reliability.md.

A step is a script `bench/reliability/rNN_<name>.py` (run in NN order by `make reliability`, or
alone). It measures, then calls `write_section(name, title, body)`: the text between
`<!-- reliability:<name> -->` and `<!-- /reliability:<name> -->` is replaced, so one step can be
re-run without touching the others' figures. Sections that do not exist yet are appended.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "reliability.md"


def machine_line() -> str:
    """One line naming the machine and its load, printed under every section's figures."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), platform.processor())
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    when = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"Measured {when} on {os.cpu_count()} × {cpu}, Python {platform.python_version()}, load average {load}."


def write_section(name: str, title: str, body: str, *, command: str | None = None) -> None:
    """Replace (or append) the section `name` of docs/reliability.md with `title`, `body` and the machine line."""
    command = command or "make reliability RELIABILITY=" + Path(sys.argv[0]).name
    text = REPORT.read_text() if REPORT.exists() else "# Reliability\n"
    start, end = f"<!-- reliability:{name} -->", f"<!-- /reliability:{name} -->"
    section = f"{start}\n## {title}\n\n```\n{command}\n```\n\n{body.strip()}\n\n{machine_line()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    found = pattern.search(text)
    text = pattern.sub(lambda _match: section, text) if found else text.rstrip() + "\n\n" + section + "\n"
    REPORT.write_text(text)
    print(f"docs/reliability.md: section {name!r} written")
