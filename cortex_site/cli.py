"""The `cortex` console script: `cortex org create acme` is `manage.py cortex org create acme`;
`cortex hook prompt|stop` are the coding-agent hooks (cortex_site.agent_hooks), which need no database.

Both find a running `make run` through CORTEX_HOME (see cortex_site.running) when DATABASE_URL is
not set, and say so in one sentence when nothing runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def prepare() -> None:
    """Point Django at our settings and at the running services; exit 2 with one sentence if none."""
    from cortex_site.running import use_running_services

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")
    problem = use_running_services()
    if problem:
        print(f"cortex: {problem}", file=sys.stderr)
        sys.exit(2)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        # Coding-agent hooks run next to the agent and talk to Cortex over HTTP: no database needed.
        from cortex_site.agent_hooks import main as hook_main

        sys.exit(hook_main(args[1:]))
    prepare()
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(["cortex", "cortex", *args])
    except ImproperlyConfigured as exc:  # e.g. DATABASE_URL set by hand without SECRET_KEY: say so, no traceback
        print(f"cortex: {exc}", file=sys.stderr)
        sys.exit(2)
