"""Python calls and CPU µs of one request in one process, through the WSGI app (no server).

Usage: python bench/inprocess.py [--requests 2000] [--graphql] [--components]
Counts every Python call under the app (sys.setprofile) for one warmed-up GET /person/1 (or
POST /graphql asking for one person), then times N of them with time.process_time. With
--components, cProfile splits the calls and the CPU time by component (our modules, each library,
the stdlib), as a Markdown table. It sets up through the CLI and the HTTP API only, so the same
script measures an older checkout: `PYTHONPATH=/path/to/old python bench/inprocess.py`.
Figures go in docs/performance.md.
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from compare import NESTED_QUERY
from run import people_document
from werkzeug.test import EnvironBuilder

from people_service import create_app

STDLIB = sysconfig.get_paths()["stdlib"]


def component(filename: str) -> str:
    """The part of the program a function belongs to: our module, a library, or the stdlib."""
    path = filename.replace(os.sep, "/")
    if "/people_service/" in path:
        part = path.split("/people_service/", 1)[1].split("/")[0]
        return "people_service." + part.removesuffix(".py")
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/")[0].removesuffix(".py")
    if path.startswith(STDLIB):
        return "stdlib " + path[len(STDLIB) :].strip("/").split("/")[0].removesuffix(".py")
    if path.startswith("<frozen "):
        return "stdlib " + path.removeprefix("<frozen ").rstrip(">").split(".")[0]
    return "builtins" if path in ("~", "") else path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--graphql", action="store_true", help="POST /graphql, one person")
    parser.add_argument(
        "--nested", action="store_true", help="POST /graphql, compare.py's nested query"
    )
    parser.add_argument("--components", action="store_true", help="a table by component")
    args = parser.parse_args()
    db = str(Path(tempfile.mkdtemp()) / "people.db")
    cli = [sys.executable, "-m", "people_service.cli"]
    made = subprocess.run(
        [*cli, "keys", "create", "--db", db, "--name", "bench", "--rate-limit", "100000000/minute"],
        capture_output=True,
        text=True,
        check=True,
    )
    key = made.stdout.split()[-1]
    if args.nested:  # bench/run.py's people, imported as compare.py does
        people = Path(db).with_name("people.json")
        people.write_text(json.dumps(people_document()))
        subprocess.run([*cli, "import", str(people), "--db", db], capture_output=True, check=True)
    app = create_app({"DATABASE": db, "LOG_LEVEL": "INFO", "RATE_LIMIT_STORAGE": "memory://"})
    headers = {"X-API-Key": key, "Accept": "application/json"}

    def call(environ) -> bytes:
        body = app(dict(environ), lambda status, headers, exc_info=None: None)
        data = b"".join(body)
        getattr(body, "close", lambda: None)()
        return data

    person = {"name": "Ada Lovelace", "age": 36}
    call(EnvironBuilder(path="/person", method="POST", json=person, headers=headers).get_environ())
    if args.nested:
        query = {"query": NESTED_QUERY}
        builder = EnvironBuilder(path="/graphql", method="POST", json=query, headers=headers)
    elif args.graphql:
        query = {"query": '{ person(id: "1") { name age email } }'}
        builder = EnvironBuilder(path="/graphql", method="POST", json=query, headers=headers)
    else:
        builder = EnvironBuilder(path="/person/1", headers=headers)
    environ = builder.get_environ()
    environ["wsgi.input"].seek(0)
    body = environ["wsgi.input"].read()
    label = (
        "POST /graphql nested"
        if args.nested
        else "POST /graphql one person"
        if args.graphql
        else "GET /person/1"
    )

    def once() -> bytes:
        request = dict(environ)
        request["wsgi.input"] = io.BytesIO(body)
        return call(request)

    answer = json.loads(once())
    assert "Ada" in json.dumps(answer) or args.nested and "errors" not in answer, answer
    for _ in range(300):
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
    print(f"{label}: {calls} Python calls, {spent:.0f} µs CPU per request")
    if not args.components:
        return
    rounds = max(200, args.requests // 4)
    profile = cProfile.Profile(time.thread_time)  # CPU of this thread: no waits for the GIL
    profile.enable()
    for _ in range(rounds):
        once()
    profile.disable()
    if os.environ.get("PROFILE_DETAIL"):
        stats = pstats.Stats(profile).sort_stats(os.environ.get("PROFILE_SORT", "tottime"))
        stats.print_stats(os.environ["PROFILE_DETAIL"], 40)
        if os.environ.get("PROFILE_CALLERS"):
            stats.print_callers(os.environ["PROFILE_CALLERS"])
    by: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for (filename, _line, _name), (_cc, nc, tt, _ct, _callers) in pstats.Stats(
        profile
    ).stats.items():
        part = component(filename)
        by[part][0] += nc / rounds
        by[part][1] += tt / rounds
    total = sum(time for _, time in by.values())
    rest = [0.0, 0.0]
    print("\n| component | calls | share of CPU | µs (scaled to the unprofiled run) |")
    print("|---|---:|---:|---:|")
    for part, (n, t) in sorted(by.items(), key=lambda item: -item[1][1]):
        if t / total >= 0.01:
            print(f"| {part} | {n:.0f} | {t / total:.0%} | {spent * t / total:.0f} |")
        else:
            rest = [rest[0] + n, rest[1] + t]
    print(f"| the rest | {rest[0]:.0f} | {rest[1] / total:.0%} | {spent * rest[1] / total:.0f} |")


if __name__ == "__main__":
    main()
