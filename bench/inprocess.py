"""Python calls and CPU µs of one request in one process, through the WSGI app (no server).

Usage: python bench/inprocess.py [--requests 2000]
Counts every Python call under the app (sys.setprofile) for one warmed-up GET /person/{id},
then times N of them with time.process_time. Figures go in docs/performance.md.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from werkzeug.test import EnvironBuilder

from people_service import create_app, credentials
from people_service.web import services


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--path", default="/person/1")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    app = create_app(
        {
            "DATABASE": str(work / "people.db"),
            "RATE_LIMIT": "1000000/minute",
            "LOG_LEVEL": "INFO",
            "RATE_LIMIT_STORAGE": "memory://",
        }
    )
    store = services(app).store
    key = credentials.create_key(store, "bench", "read,write")
    with store.transaction():
        from people_service import service

        service.create_person(store, {"name": "Ada Lovelace", "age": 36})
    environ = EnvironBuilder(path=args.path, headers={"X-API-Key": key}).get_environ()

    def once() -> None:
        body = app(dict(environ), lambda status, headers, exc_info=None: None)
        b"".join(body)
        getattr(body, "close", lambda: None)()

    for _ in range(200):
        once()
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    once()
    sys.setprofile(None)
    started = time.process_time()
    for _ in range(args.requests):
        once()
    spent = (time.process_time() - started) / args.requests * 1e6
    print(f"{args.path}: {calls} Python calls, {spent:.0f} µs CPU per request")


if __name__ == "__main__":
    main()
