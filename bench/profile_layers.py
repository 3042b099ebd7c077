"""Where the time of a request goes: py-spy samples of the server under wrk, summed per layer.

Usage: python bench/profile_layers.py [--seconds 10] [--rate 250] [--scenario person,message,floor]
                                     [--all-threads]

It builds the benchmark's database (bench/run.py), starts `people-service serve` and the bare
Flask + sqlite3 reference (bench/flask_floor.py) with 4 waitress threads, and for each
scenario loads the server with wrk (16 connections) while `py-spy record --gil` samples the
thread that holds the GIL (pip install py-spy; it needs ptrace, root here). A sample counts
for the innermost frame of a known layer: waitress; Flask and werkzeug; the view, service,
store and SQLite (json included); the rate limit (ratelimit.py, limits, flask-limiter); the
access log (logs.py, logging, and the part of finish_request that formats the line);
authentication (caller.py, credentials.py, usage counting); the rest of our
per-request plumbing (request ids, headers, CORS, query checks). It prints, per layer, the
share of the samples and the milliseconds of GIL per request (samples / rate / requests in
the window), and the process's whole CPU time per request (user + system, /proc/PID/stat),
which also counts what runs without the GIL (SQLite's C code, system calls), and how many
cores it kept busy. With --all-threads, py-spy samples every thread that is not idle instead
(a thread waiting for SQLite's write lock or an fsync counts): where the requests' wall time
goes rather than the GIL's.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import run  # noqa: E402  (the benchmark's database, servers and wrk)

from people_service.web import lifecycle  # noqa: E402

# Innermost frame first: the first frame whose file matches names the layer.
LAYERS = [
    ("access log", ("/people_service/logs.py", "/logging/")),
    (
        "rate limit",
        ("/people_service/web/ratelimit.py", "/limits/", "/flask_limiter/", "/store/counters.py"),
    ),
    (
        "authentication",
        (
            "/people_service/web/caller.py",
            "/people_service/credentials.py",
            "/people_service/usage.py",
            "/jwt/",
        ),
    ),
    (
        "view, service, store, SQLite",
        (
            "/people_service/rest/",
            "/people_service/service.py",
            "/people_service/store/",
            "/people_service/schemas.py",
            "/people_service/web/jsonio.py",
            "/people_service/graphql/",
            "/sqlite_utils/",
            "/sqlite3/",
            "/json/",
            "/marshmallow/",
            "/graphql/",
            "/ariadne/",
            "/bench/flask_floor.py",
        ),
    ),
    ("our plumbing: request ids, headers, CORS, query checks", ("/people_service/",)),
    ("Flask, werkzeug", ("/flask/", "/werkzeug/", "/flask_cors/")),
    ("waitress", ("/waitress/",)),
]
OTHER = "other (threads, queues, stdlib)"


def access_log_lines() -> tuple[str, int, int]:
    """finish_request's file and the lines that build and log the access line."""
    lines, first = inspect.getsourcelines(lifecycle.finish_request)
    start = next(i for i, text in enumerate(lines) if "access_log.isEnabledFor" in text)
    return inspect.getsourcefile(lifecycle.finish_request), first + start, first + len(lines)


def layer_of(stack: list[str], finish: tuple[str, int, int]) -> str:
    """The layer of one sample: frames outermost first, each 'function (file:line)'."""
    for frame in reversed(stack):
        location = frame[frame.rfind("(") + 1 : -1]
        path, _, line = location.rpartition(":")
        if path == finish[0] and line.isdigit() and finish[1] <= int(line) < finish[2]:
            return "access log"
        for layer, markers in LAYERS:
            if any(marker in path for marker in markers):
                return layer
    return OTHER


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profile(server: dict, scenario: run.Scenario, key: str, args, work: Path) -> dict:
    """Load `server` with wrk while py-spy samples it; returns requests, samples, CPU."""
    script = None
    if scenario.body is not None:
        script = run.lua_post(work / f"{scenario.server}-profile.lua", scenario.body)
    target = server["url"] + scenario.path
    credential = key if scenario.authenticated else None

    def load(seconds: int, into: dict) -> None:
        into.update(
            run.wrk(target, connections=16, duration=seconds, key=credential, script=script)
        )

    load(2, {})  # warm up
    run.settle(server)
    pid = server["process"].pid
    output = work / f"{scenario.server}-{args.rate}.txt"
    result: dict = {}
    loader = threading.Thread(target=load, args=(args.seconds + 2, result))
    loader.start()
    time.sleep(1)  # py-spy samples the middle of the load
    cpu_before = cpu_seconds(pid)
    subprocess.run(
        ["py-spy", "record", "--full-filenames", "--format", "raw"]
        + ([] if args.all_threads else ["--gil"])
        + ["--rate", str(args.rate), "--duration", str(args.seconds)]
        + ["--pid", str(pid), "--output", str(output)],
        check=True,
        capture_output=True,
    )
    cpu = cpu_seconds(pid) - cpu_before
    loader.join()
    run.settle(server)
    finish = access_log_lines()
    layers: Counter = Counter()
    for line in output.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        layers[layer_of(stack.split(";"), finish)] += int(count)
    requests = result["rps"] * args.seconds
    return {"rps": result["rps"], "requests": requests, "layers": layers, "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--scenario", default="person,message,floor")
    parser.add_argument("--all-threads", action="store_true", help="not only the GIL's holder")
    args = parser.parse_args()

    message = json.dumps({"person_id": "42", "content": "Hello from wrk"})
    known = {
        "person": run.Scenario(run.PERSON, "one", "/person/4242"),
        "message": run.Scenario(run.MESSAGE, "one", "/message", message),
        "graphql-one": run.Scenario(run.ONE_PERSON, "one", run.ONE_PERSON_PATH),
        "floor": run.Scenario(run.FLOOR, "floor", "/person/4242", authenticated=False),
    }
    chosen = [known[name.strip()] for name in args.scenario.split(",")]
    work = Path(tempfile.mkdtemp(prefix="people-profile-"))
    print("building the benchmark's database ...", flush=True)
    key = run.build_database(work / "people.db")
    servers: dict = {}
    try:
        run.start_servers(servers, {s.server for s in chosen}, work / "people.db", work, 4)
        results = {s.name: profile(servers[s.server], s, key, args, work) for s in chosen}
    finally:
        run.stop_servers(servers)

    print()
    what = "busy threads" if args.all_threads else "GIL"
    mode = "" if args.all_threads else " --gil"
    print(f"py-spy{mode} at {args.rate} Hz for {args.seconds} s under wrk -c16, 4 threads")
    for name, result in results.items():
        total = sum(result["layers"].values())
        requests = result["requests"]
        sampled_ms = total / args.rate / requests * 1000
        print()
        print(
            f"{name}: {result['rps']:,.0f} req/s while sampled; {what} {sampled_ms:.3f} ms "
            f"and CPU (user+system) {result['cpu'] / requests * 1000:.3f} ms per request; "
            f"{result['cpu'] / args.seconds:.2f} cores busy"
        )
        print()
        print(f"| layer | share of {what} samples | {what} ms per request |")
        print("|---|---:|---:|")
        for layer, count in result["layers"].most_common():
            share = count / total
            print(f"| {layer} | {share:.0%} | {share * sampled_ms:.3f} |")
    print()
    print(f"(raw py-spy files in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
