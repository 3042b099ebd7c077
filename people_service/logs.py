"""Logging: lines written by a thread from a bounded queue, with client text made harmless."""

from __future__ import annotations

import atexit
import copy
import logging
import logging.handlers
import os
import queue
import re
import string
import sys
import threading
from urllib.parse import quote

# Control characters (C0, DEL, C1), Unicode's line and paragraph separators and its
# bidirectional controls: in a logged value they could end a line or disguise its text.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
QUEUE_SIZE = 10_000
_plain = logging.Formatter()
ACCESS = "people_service.access"

# A logged URL keeps printable ASCII but the space; anything else is percent-encoded, so that
# the URL stays one field of its line (and a "?" in the path is not taken for the query's).
# Longer URLs are cut to MAX_URL characters.
_URL_SAFE = "".join(char for char in string.punctuation if char not in "%?")
MAX_URL = 2000
_WORD = string.ascii_letters + string.digits + "_.-"  # what credentials are made of
# A word (from its start: the look-behind keeps this linear) with either prefix in it.
_SUSPECT = re.compile(r"(?<![\w.-])[\w.-]*?(?:ps_|eyJ)[\w.-]*", re.ASCII)
# What the service issues as credentials: API keys (ps_ and 43 URL-safe characters) and JWTs
# (three base64url parts, the first a JSON object: "eyJ"). Wherever a client puts one in a URL
# (they are only read from headers), the access log writes [redacted] instead.
_KEY = re.compile(r"ps_[\w-]{20}", re.ASCII)
# Query parameters whose name says they hold a secret (password=, api_key=, ...).
_SECRET_NAME = re.compile("pass|secret|token|key", re.I)
_REDACTED = "[redacted]"


def logged_url(path: str, query: bytes = b"") -> str:
    """The URL of a request as its access line shows it: one field, at most MAX_URL characters
    (cut between words, so no credential is cut in two), without the credentials a client put
    in it. Linear in the input."""
    url = quote(path[: MAX_URL + 1], safe=_URL_SAFE)  # the path is decoded: "%" is encoded
    if query:
        url += "?" + quote(query[: MAX_URL + 1], safe=_URL_SAFE + "%?")  # as it was sent
    if len(url) > MAX_URL:
        url = url[:MAX_URL].rstrip(_WORD) + "[cut]"
    return redact(url)


def redact(url: str) -> str:
    """`url` with the credentials and secret parameter values a client put in it hidden."""
    if "ps_" in url or "eyJ" in url:
        url = _SUSPECT.sub(_credential, url)
    if "?" in url and _SECRET_NAME.search(url):
        parts = re.split(r"([?&])", url)  # the path, then separators and parameters by turns
        for index in range(2, len(parts), 2):
            name, equals, _ = parts[index].partition("=")
            if equals and _SECRET_NAME.search(name):
                parts[index] = name + "=" + _REDACTED
        url = "".join(parts)
    return url


def _credential(match: re.Match) -> str:
    word = match.group()
    start = word.find("eyJ")
    jwt = start >= 0 and word.count(".", start) >= 2
    return _REDACTED if jwt or _KEY.search(word) else word


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
