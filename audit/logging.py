import logging

from audit.context import current_request_id


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every log record so a log line can be matched to an API error."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id() or "-"
        return True
