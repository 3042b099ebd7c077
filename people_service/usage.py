"""Request counts and last use per key or user, kept in memory and flushed every few seconds."""

import logging
import threading
import time

from .store import iso

log = logging.getLogger("people_service")


class UsageTracker:
    """Counts requests per caller without a database write on every request."""

    def __init__(self, store, interval: float = 5.0):
        self.store = store
        self.interval = interval
        self._pending: dict[tuple[str, int], tuple[int, str]] = {}
        self._lock = threading.Lock()  # guards _pending
        self._flush_lock = threading.Lock()  # a flush and an exact read never interleave
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hit(self, caller) -> None:
        """Count one request of `caller` (anything with .kind and .id)."""
        ident = (caller.kind, caller.id)
        stamp = time.time()  # formatted when written: this runs on every request
        with self._lock:
            count = self._pending.get(ident, (0, 0.0))[0]
            self._pending[ident] = (count + 1, stamp)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="usage-flush", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.flush()
            except Exception:  # never the end of counting: the next round tries again
                log.exception("usage flush failed")
            finally:
                self.store.release()  # no connection is held between flushes

    def flush(self) -> None:
        """Write the pending counts; on failure they are kept for the next flush."""
        with self._flush_lock:
            with self._lock:
                pending, self._pending = self._pending, {}
            if not pending:
                return
            try:
                self.store.add_usage(
                    {ident: (count, iso(stamp)) for ident, (count, stamp) in pending.items()}
                )
            except Exception:
                log.warning("could not flush usage counts; will retry", exc_info=True)
                with self._lock:
                    for ident, (count, stamp) in pending.items():
                        now_count, now_stamp = self._pending.get(ident, (0, 0.0))
                        self._pending[ident] = (count + now_count, max(stamp, now_stamp))

    def exact(self, kind: str, ident: int) -> tuple[int, str | None]:
        """Stored plus pending request count, and the last use."""
        with self._flush_lock:
            stored = self.store.usage(kind, ident) or {"request_count": 0, "last_used": None}
            with self._lock:
                count, stamp = self._pending.get((kind, ident), (0, 0.0))
        last = max(stored["last_used"] or "", iso(stamp) if stamp else "") or None
        return stored["request_count"] + count, last

    def stop(self) -> None:
        """Stop the flushing thread and write what is pending."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 5)
        self.flush()
