"""Logging: one line per record whatever a client sent, to stderr through a bounded queue."""

import atexit
import contextlib
import logging
import logging.handlers
import os
import queue
import re
import string
import threading
from urllib.parse import quote

# Control characters, line separators and bidirectional controls: they could end or disguise a line
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
QUEUE_SIZE = 10_000
ACCESS = "people_service.access"

# A logged URL keeps printable ASCII but the space (and "?" of the path): it stays one field
_URL_SAFE = "".join(char for char in string.punctuation if char not in "%?")
MAX_URL = 2000
_WORD = string.ascii_letters + string.digits + "_.-"  # what credentials are made of
# Words that may be API keys (ps_...) or JWTs (eyJ...), matched from their start (linear time)
_SUSPECT = re.compile(r"(?<![\w.-])[\w.-]*?(?:ps_|eyJ)[\w.-]*", re.ASCII)
_KEY = re.compile(r"ps_[\w-]{20}", re.ASCII)
_SECRET_NAME = re.compile("pass|secret|token|key", re.I)
_REDACTED = "[redacted]"


def logged_url(path: str, query: bytes = b"") -> str:
    """The URL as the access line shows it: one field, at most MAX_URL long, no credentials."""
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
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda match: ascii(match.group())[1:-1], text)


class OneLineFormatter(logging.Formatter):
    """The message escaped, a traceback indented below it; access lines are the message alone."""

    def __init__(self):
        fmt = "%(levelname)s %(name)s [%(request_id)s]: %(message)s"
        super().__init__(fmt, defaults={"request_id": "-"})

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape(record.getMessage())
        text = record.message if record.name == ACCESS else self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += "\n" + "\n".join("    " + escape(line) for line in record.exc_text.splitlines())
        return text


class DroppingQueueHandler(logging.handlers.QueueHandler):
    """Drops records while the queue is full (stderr stalled), and says how many later."""

    dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            if self.dropped:
                msg = f"{self.dropped} log lines were dropped: stderr did not keep up"
                warning = logging.LogRecord(
                    "people_service", logging.WARNING, "", 0, msg, None, None
                )
                self.queue.put_nowait(self.prepare(warning))
                self.dropped = 0
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


_handler: DroppingQueueHandler | None = None
_listener: logging.handlers.QueueListener | None = None
_lock = threading.Lock()


def operator_configured() -> bool:
    """Whether logging is set up already (handlers on the root or the people_service logger)."""
    return bool(logging.getLogger().handlers or logging.getLogger("people_service").handlers)


def take_over() -> None:
    """Write the people_service logs to stderr only, once per process (unless it has handlers)."""
    global _handler
    if _handler is not None:
        return
    with _lock:
        package = logging.getLogger("people_service")
        if package.handlers:
            return
        from .web.lifecycle import stamp_request_id

        _handler = DroppingQueueHandler(queue.Queue(QUEUE_SIZE))
        _handler.setFormatter(OneLineFormatter())
        _handler.addFilter(stamp_request_id)
        output = logging.StreamHandler()  # sys.stderr
        _start(output)
        atexit.register(_stop)
        # a forked worker (gunicorn) has no listener thread: it starts its own
        os.register_at_fork(after_in_child=lambda: _start(output))
        package.addHandler(_handler)
        package.propagate = False
        if package.level == logging.NOTSET:
            package.setLevel(logging.INFO)


def _start(output: logging.Handler) -> None:
    global _listener
    _handler.queue = queue.Queue(QUEUE_SIZE)  # a fresh one: a fork copies locks as they were
    _listener = logging.handlers.QueueListener(_handler.queue, output)
    _listener.start()


def _stop() -> None:  # what is queued is written, unless stderr is stalled
    with contextlib.suppress(queue.Full):
        _listener.stop()
