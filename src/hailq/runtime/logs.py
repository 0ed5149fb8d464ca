"""How a worker process writes its log: text lines, or JSON lines (``hailq worker --json``)."""

from __future__ import annotations

import json
import logging
import os
import sys


class JsonLines(logging.Formatter):
    """One JSON object a line, for log shippers: time, level, logger, pid, message."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process or os.getpid(),
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str, *, json_lines: bool, pid_in_text: bool = False) -> None:
    """Send hailq's and the handlers' log records to stderr at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(JsonLines())
    else:
        pid = f" [{os.getpid()}]" if pid_in_text else ""
        handler.setFormatter(logging.Formatter(
            f"%(asctime)s{pid} %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
