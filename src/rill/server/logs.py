"""The server's log output: text lines or JSON lines on stderr (``[logging] format``).

Owns: ``configure_logging(config)``, called once by ``app.run``, the JSON-lines formatter:
one object per record with ``time`` (ISO 8601, UTC, ms), ``level``, ``logger``, ``message``
(arguments applied) and ``exception`` (the formatted traceback) when there is one, and
``Refusals``: the rule for lines a client can repeat at will (a refused request, a frame above
the limit): one line per client address and cause, then at most one per ``window`` seconds
carrying the count of those not logged, so a client's retry loop (reconnecting or not) cannot
flood the log.
"""

from __future__ import annotations

import json
import logging
import sys
import time
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
    # the etcd client's library logs every request at INFO (a keepalive every 0.7 s): its
    # warnings only; the cluster layer logs what matters
    for library in ("httpx", "httpcore"):
        logging.getLogger(library).setLevel(max(logging.WARNING, logging.getLogger().level))


class Refusals:
    """Logs a refusal once per (client host, cause), then at most once per ``window`` seconds
    with how many were not logged; at most ``max_kept`` (host, cause) pairs are remembered
    (the oldest forgotten first). ``clock``: seconds, monotonic."""

    def __init__(self, window: float = 60.0, max_kept: int = 10_000,
                 clock=time.monotonic) -> None:
        self.window, self.max_kept, self.clock = window, max_kept, clock
        self._seen: dict[tuple[str, str], list] = {}  # (host, cause) -> [logged at, not logged]

    def log(self, logger: logging.Logger, address: str, cause: str, message: str, *args,
            level: int = logging.INFO) -> bool:
        """Log ``message % args`` unless this host had a line for ``cause`` within the window;
        whether it was logged. ``address``: the client's "host:port"."""
        host = address.rpartition(":")[0] or address
        key = (host, cause)
        now = self.clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window:
            seen[1] += 1
            return False
        if seen is not None:
            del self._seen[key]  # re-inserted last: the most recent
            if seen[1]:
                message += " (%d more like it from %s in the last %.0f s, not logged)"
                args = (*args, seen[1], host, now - seen[0])
        elif len(self._seen) >= self.max_kept:
            del self._seen[next(iter(self._seen))]
        self._seen[key] = [now, 0]
        logger.log(level, message, *args)
        return True
