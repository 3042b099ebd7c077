"""Run `python bench/compare.py REV [REV ...] [--rounds 5] [--duration 5]` (e.g. a4f81ee 3276e4c
HEAD; the first REV is the base) to serve each commit from its own export in a temporary
directory, on its own fresh database of the same data, load them all with wrk in one interleaved
run and print req/s, p50 and p99 per version and scenario with their ratios to the base."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

# the same people as bench/run.py (this script runs from bench/, beside it)
from run import PEOPLE, people_document

ROOT = Path(__file__).resolve().parent.parent
ONE_PERSON = '{ person(id: "42") { name address { city } } }'
MESSAGE = {"person_id": "42", "content": "Hello from wrk"}
SECRET = "compare-secret-0123456789-0123456789-0123"
# run in each server process: say which people_service it imported, then be `people-service`
LAUNCH = (
    "import sys, people_service, people_service.cli as cli; "
    "print('people_service imported from', people_service.__file__, flush=True); "
    "sys.argv[0] = 'people-service'; sys.exit(cli.main())"
)
UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def export(rev: str, commit: str, into: Path) -> None:
    """The tracked files of `commit` in `into` (git archive: no worktree to clean up)."""
    into.mkdir(parents=True)
    archive = into.parent / f"{rev}.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", commit], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()


def environment(tree: Path) -> dict:
    """The same settings for every version, none inherited from the caller's PEOPLE_SERVICE_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEOPLE_SERVICE_")}
    env.update(
        PYTHONPATH=str(tree),
        PEOPLE_SERVICE_SECRET_KEY=SECRET,
        PEOPLE_SERVICE_RATE_LIMIT_STORAGE="memory://",
        PEOPLE_SERVICE_LOG_LEVEL="INFO",  # the access log is on (INFO)
    )
    return env


def command(tree: Path, *args: str) -> str:
    """Run `people-service ARGS` from `tree`, with that tree's code; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, *args],
        cwd=tree,
        env=environment(tree),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"{tree.name}: people-service {args[0]} failed:\n{done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(url: str, key: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"X-API-Key": key, "Content-Type": "application/json"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


class Version:
    """One commit's tree, database, key and running server."""

    def __init__(self, rev: str, label: str, index: int, work: Path, people: Path, threads: int):
        self.rev, self.label = rev, label
        self.commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
        self.tree = work / f"v{index}-{self.commit[:7]}"
        export(rev, self.commit, self.tree)
        self.db = self.tree.parent / f"{self.tree.name}.db"
        command(self.tree, "import", "--db", str(self.db), str(people))
        created = command(
            self.tree,
            "keys",
            "create",
            "--db",
            str(self.db),
            "--name",
            "bench",
            "--scopes",
            "read,write",
            "--rate-limit",
            "1000000000/minute",
        )
        self.key = created.strip().splitlines()[-1]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.tree.parent / f"{self.tree.name}.log"
        self.stdout = self.tree.parent / f"{self.tree.name}.out"
        self.server = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, "serve", "--db", str(self.db)]
            + ["--port", str(self.port), "--threads", str(threads)],
            cwd=self.tree,
            env=environment(self.tree),
            stdout=open(self.stdout, "w"),
            stderr=open(self.log, "w"),  # the access log, a line per request
        )

    def check(self) -> str:
        """Ask each scenario once; say where the server's people_service came from."""
        wait_ready(self.url + "/health")
        status, person = request(self.url + "/person/42", self.key)
        assert status == 200 and person["name"] == "Person 42", (self.rev, status, person)
        one = self.url + "/graphql?" + urllib.parse.urlencode({"query": ONE_PERSON})
        status, answer = request(one, self.key)
        assert status == 200 and answer["data"]["person"]["name"] == "Person 42", answer
        status, page = request(self.url + "/people?limit=100", self.key)
        assert status == 200 and len(page) == 100, (self.rev, status, len(page))
        status, sent = request(self.url + "/message", self.key, MESSAGE)
        assert status == 201 and sent["person_id"] == "42", (self.rev, status, sent)
        imported = self.stdout.read_text().splitlines()[0]
        assert imported.endswith(str(self.tree / "people_service" / "__init__.py")), imported
        return imported

    def stop(self) -> None:
        if self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(30)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()


