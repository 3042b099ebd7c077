"""Where a loaded server's time goes: py-spy samples under wrk, summed per module.

Usage: python bench/profile_layers.py [--scenario TEXT] [--seconds 10] [--rate 250]
                                     [--all-threads]

It builds bench/run.py's database, starts the server of each run.py scenario whose name
is TEXT, or else contains it (any case; default: GET /person/{id} on serve), loads it with wrk
(16 connections) and meanwhile runs `py-spy record --gil --subprocesses` on it (pip install
py-spy; it needs ptrace). Every sample is counted twice: for the package of its innermost
frame (people_service's modules by path, others by top-level name: flask, waitress, limits,
sqlite3, logging, ...), and for the innermost people_service module on its stack (what asked
for the time; "none" when the stack has none, e.g. waitress reading a request). It prints each
one's share of the samples and the milliseconds per request, and the processes' whole CPU time
per request (user + system, from /proc), which also counts what runs without the GIL. With
--all-threads, py-spy samples every thread that is not idle instead of the GIL's holder: where
the requests' wall time goes rather than the GIL's.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import run  # the benchmark's database, servers and wrk (this script runs beside it)

PACKAGE = re.compile(r"python3\.\d+/(?:(?:site|dist)-packages/)?([^/]+)")


def module_of(path: str) -> str:
    if "/people_service/" in path:
        return "people_service/" + path.rsplit("/people_service/", 1)[1]
    found = PACKAGE.search(path)
    if found:
        return found.group(1).removesuffix(".py")
    return path.removeprefix(str(run.ROOT) + "/")  # bench/flask_floor.py


def profile(server: run.Server, scenario: run.Scenario, key: str, args, work: Path) -> dict:
    """Load `server` with wrk while py-spy samples it: rps, requests, both counts, CPU s."""
    script = run.lua_post(work / "profile.lua", scenario.body) if scenario.body else None

    def load(seconds: int, into: dict) -> None:
        credential = key if scenario.authenticated else None
        into.update(
            run.wrk(
                server.url + scenario.path,
                connections=16,
                duration=seconds,
                key=credential,
                script=script,
            )
        )

    load(2, {})  # warm up
    run.settle(server)
    output = work / f"{server.name}.txt"
    result: dict = {}
    loader = threading.Thread(target=load, args=(args.seconds + 2, result))
    loader.start()
    time.sleep(1)  # py-spy samples the middle of the load
    cpu = sum(run.process_ticks(pid) for pid in server.pids())
    subprocess.run(
        ["py-spy", "record", "--full-filenames", "--format", "raw", "--subprocesses"]
        + ([] if args.all_threads else ["--gil"])
        + ["--rate", str(args.rate), "--duration", str(args.seconds)]
        + ["--pid", str(server.process.pid), "--output", str(output)],
        check=True,
        capture_output=True,
    )
    cpu = (sum(run.process_ticks(pid) for pid in server.pids()) - cpu) / run.HZ
    loader.join()
    run.settle(server)
    inner, asker = Counter(), Counter()
    for line in output.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        paths = [frame[frame.rfind("(") + 1 : -1].rpartition(":")[0] for frame in stack.split(";")]
        modules = [module_of(path) for path in paths if path]
        if not modules:
            continue
        inner[modules[-1]] += int(count)
        ours = [m for m in modules if m.startswith("people_service/")]
        asker[ours[-1] if ours else "none"] += int(count)
    return {
        "rps": result["rps"],
        "requests": result["rps"] * args.seconds,
        "inner": inner,
        "asker": asker,
        "cpu": cpu,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="GET /person/{id}")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--all-threads", action="store_true", help="not only the GIL's holder")
    args = parser.parse_args()
    text = args.scenario.lower()
    chosen = [s for s in run.SCENARIOS if text == s.name.lower()]
    chosen = chosen or [s for s in run.SCENARIOS if text in s.name.lower()]
    if not chosen:
        parser.error(f"no scenario of bench/run.py has {args.scenario!r} in its name")

    work = Path(tempfile.mkdtemp(prefix="people-profile-"))
    db, people = work / "people.db", work / "people.json"
    people.write_text(json.dumps(run.people_document()))
    print("building the benchmark's database ...", flush=True)
    cli = [run.tool("people-service")]
    key = run.prepare_database(cli, db, people, run.clean_environment(), run.ROOT)[0]
    servers, skipped = run.servers_for({s.server for s in chosen}, db, work, 8)
    results = {}
    try:
        for server in servers.values():
            run.start(server)
            run.wait_ready(server)
        for scenario in chosen:
            if scenario.server in skipped:
                print(f"skipped {scenario.name}: {skipped[scenario.server]}")
                continue
            server = servers[scenario.server]
            results[scenario.name] = profile(server, scenario, key, args, work)
    finally:
        run.stop(servers)

    what = "busy-thread" if args.all_threads else "GIL"
    print(f"py-spy at {args.rate} Hz for {args.seconds} s under wrk -c16")
    for name, result in results.items():
        requests = result["requests"]
        total = sum(result["inner"].values())
        ms = total / args.rate / requests * 1000
        print()
        print(
            f"{name}: {result['rps']:,.0f} req/s while sampled; {what} {ms:.3f} ms and CPU "
            f"(user+system) {result['cpu'] / requests * 1000:.3f} ms per request"
        )
        for title, counts in (("innermost frame", result["inner"]), ("asked by", result["asker"])):
            print()
            print(f"| {title} | share of {what} samples | ms per request |")
            print("|---|---:|---:|")
            for module, count in counts.most_common(15):
                print(f"| {module} | {count / total:.0%} | {count / total * ms:.3f} |")
    print()
    print(f"(raw py-spy files in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
