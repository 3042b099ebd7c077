"""Logging: one line per record whatever a client sent, written to stderr off the request thread."""

import contextvars
import logging
import logging.handlers
import queue
import re
import string
from urllib.parse import quote

ACCESS = "people_service.access"
QUEUE_SIZE = 10_000  # records waiting for stderr; beyond, they are dropped and counted
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


class DroppingQueueHandler(logging.handlers.QueueHandler):
    """Never blocks the request: when the queue is full a record is dropped and counted."""

    dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:  # the documented override
        try:
            if self.dropped:  # said in its place, once the queue has room again
                msg = f"{self.dropped} log lines were dropped: stderr did not keep up"
                self.queue.put_nowait(
                    logging.LogRecord("people_service", logging.WARNING, "", 0, msg, (), None)
                )
                self.dropped = 0
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


def operator_configured() -> bool:
    """Whether logging is set up already: handlers on the root, or on the people_service
    logger other than ours (a forked child has its parent's)."""
    package = logging.getLogger("people_service").handlers
    return bool(logging.getLogger().handlers) or any(
        not isinstance(handler, DroppingQueueHandler) for handler in package
    )


def take_over() -> logging.handlers.QueueListener | None:
    """Write the people_service logs to stderr through a queue and a listener thread, unless
    the operator gave the package handlers; the listener, to stop at exit (None: not taken)."""
    package = logging.getLogger("people_service")
    ours = [handler for handler in package.handlers if isinstance(handler, DroppingQueueHandler)]
    if len(ours) < len(package.handlers):
        return None
    for handler in ours:  # a forked child's copy of its parent's, whose listener is not here
        package.removeHandler(handler)
    handler = DroppingQueueHandler(queue.Queue(QUEUE_SIZE))
    handler.setFormatter(OneLineFormatter())
    listener = logging.handlers.QueueListener(handler.queue, logging.StreamHandler())
    listener.start()
    package.addHandler(handler)
    package.propagate = False
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)
    return listener
