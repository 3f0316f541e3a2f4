"""The operator CLI, one module per family of commands.

Each module exposes `add_parser(subparsers)`, registering its commands with a `handler`
default that receives (command, **options). Handlers print results with
`command.stdout.write` and raise CortexError (→ CommandError, non-zero exit) on bad input.
"""

from memories.cli import audit, conflicts, demo, import_export, reembed, tenancy

COMMANDS = [tenancy, demo, audit, import_export, reembed, conflicts]
