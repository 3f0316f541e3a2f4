"""A streaming read replica of the embedded PostgreSQL, from the same binaries.

`pg_basebackup -R` copies the running primary and writes `standby.signal` and `primary_conninfo`,
so the copy starts as a hot standby that streams the primary's WAL over its Unix socket. It is
what the replica tests and benchmarks run against: real replication, real lag, a real outage.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cortex_site.embedded import PG_USER, EmbeddedPostgres, _private, secure_home


class EmbeddedReplica(EmbeddedPostgres):
    """A hot standby of `primary`, with its own data directory and socket."""

    def __init__(self, data_dir: Path, *, primary: EmbeddedPostgres, durable: bool = False) -> None:
        super().__init__(data_dir, durable=durable)
        if self.socket_dir == primary.socket_dir:
            raise ValueError("the replica needs a data directory whose parent differs from the primary's")
        self.primary = primary

    def url_for(self, database: str) -> str:
        return f"postgresql://{PG_USER}:{self.password()}@/{database}?host={self.socket_dir}"

    def password(self) -> str:
        # A copy of the primary's cluster: the same superuser, the same password.
        return self.primary.password()

    def _passfile(self) -> Path:
        """The primary's password in a libpq password file only the server's user can read: how
        pg_basebackup and then the standby's WAL receiver (primary_conninfo) log in, without the
        password on a command line."""
        passfile = self.home / "primary.pgpass"
        fd = os.open(passfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"*:*:*:{PG_USER}:{self.primary.password()}\n")
        _private(passfile, owner=self._owner(), mode=0o600)
        return passfile

    def start(self) -> str:
        if not (self.data_dir / "PG_VERSION").exists():
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            self.data_dir.mkdir(mode=0o700, exist_ok=True)
            self._ensure_system_user()
            # The server's user must reach the passfile and the data directory before the copy starts.
            secure_home(self.home)
            _private(self.data_dir, owner=self._owner())
            primary = f"host={self.primary.socket_dir} user={PG_USER} passfile={self._passfile()}"
            self._run(
                "pg_basebackup",
                "--no-password",  # never wait for a prompt: the passfile is the only way in
                "--dbname",
                primary,
                "-D",
                str(self.data_dir),
                "--write-recovery-conf",
                "--wal-method=stream",
                "--checkpoint=fast",
                "--no-sync",
                timeout=300,
            )
        return super().start()

    def _sql(self, statement: str) -> Any:
        with self._connect() as conn:
            row = conn.execute(statement).fetchone()
        return row[0] if row else None

    def pause_replay(self) -> None:
        """Keep receiving WAL but stop applying it: the replica falls behind as the primary writes."""
        self._sql("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self._sql("SELECT pg_wal_replay_resume()")

    def kill(self) -> None:
        """Stop at once, without a shutdown checkpoint (as a crashed or unplugged machine would)."""
        if self.is_running():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "-t", "60", "stop", timeout=90)

    def caught_up_with(self, lsn: str) -> bool:
        return self._sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn") is True
