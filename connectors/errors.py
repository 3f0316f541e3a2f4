"""What a source can go wrong with, in the two kinds the framework treats differently."""

from __future__ import annotations


class SourceError(Exception):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class RetryableSourceError(SourceError):
    """A timeout, a 5xx or a 429: try again later (after `retry_after` seconds when the source said)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentSourceError(SourceError):
    """401/403, a revoked token, a missing channel or repository: the connector goes to `error` with
    this message (a sentence saying what to fix) and is not retried until someone changes it."""


class InvalidSignature(Exception):
    """A webhook delivery whose signature (or timestamp) does not verify: answered 401, never parsed."""

    def __init__(self, message: str = "The signature does not match.") -> None:
        self.message = message
        super().__init__(message)
