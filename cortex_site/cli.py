"""The `cortex` console script: `cortex org create acme` is `manage.py cortex org create acme`;
`cortex hook prompt|stop` are the coding-agent hooks (cortex_site.agent_hooks), which need no database.

Both find a running `make run` through CORTEX_HOME (see cortex_site.running) when DATABASE_URL is
not set, and say so in one sentence when nothing runs — after the usage, when that is what was asked
(`cortex`, `cortex --help`, `cortex org -h`): usage needs no database.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

HELP = frozenset({"-h", "--help"})
# What the settings need to load when nothing runs and only usage is asked for: addresses nothing
# answers at (a missing socket directory, a closed loopback port) — argparse prints and exits before
# anything would connect.
_USAGE_ONLY = {
    "DATABASE_URL": "postgresql://cortex@/cortex?host=/nonexistent/cortex-not-running",
    "REDIS_URL": "redis://127.0.0.1:9/0",
    "SECRET_KEY": "usage-only: nothing is signed",
}


def prepare(*, usage_only: bool = False) -> str | None:
    """Point Django at our settings and at the running services. When none run: exit 2 with one
    sentence, or — when only usage is asked for (`usage_only`) — return that sentence, to print after it."""
    from cortex_site.running import use_running_services

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")
    problem = use_running_services()
    if problem and usage_only:
        os.environ.update(_USAGE_ONLY)
        return problem
    if problem:
        print(f"cortex: {problem}", file=sys.stderr)
        sys.exit(2)
    return None


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        # Coding-agent hooks run next to the agent and talk to Cortex over HTTP: no database needed.
        from cortex_site.agent_hooks import main as hook_main

        sys.exit(hook_main(args[1:]))
    not_running = prepare(usage_only=not args or bool(HELP & set(args)))
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(["cortex", "cortex", *args])
    except ImproperlyConfigured as exc:  # e.g. DATABASE_URL set by hand without SECRET_KEY: say so, no traceback
        print(f"cortex: {exc}", file=sys.stderr)
        sys.exit(2)
    finally:
        if not_running:  # usage was printed (argparse exits); the commands themselves need `make run`
            print(f"cortex: {not_running}", file=sys.stderr)
