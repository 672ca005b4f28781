"""The server's log output: text lines or JSON lines on stderr (``[logging] format``).

Owns: ``configure_logging(config)``, called once by ``app.run``, and the JSON-lines formatter:
one object per record with ``time`` (ISO 8601, UTC, ms), ``level``, ``logger``, ``message``
(arguments applied) and ``exception`` (the formatted traceback) when there is one.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

from rill.server.config import LoggingConfig

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLinesFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(config: LoggingConfig) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLinesFormatter() if config.format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=config.level.upper(), handlers=[handler])