def wrk(url: str, *, key: str, connections: int, duration: int, script: Path | None) -> dict:
    args = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency"]
    args += ["-H", f"X-API-Key: {key}"]
    if script:
        args += ["-s", str(script)]
    output = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    latency = {}
    for percent in ("50", "99"):
        value, unit = re.search(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s)$", output, re.M).groups()
        latency[percent] = float(value) * UNITS[unit]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)", output)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": latency["50"],
        "p99": latency["99"],
        "non2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": errors.group(1) if errors else "",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split()))
    parser.add_argument("revs", nargs="+", metavar="REV", help="commits; the first is the base")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--warmup", type=int, default=1, help="seconds per scenario, not counted")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=4, help="waitress threads")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        parser.error("needs wrk (apt-get install wrk)")

    # SIGTERM too stops the servers and removes the work directory (the finally below)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = Path(tempfile.mkdtemp(prefix="people-compare-"))
    versions: list[Version] = []
    try:
        people = work / "people.json"
        people.write_text(json.dumps(people_document()))
        message = work / "message.lua"
        message.write_text(
            f'wrk.method = "POST"\nwrk.body = {json.dumps(json.dumps(MESSAGE))}\n'
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
        for index, rev in enumerate(args.revs):
            # a REV given again (an A/A control of the noise) is labelled REV#2, REV#3, ...
            seen = args.revs[:index].count(rev)
            label = f"{rev}#{seen + 1}" if seen else rev
            print(f"{label}: exporting, importing {PEOPLE} people, starting ...", flush=True)
            versions.append(Version(rev, label, index, work, people, args.threads))
        for version in versions:
            print(f"{version.label} ({version.commit[:10]}): {version.check()}", flush=True)
        scenarios = {
            "GET /person/42": ("/person/42", None),
            "GraphQL GET one person": (
                "/graphql?" + urllib.parse.urlencode({"query": ONE_PERSON}),
                None,
            ),
            "GET /people?limit=100": ("/people?limit=100", None),
            "POST /message": ("/message", message),
        }
        load = dict(connections=args.connections)
        if args.warmup:
            print(f"warm-up: {args.warmup} s per scenario and version", flush=True)
            for path, script in scenarios.values():
                for v in versions:
                    wrk(v.url + path, key=v.key, duration=args.warmup, script=script, **load)
        results = {(name, v.label): [] for name in scenarios for v in versions}
        for number in range(args.rounds):
            # rotate the order of the versions each round, so none always runs first
            shift = number % len(versions)
            order = versions[shift:] + versions[:shift]
            print(f"round {number + 1}/{args.rounds}: {' '.join(v.label for v in order)}")
            for name, (path, script) in scenarios.items():
                for v in order:
                    run = wrk(
                        v.url + path, key=v.key, duration=args.duration, script=script, **load
                    )
                    results[name, v.label].append(run)
                    print(
                        f"  {name:24} {v.label:10} {run['rps']:8,.0f} req/s  "
                        f"p50 {run['p50']:6.2f} ms  p99 {run['p99']:6.2f} ms"
                        + (f"  non-2xx {run['non2xx']}" if run["non2xx"] else "")
                        + (
                            f"  socket errors {run['socket_errors']}"
                            if run["socket_errors"]
                            else ""
                        ),
                        flush=True,
                    )
        for v in versions:
            if v.server.poll() is not None:
                raise RuntimeError(f"{v.label}'s server stopped (see {v.log})")
    finally:
        for v in versions:
            v.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print(
        f"{args.rounds} rounds x {args.duration} s, wrk -t1 -c{args.connections}, waitress "
        f"threads={args.threads}, versions interleaved; medians of the rounds; ratios to "
        f"{versions[0].label}; req/s range: lowest..highest round; paired ratios range: "
        f"lowest..highest of each round's req/s over {versions[0].label}'s in that round"
    )
    print()
    print(
        "| scenario | version | req/s | req/s range | ratio | paired ratios range | p50 ms "
        "| ratio | p99 ms | ratio | non-2xx |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in scenarios:
        base = results[name, versions[0].label]
        b = {k: statistics.median(r[k] for r in base) for k in ("rps", "p50", "p99")}
        for v in versions:
            runs = results[name, v.label]
            m = {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50", "p99")}
            low, high = min(r["rps"] for r in runs), max(r["rps"] for r in runs)
            paired = [r["rps"] / r0["rps"] for r, r0 in zip(runs, base, strict=True)]
            bad = sum(r["non2xx"] for r in runs)
            print(
                f"| {name} | {v.label} | {m['rps']:,.0f} | {low:,.0f}..{high:,.0f} "
                f"| {m['rps'] / b['rps']:.2f} | {min(paired):.2f}..{max(paired):.2f} "
                f"| {m['p50']:.2f} | {m['p50'] / b['p50']:.2f} "
                f"| {m['p99']:.2f} | {m['p99'] / b['p99']:.2f} | {bad} |"
            )
    if args.keep:
        print(f"(work files in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
