"""How a worker process writes its log: text lines, or JSON lines (``hailq worker --json``).

Lines about one message carry its ``queue``, ``message_id`` and ``attempt`` as
fields of the JSON object (``extra=about(message)``), so a log shipper can
filter by them; ``time`` is ISO 8601 with the zone's offset.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime
from typing import Any

MESSAGE_FIELDS = ("queue", "message_id", "attempt")


def about(message: Any) -> dict[str, Any]:
    """The ``extra`` of a log call about ``message``: its queue, id and attempt."""
    return {"queue": message.queue, "message_id": message.id, "attempt": message.attempt}


def iso_time(created: float) -> str:
    """``created`` (epoch seconds) as local ISO 8601 time with milliseconds and offset."""
    return datetime.fromtimestamp(created).astimezone().isoformat(timespec="milliseconds")


class JsonLines(logging.Formatter):
    """One JSON object a line, for log shippers: time, level, logger, pid, message, and
    queue, message_id and attempt on lines about one message."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process or os.getpid(),
            "message": record.getMessage(),
        }
        for name in MESSAGE_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class TextLines(logging.Formatter):
    """``2026-06-01T12:00:00.123+02:00 [pid] LEVEL logger: message``."""

    def __init__(self, pid_in_text: bool) -> None:
        pid = " [%(process)d]" if pid_in_text else ""
        super().__init__(f"%(asctime)s{pid} %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord,
                   datefmt: str | None = None) -> str:
        return iso_time(record.created)


def configure(level: str, *, json_lines: bool, pid_in_text: bool = False) -> None:
    """Send hailq's and the handlers' log records to stderr at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if json_lines else TextLines(pid_in_text))
    logging.basicConfig(level=level, handlers=[handler], force=True)
