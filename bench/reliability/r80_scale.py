"""Scale: how far behind a streaming read replica falls, and how fast it catches up.

Starts a throwaway embedded PostgreSQL (durable, as `make run` runs it) and a hot standby made
from it with the same binaries (cortex_site/embedded_replica.py: pg_basebackup + standby.signal +
primary_conninfo), then measures:

- apply lag: for each of N single-row commits on the primary, the time from sending the commit
  until the replica has replayed its WAL (the commit itself included, measured alone too);
- catch-up: with replay paused, M rows are committed; then replay resumes, and the time until the
  replica holds all of them is measured (how fast a replica past DATABASE_REPLICA_MAX_LAG_SECONDS
  comes back).

    .venv/bin/python bench/reliability/r80_scale.py [--commits 500] [--backlog 20000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "reliability"))

from report import write_section  # noqa: E402

from cortex_site.embedded import EmbeddedPostgres  # noqa: E402
from cortex_site.embedded_replica import EmbeddedReplica  # noqa: E402

PAYLOAD = "x" * 1000  # about one memory chunk's text


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def _value(conn: psycopg.Connection, sql: str, params: list[object] | None = None) -> object:
    row = conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def _wait_replayed(replica: psycopg.Connection, lsn: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if _value(replica, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn]):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the replica did not catch up")
        time.sleep(0.0005)


def measure(commits: int, backlog: int) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="cortex-scale-"))
    home.chmod(0o755)
    primary = EmbeddedPostgres(home / "primary" / "pg", durable=True)
    replica = EmbeddedReplica(home / "replica" / "pg", primary=primary, durable=True)
    try:
        primary_url = primary.start()
        with psycopg.connect(primary_url, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS scale_bench")
            conn.execute("CREATE TABLE scale_bench (id bigserial PRIMARY KEY, body text NOT NULL)")
        replica.start()
        with (
            psycopg.connect(primary_url, autocommit=True) as writer,
            psycopg.connect(replica.url_for("cortex"), autocommit=True) as reader,
        ):
            lags, commits_ms = [], []
            for _ in range(commits):
                started = time.perf_counter()
                writer.execute("INSERT INTO scale_bench (body) VALUES (%s)", [PAYLOAD])
                committed = time.perf_counter()
                # The WAL written so far, the commit record included.
                lsn = str(_value(writer, "SELECT pg_current_wal_lsn()::text"))
                _wait_replayed(reader, lsn)
                lags.append((time.perf_counter() - started) * 1000)
                commits_ms.append((committed - started) * 1000)

            reader.execute("SELECT pg_wal_replay_pause()")
            started = time.perf_counter()
            for start in range(0, backlog, 500):
                with writer.transaction():
                    writer.execute(
                        "INSERT INTO scale_bench (body) SELECT %s FROM generate_series(1, %s)",
                        [PAYLOAD, min(500, backlog - start)],
                    )
            write_seconds = time.perf_counter() - started
            lsn = str(_value(writer, "SELECT pg_current_wal_lsn()::text"))
            replayed = _value(reader, "SELECT pg_last_wal_replay_lsn()::text")
            behind = _value(writer, "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", [lsn, replayed])
            reader.execute("SELECT pg_wal_replay_resume()")
            started = time.perf_counter()
            _wait_replayed(reader, lsn)
            catch_up = time.perf_counter() - started
        return {
            "commits": commits,
            "lag_p50": _percentile(lags, 0.50),
            "lag_p95": _percentile(lags, 0.95),
            "lag_p99": _percentile(lags, 0.99),
            "lag_max": max(lags),
            "commit_p50": _percentile(commits_ms, 0.50),
            "commit_p95": _percentile(commits_ms, 0.95),
            "backlog": backlog,
            "write_seconds": write_seconds,
            "behind_mb": float(str(behind)) / 1e6,
            "catch_up_seconds": catch_up,
        }
    finally:
        replica.kill()
        primary.stop()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--backlog", type=int, default=20000)
    args = parser.parse_args(argv)
    r = measure(args.commits, args.backlog)
    lag = f"p50 **{r['lag_p50']:.2f} ms**, p95 **{r['lag_p95']:.2f} ms**, p99 {r['lag_p99']:.2f} ms, max {r['lag_max']:.2f} ms"
    backlog = f"{r['backlog']:,} rows written in {r['write_seconds']:.1f} s, the replica {r['behind_mb']:.1f} MB of WAL behind"
    body = f"""
A durable embedded PostgreSQL 18 and a hot standby of it from the same binaries
(`pg_basebackup --write-recovery-conf`), streaming over the local socket; 1 KB rows.

| measure | result |
| --- | --- |
| a single-row commit, from sending it until the replica has replayed it ({r["commits"]} commits, one at a time) | {lag} |
| the same commit on the primary alone | p50 {r["commit_p50"]:.2f} ms, p95 {r["commit_p95"]:.2f} ms |
| backlog while replay was paused | {backlog} |
| catch-up once replay resumed | **{r["catch_up_seconds"]:.2f} s** for the whole backlog |

What it means for `DATABASE_REPLICA_MAX_LAG_SECONDS` (default 5 s) and
`DATABASE_REPLICA_PIN_SECONDS` (10 s): on one host a healthy replica applies a commit in well under
the bound, so reads fall back to the primary only when the replica is really behind (paused,
overloaded, or across a slow link); a replica that was behind comes back within the catch-up time
above. Replicas on other hosts add the network round trip to the apply lag; measure it there.
"""
    write_section("scale", "Scale: read-replica lag and catch-up", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
