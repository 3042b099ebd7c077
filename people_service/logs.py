"""Logging: lines written by a thread from a bounded queue, with client text made harmless."""

from __future__ import annotations

import atexit
import copy
import logging
import logging.handlers
import os
import queue
import re
import sys
import threading

# Control characters (C0, DEL, C1) and Unicode's line and paragraph separators: any of them
# in a logged value could end a line and start a forged one.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
QUEUE_SIZE = 10_000
_plain = logging.Formatter()
ACCESS = "people_service.access"


# What the service issues as credentials: API keys (ps_ and 43 URL-safe characters) and JWTs
# (three base64url parts, the first a JSON object: "eyJ"). Wherever a client puts one in a URL
# (they are only read from headers), the access log writes it as [redacted].
_CREDENTIAL = re.compile(r"ps_[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")
# The value of a query parameter whose name says it holds a secret (password=, api_key=, ...).
_SECRET_PARAMETER = re.compile(r"([?&][^=&?]*(?:pass|secret|token|key)[^=&]*=)[^&]*", re.I)
_REDACTED = "[redacted]"


def redact(path: str) -> str:
    """A logged path and query string without the credentials a client put in them."""
    if "ps_" in path or "eyJ" in path:
        path = _CREDENTIAL.sub(_REDACTED, path)
    lowered = path.lower()
    if "?" in path and (
        "pass" in lowered or "secret" in lowered or "token" in lowered or "key" in lowered
    ):
        path = _SECRET_PARAMETER.sub(r"\1" + _REDACTED, path)
    return path


def escape(text: str) -> str:
    """`text` with control characters as visible escapes (`\\n`, `\\x1b`), on one line."""
    return _CONTROL.sub(_escaped, text) if _CONTROL.search(text) else text


def _escaped(match: re.Match) -> str:
    char = match.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    return named or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


class OneLineFormatter(logging.Formatter):
    """Formats a record as one line: the message escaped; a traceback's lines indented below
    it, so nothing a client sent can start a line of its own."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape(record.getMessage())
        text = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += "\n" + "\n".join("    " + escape(line) for line in record.exc_text.splitlines())
        return text


class DroppingQueueHandler(logging.handlers.QueueHandler):
    """A QueueHandler that never blocks a request: when the queue is full (stderr stalled),
    the line is dropped and counted, and the count is logged once lines flow again."""

    def __init__(self, log_queue: queue.Queue):
        super().__init__(log_queue)
        self.dropped = 0
        self._lock = threading.Lock()

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # the message is merged now (its arguments may change later); a traceback is kept
        # apart from it, so that the formatter can indent it
        record = copy.copy(record)
        record.msg = record.message = record.getMessage()
        record.args = None
        if record.exc_info:
            record.exc_text = _plain.formatException(record.exc_info)
            record.exc_info = None
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def take_dropped(self) -> int:
        with self._lock:
            dropped, self.dropped = self.dropped, 0
        return dropped


class ReportingListener(logging.handlers.QueueListener):
    """A QueueListener that says how many lines were dropped while the queue was full."""

    def __init__(self, log_queue, handler, producer: DroppingQueueHandler):
        super().__init__(log_queue, handler, respect_handler_level=True)
        self.producer = producer

    def handle(self, record: logging.LogRecord) -> None:
        dropped = self.producer.take_dropped()
        if dropped:
            warning = logging.makeLogRecord(
                {
                    "name": "people_service",
                    "levelno": logging.WARNING,
                    "levelname": "WARNING",
                    "msg": "%d log lines were dropped: stderr did not keep up",
                    "args": (dropped,),
                }
            )
            super().handle(warning)
        super().handle(record)


_installed: DroppingQueueHandler | None = None
_listener: ReportingListener | None = None
_install_lock = threading.Lock()


def install(stream=None, level: int = logging.INFO) -> None:
    """Send the people_service logs through a bounded queue to `stream` (stderr), once per
    process: access lines as they are, other lines with level, logger and request id."""
    global _installed
    with _install_lock:
        if _installed is not None:
            return
        from .web.lifecycle import RequestIdFilter  # the request id of the line, if any

        output = logging.StreamHandler(stream) if stream else _Stderr()
        output.setFormatter(_Formatters())
        producer = DroppingQueueHandler(queue.Queue(QUEUE_SIZE))
        producer.addFilter(RequestIdFilter())
        _start(producer, output)
        atexit.register(_stop)  # writes what is queued before the process ends
        # a forked worker (gunicorn) has no listener thread: it starts its own
        os.register_at_fork(after_in_child=lambda: _start(producer, output))
        package = logging.getLogger("people_service")
        package.addHandler(producer)
        if package.level == logging.NOTSET:
            package.setLevel(level)
        _installed = producer


def _start(producer: DroppingQueueHandler, output: logging.Handler) -> None:
    global _listener
    producer.queue = queue.Queue(QUEUE_SIZE)  # a fresh one: a fork copies locks as they were
    _listener = ReportingListener(producer.queue, output, producer)
    _listener.start()


def _stop() -> None:
    if _listener is not None:
        _listener.stop()


def operator_configured() -> bool:
    """Whether whoever runs the app set up logging (handlers on the root or our logger)."""
    return bool(logging.getLogger().handlers or logging.getLogger("people_service").handlers)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a line is written (a test or a daemonizing
    server may have replaced the one there was at start-up)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


class _Formatters(logging.Formatter):
    """Access lines as they are; everything else with level, logger and request id."""

    def __init__(self):
        super().__init__()
        self.access = OneLineFormatter("%(message)s")
        self.other = OneLineFormatter("%(levelname)s %(name)s [%(request_id)s]: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_id"):
            record.request_id = "-"
        return (self.access if record.name == ACCESS else self.other).format(record)
