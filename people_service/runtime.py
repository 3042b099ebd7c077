"""Everything one process opens for an app, made on first use in that process and closed once.

No other module keeps per-process state: a forked child (gunicorn --preload, serve --workers)
makes its own Runtime and never uses or closes what its parent opened.
"""

import atexit
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections import Counter
from contextlib import contextmanager

from . import logs
from .config import ConfigError
from .credentials import load_secret
from .errors import Busy, RateLimited
from .store import iso, open_store, redacted

log = logging.getLogger("people_service")
# A password check costs ~0.2 s of CPU at the default work factor: one at a time per core
CHECKS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
CHECK_WAIT = 5.0  # seconds a login waits for a free check, then 503
OTHER_SERVERS_THREADS = 8  # request threads assumed when the server does not say (gunicorn.conf)
LOCK = fcntl.LOCK_EX | fcntl.LOCK_NB
_made: dict[int, list["Runtime"]] = {}  # by pid; a child never closes its parent's
_names: dict[int, set[str]] = {}  # by pid: the metrics' operation labels (web/metrics.py)
_logs: dict[int, object] = {}  # by pid: the log listener (None: the operator's handlers write)


class LoginGate:
    """Password checks: one at a time per client address (another is refused at once), as
    many at once as cores, and at most `waiting` logins queued for one (beyond: 503 at once)."""

    def __init__(self, waiting: int, checks: int = 0, wait: float = CHECK_WAIT, path=None):
        self.lock = threading.Lock()
        self.checks = threading.BoundedSemaphore(checks or CHECKS)
        self.addresses: set[str] = set()
        self.waiting, self.room, self.wait = 0, waiting, wait
        # the processes of one machine (serve --workers, gunicorn) share a lock file, an
        # address a byte of it: POSIX record locks are per process, `addresses` per thread
        self.fd = None
        if path is not None:
            try:
                self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                log.warning("logins are rationed per process: %s", exc)

    def _byte(self, address: str, operation: int) -> bool:
        if self.fd is None:
            return True
        slot = int.from_bytes(hashlib.sha256(address.encode()).digest()[:4]) >> 1
        try:
            fcntl.lockf(self.fd, operation, 1, slot)
        except OSError:  # another process checks a login of this address
            return False
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases this process's locks
            self.fd = None

    @contextmanager
    def turn(self, address: str):
        """Hold a password check for `address`; RateLimited or Busy without waiting."""
        with self.lock:
            if address in self.addresses or not self._byte(address, LOCK):
                raise RateLimited("A login from this address is being checked; retry in a second.")
            if not self.checks.acquire(blocking=False):
                if self.waiting >= self.room:
                    raise Busy("Other logins are being checked; retry in a second.")
                self.waiting += 1
                queued = True
            else:
                queued = False
            self.addresses.add(address)
        try:
            if queued:
                got = self.checks.acquire(timeout=self.wait)
                with self.lock:
                    self.waiting -= 1
                if not got:
                    raise Busy("Other logins are being checked; retry in a second.")
            try:
                yield
            finally:
                self.checks.release()
        finally:
            with self.lock:
                self.addresses.discard(address)
                self._byte(address, fcntl.LOCK_UN)


class UsageTracker:
    """Request counts per caller, written every `interval` seconds while there are any (SPEC
    §3: no database write per request), and at close."""

    def __init__(self, store, interval: float = 5.0):
        self.store, self.interval = store, interval
        self.counts: Counter = Counter()  # (kind, id) -> requests not yet written
        self.last: dict = {}  # (kind, id) -> time of the last of them
        self.lock = threading.Lock()  # guards counts and last
        self.flushing = threading.Lock()  # a flush and an exact read never interleave
        self.pending, self.stopping = threading.Event(), False
        self.thread = threading.Thread(target=self._run, name="usage-flush", daemon=True)
        self.thread.start()

    def hit(self, caller) -> None:
        """Count one request of `caller` (anything with .kind and .id)."""
        ident = (caller.kind, caller.id)
        with self.lock:
            self.counts[ident] += 1
            self.last[ident] = time.time()  # formatted when written: this runs on every request
        self.pending.set()

    def _run(self) -> None:
        while self.pending.wait() and not self.stopping:  # asleep while nothing is counted
            time.sleep(self.interval)
            self.pending.clear()
            self.flush()

    def flush(self) -> None:
        """Write the pending counts; on failure they are kept for the next flush."""
        with self.flushing:
            with self.lock:
                counts, last, self.counts, self.last = self.counts, self.last, Counter(), {}
            if not counts:
                return
            try:
                self.store.add_usage({ident: (n, iso(last[ident])) for ident, n in counts.items()})
            except Exception as exc:  # a busy database is expected under load: one line
                log.warning("could not flush usage counts; will retry: %s", exc)
                with self.lock:
                    self.counts.update(counts)
                    self.last = {**last, **self.last}
                self.pending.set()

    def exact(self, kind: str, ident: int) -> tuple[int, str | None]:
        """Stored plus pending request count, and the last use."""
        with self.flushing:
            stored = self.store.usage(kind, ident) or {"request_count": 0, "last_used": None}
            with self.lock:
                count, stamp = self.counts[kind, ident], self.last.get((kind, ident))
        last = max(stored["last_used"] or "", iso(stamp) if stamp else "") or None
        return stored["request_count"] + count, last

    def stop(self) -> None:
        """Stop the flushing thread and write what is pending."""
        self.stopping = True
        self.pending.set()
        self.flush()


