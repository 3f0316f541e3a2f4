"""`python manage.py cortex <command>` — the operator CLI. See memories/cli/ for each command."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cortex_site.errors import CortexError
from memories.cli import COMMANDS


class Command(BaseCommand):
    help = "Cortex operator commands: org, user, scope, grant, token, demo, ..."

    def add_arguments(self, parser: CommandParser) -> None:
        program, _, name = parser.prog.rpartition(" ")
        if program == name:
            # The `cortex` console script (cortex_site/cli.py) runs this command as `cortex cortex …`;
            # its usage lines and errors name it once, as the operator typed it.
            parser.prog = name
        sub = parser.add_subparsers(dest="cortex_command", metavar="command", required=True, parser_class=CommandParser)
        for command in COMMANDS:
            command.add_parser(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        handler = options.pop("handler")
        try:
            handler(self, **options)
        except CortexError as exc:
            raise CommandError(exc.message) from exc
