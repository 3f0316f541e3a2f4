"""Moments people, agents and files give Cortex: an ISO 8601 date or date-time, read one way everywhere."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils.dateparse import parse_date, parse_datetime


def parse_moment(text: str) -> datetime:
    """`text` (an ISO 8601 date or date-time) as an aware UTC datetime: a date is its midnight UTC,
    a time without an offset is UTC. Raises ValueError for anything else — including a well-formed
    date that does not exist (month 13) and a moment that has no UTC time (year 1 at +16:00).

    Converted to UTC here because PostgreSQL refuses offsets beyond ±15:59 that Python accepts: sent
    as given, such a moment would fail the query it filters, not the request that gave it."""
    value = parse_datetime(text)  # raises ValueError itself for a well-formed impossible moment
    if value is None:
        day = parse_date(text)
        if day is None:
            raise ValueError(f"not an ISO 8601 date or date-time: {text!r}")
        value = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"outside the dates a UTC time can name: {text!r}") from None