class Runtime:
    """This process's store, secret, usage counts, login gate, streams and webhook worker."""

    def __init__(self, config: dict, secret: str | None = None, counters=None):
        # imported here: `serve --workers` points prometheus-client at its directory first
        from . import delivery, feed

        self.config, self.pid, self.counters = config, os.getpid(), counters
        self.store = open_store(config["DATABASE"])
        try:
            self.secret = prepare(config, self.store, secret)
        except ConfigError:  # the operator's to fix; the next request tries again
            self.store.close()
            raise
        threads = config.get("SERVER_THREADS") or OTHER_SERVERS_THREADS
        self.usage = UsageTracker(self.store, config["USAGE_FLUSH_SECONDS"])
        self.logins = LoginGate(max(1, threads // 4), path=login_locks(config["DATABASE"]))
        self.streams = feed.Streams(config["EVENT_STREAMS"] or max(1, threads // 2))
        if config.get("TAKE_LOGS"):
            take_logs()
        self.deliverer = delivery.Deliverer(config, self.store)
        self.deliverer.start()
        self.closed = False

    def committed(self) -> None:
        """After a request: events it committed wake the webhook worker and the streams."""
        from . import events

        if events.committed(self.store):
            self.deliverer.wake()
            self.streams.notify()

    def close(self) -> None:
        """End the streams, stop delivering, write the usage counts, close the store."""
        if self.closed or self.pid != os.getpid():
            return
        self.closed = True
        self.streams.end()
        self.deliverer.close(wait=2)
        self.usage.stop()
        self.logins.close()
        self.store.close()
        if self.counters is not None:
            self.counters()


def login_locks(database: str) -> str | None:
    """The file whose bytes the login gates of one machine's processes lock (None: per process)."""
    from .store.counters import PREFIX, default_uri

    try:
        return default_uri(database).removeprefix(PREFIX) + ".logins"
    except OSError as exc:
        log.warning("logins are rationed per process: %s", exc)
        return None


def prepare(config: dict, store, secret: str | None) -> str:
    """Migrate the schema and read the token secret; ConfigError says what is wrong."""
    try:
        store.upgrade_schema()
    except Exception as exc:
        shown = redacted(config["DATABASE"])
        raise ConfigError(f"cannot open database {shown!r}: {exc}") from None
    try:
        return load_secret({"SECRET_KEY": secret}, store)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read or create the secret key: {exc}") from None


class Runtimes:
    """An app's runtime in each process, made on first use there."""

    def __init__(self, config: dict, secret: str | None = None):
        self.config, self.secret, self.by_pid = config, secret, {}
        self.locks: dict[int, threading.Lock] = {}
        self.limiter = None  # flask-limiter's, set by create_app

    def get(self) -> Runtime:
        """This process's runtime (ConfigError while the database cannot be opened)."""
        pid = os.getpid()
        found = self.by_pid.get(pid)
        if found is None or found.closed:
            with self.locks.setdefault(pid, threading.Lock()):  # atomic: one lock per process
                found = self.by_pid.get(pid)
                if found is None or found.closed:
                    found = self.by_pid[pid] = Runtime(
                        self.config, self.secret, self.close_counters
                    )
                    _made.setdefault(pid, []).append(found)
        return found

    def close_counters(self) -> None:
        """Close this process's connections to the rate limits' SQLite file, if it is one."""
        from .store.counters import SQLiteCounters

        storage = getattr(self.limiter, "storage", None)
        if isinstance(storage, SQLiteCounters):
            storage.close()

    def made(self) -> Runtime | None:
        """This process's runtime if it was made (never makes one)."""
        found = self.by_pid.get(os.getpid())
        return None if found is None or found.closed else found

    @property
    def store(self):
        return self.get().store

    @property
    def usage(self) -> UsageTracker:
        return self.get().usage

    @property
    def token_secret(self) -> str:
        return self.get().secret

    def close(self) -> None:
        """Close this process's runtime of the app, if made."""
        found = self.by_pid.pop(os.getpid(), None)
        if found is not None:
            found.close()


def operation_names() -> set[str]:
    """The GraphQL operation names this process gave a metrics series of their own."""
    return _names.setdefault(os.getpid(), set())


def take_logs() -> None:
    """Logging's take-over, once per process (logs.take_over)."""
    if os.getpid() not in _logs:
        _logs[os.getpid()] = logs.take_over()


def end_streams() -> None:
    """End this process's open event streams at once (a stopping server waits for none)."""
    for made in _made.get(os.getpid(), []):
        made.streams.end()


@atexit.register
def close() -> None:
    """Close everything this process opened (idempotent): at exit and at a server's stop."""
    for made in _made.pop(os.getpid(), []):
        try:
            made.close()
        except Exception:  # one runtime's failure never keeps the others open
            log.exception("closing the runtime failed")
    listener = _logs.pop(os.getpid(), None)
    if listener is not None:
        listener.stop()  # writes what is queued
