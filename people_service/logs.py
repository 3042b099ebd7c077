"""Logging: one line per record whatever a client sent, written to stderr off the request thread."""

import atexit
import collections
import contextvars
import logging
import logging.handlers
import os
import re
import string
import threading
import time
from urllib.parse import quote

ACCESS = "people_service.access"
QUEUE_SIZE = 10_000  # records waiting for stderr; beyond, they are dropped and counted
POLL = 0.05  # seconds the writer sleeps when nothing waits: no wake-up per line
# The request id of the running request (set by the web layer's first hook), on every record
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

# Control characters, line separators and bidirectional controls: they could end or disguise a line
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
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
    """The message escaped, a traceback indented below it; access lines are the message alone.
    QueueHandler formats in the thread that logs, so the record gets its request id."""

    def __init__(self):
        super().__init__("%(levelname)s %(name)s [%(request_id)s]: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.request_id = request_id.get()
        record.message = escape(record.getMessage())
        text = record.message if record.name == ACCESS else self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += "\n" + "\n".join("    " + escape(line) for line in record.exc_text.splitlines())
        return text


class Batches:
    """The queue between QueueHandler and QueueListener: putting never wakes the writer (it
    looks every POLL seconds and then writes all that waits); when full, records are dropped
    and counted, and the writer says how many."""

    def __init__(self, size: int = QUEUE_SIZE):
        self.items: collections.deque = collections.deque()  # append and popleft are atomic
        self.size = size
        self.dropped = 0

    def put_nowait(self, record) -> None:
        if record is not None and len(self.items) >= self.size:  # None: the listener's stop
            self.dropped += 1
        else:
            self.items.append(record)

    def get(self, block: bool = True):  # QueueListener, the one reader, always blocks
        while not self.items:
            if self.dropped:  # said once what waited is written: in the order it happened
                count, self.dropped = self.dropped, 0
                msg = f"{count} log lines were dropped: stderr did not keep up"
                return logging.LogRecord("people_service", logging.WARNING, "", 0, msg, (), None)
            time.sleep(POLL)
        return self.items.popleft()


_handler: logging.handlers.QueueHandler | None = None
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
        if _handler is not None or package.handlers:
            return
        handler = logging.handlers.QueueHandler(Batches())
        handler.setFormatter(OneLineFormatter())
        output = logging.StreamHandler()  # sys.stderr
        _handler = handler
        _start(output)
        atexit.register(lambda: _handler.listener.stop())  # what is queued is written
        # a forked worker (gunicorn) has no writer thread, and must not write the parent's lines
        os.register_at_fork(after_in_child=lambda: _start(output))
        package.addHandler(handler)
        package.propagate = False
        if package.level == logging.NOTSET:
            package.setLevel(logging.INFO)


def _start(output: logging.Handler) -> None:
    _handler.queue = Batches()
    _handler.listener = logging.handlers.QueueListener(_handler.queue, output)
    _handler.listener.start()
