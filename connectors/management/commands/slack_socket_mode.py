"""`python manage.py slack_socket_mode` — receive Slack events over Socket Mode (worker side).

Keeps one connection per active Slack connector whose config has ``mode: "socket"``, reconnecting
when Slack asks or the link drops; each event is stored as a delivery and processed by the
connectors worker like a webhook's. Stops cleanly on SIGINT/SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from connectors.sources.slack.socket_mode import SocketModeSupervisor


class Command(BaseCommand):
    help = "Receive Slack events over Socket Mode for every socket-mode Slack connector."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--refresh", type=float, default=30.0, help="seconds between re-reading the connectors (default 30)")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        self.stdout.write("slack socket mode: running; Ctrl-C to stop")
        SocketModeSupervisor(refresh_seconds=options["refresh"]).run(stop)
        self.stdout.write("slack socket mode: stopped")
