"""Measure rate-limit hits per second on memory://, the shared SQLite counters and redis://.

Usage: python bench/counters.py [--seconds 2] [--rounds 3] [--redis redis://127.0.0.1:6379]

Each row charges accepted hits (the sliding-window-counter strategy the service uses, a limit
no run reaches) over 100 keys for a fixed time, from 1 and 4 threads of one process, and from 2
processes of 2 threads, and prints the median hits per second of interleaved rounds (every
cell once per round, so that load from elsewhere falls on all of them alike). The SQLite rows
are measured with the storage's synchronous = NORMAL and with OFF, so that the choice of NORMAL
is measured too, and once with every hit refused (the read-only path a flood of refused
requests takes). Redis is skipped when nothing answers; its keys carry a unique prefix and
expire by themselves.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from limits import parse  # noqa: E402
from limits.storage import storage_from_string  # noqa: E402
from limits.strategies import SlidingWindowCounterRateLimiter  # noqa: E402

from people_service.store.counters import SQLiteCounters  # noqa: E402

ROOM = parse("1000000000/hour")  # never reached: every hit is accepted and written
TIGHT = parse("1/hour")  # reached at once: every later hit is refused


class UnsyncedCounters(SQLiteCounters):
    """The same storage with synchronous = OFF (not registered: no STORAGE_SCHEME of its own)."""

    SYNCHRONOUS = "OFF"


def storage_for(uri: str, synchronous: str):
    if uri.startswith("sqlite://") and synchronous == "OFF":
        return UnsyncedCounters(uri)
    return storage_from_string(uri)


def hammer(uri, synchronous, item, threads, seconds, prefix, results) -> None:
    """Hits from `threads` threads for `seconds`; puts the number of hits made."""
    strategy = SlidingWindowCounterRateLimiter(storage_for(uri, synchronous))
    strategy.hit(item, prefix, "warm")  # connections and scripts ready before the clock
    counts = [0] * threads
    start = threading.Barrier(threads + 1)

    def run(index: int) -> None:
        start.wait()
        deadline = time.monotonic() + seconds
        made = 0
        while time.monotonic() < deadline:
            strategy.hit(item, prefix, f"key{(index * 7 + made) % 100}")
            made += 1
        counts[index] = made

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    for worker in workers:
        worker.join()
    results.put(sum(counts))


def measure(uri, synchronous, item, processes, threads, seconds) -> float:
    prefix = f"bench-{uuid.uuid4().hex}"
    if item is TIGHT:
        for key in range(100):  # spend every key's budget: the timed hits are all refused
            SlidingWindowCounterRateLimiter(storage_for(uri, synchronous)).hit(
                item, prefix, f"key{key}"
            )
    if processes == 1:
        queue = multiprocessing.get_context("spawn").SimpleQueue()
        hammer(uri, synchronous, item, threads, seconds, prefix, queue)
        return queue.get() / seconds
    context = multiprocessing.get_context("spawn")
    queue = context.SimpleQueue()
    args = (uri, synchronous, item, threads, seconds, prefix, queue)
    children = [context.Process(target=hammer, args=args) for _ in range(processes)]
    for child in children:
        child.start()
    total = sum(queue.get() for _ in children)
    for child in children:
        child.join()
    return total / seconds


def redis_answers(uri: str) -> bool:
    parts = urlsplit(uri)
    try:
        with socket.create_connection((parts.hostname, parts.port or 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="counters-bench-")
    sqlite = f"sqlite://{directory}/counters.db"
    rows = [
        ("memory://", "memory://", "", ROOM),
        ("sqlite, synchronous NORMAL", sqlite, "NORMAL", ROOM),
        ("sqlite, synchronous OFF", sqlite, "OFF", ROOM),
        ("sqlite, every hit refused", sqlite, "NORMAL", TIGHT),
    ]
    if redis_answers(args.redis):
        rows.append(("redis://", args.redis, "", ROOM))
    else:
        print(f"(no Redis answers at {args.redis}: its row is skipped)")
    shapes = [(1, 1), (1, 4), (2, 2)]
    cells = [
        (row, shape)
        for row in range(len(rows))
        for shape in shapes
        if not (rows[row][1] == "memory://" and shape[0] > 1)  # memory:// is not shared
    ]
    rates: dict = {cell: [] for cell in cells}
    for _ in range(args.rounds):
        for row, (processes, threads) in cells:
            _, uri, synchronous, item = rows[row]
            rates[row, (processes, threads)].append(
                measure(uri, synchronous, item, processes, threads, args.seconds)
            )
    header = " | ".join(f"{p} process{'es' if p > 1 else ''} x {t}" for p, t in shapes)
    print(f"| storage | {header} |")
    print("|---|" + "---:|" * len(shapes))
    for row, (label, *_) in enumerate(rows):
        figures = [
            f"{statistics.median(rates[row, shape]):,.0f}" if (row, shape) in rates else "-"
            for shape in shapes
        ]
        print(f"| {label} | " + " | ".join(figures) + " |")


if __name__ == "__main__":
    main()
