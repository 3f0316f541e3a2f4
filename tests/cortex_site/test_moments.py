"""parse_moment: every date or date-time a person, agent or file gives Cortex, read one way (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cortex_site.moments import parse_moment


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2025-01-15", datetime(2025, 1, 15, tzinfo=UTC)),
        ("2025-01-15T09:30:00", datetime(2025, 1, 15, 9, 30, tzinfo=UTC)),
        ("2025-01-15T09:30:00Z", datetime(2025, 1, 15, 9, 30, tzinfo=UTC)),
        ("2025-01-15T09:30:00+02:00", datetime(2025, 1, 15, 7, 30, tzinfo=UTC)),
        # An offset PostgreSQL would refuse (beyond ±15:59) is converted, not passed on.
        ("2000-01-01T00:00:00+16:00", datetime(1999, 12, 31, 8, 0, tzinfo=UTC)),
    ],
)
def test_dates_and_times_become_utc(text: str, moment: datetime) -> None:
    parsed = parse_moment(text)
    assert parsed == moment and parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "text", ["last tuesday", "", "2000-13-01T00:00:00", "2000-02-30", "0001-01-01T00:00:00+16:00", "9999-12-31T23:00:00-05:00"]
)
def test_anything_else_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_moment(text)
