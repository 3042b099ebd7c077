"""Serve several git revisions side by side and load them in one interleaved wrk run.

Usage: python bench/compare.py OLD NEW [NEW ...] [--rounds 5] [--duration 5] [--keep]

Each REV is exported (git archive) into a temporary directory and prepared with commands every
revision's CLI has: `import` of bench/run.py's 10,000 people into a fresh database of its own,
then `keys create` of a key with its own rate limit (so no revision's first start loads a demo
or prints a demo key). Each is served by `serve` (one process, --threads 8 by default,
every setting at that revision's default), importing its own people_service (checked). The
scenarios: GET /person/42, GraphQL one person by GET, the nested GraphQL query (4,440 people)
by POST, POST /message; every answer is checked before any load. After a warm-up, each round
runs every scenario on every revision, rotating which revision goes first. A REV given twice
(`compare.py OLD NEW NEW`) is an A/A control: the gap between its two copies is the run's noise.
Prints req/s, p50 and p99 per scenario and revision (medians), with ratios to the first REV
and the min-max of the per-round ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

# bench/run.py's data, key and wrk (this script runs from bench/, beside it)
from run import (
    MESSAGE_BODY,
    ONE_PERSON_PATH,
    PEOPLE,
    clean_environment,
    free_port,
    lua_post,
    people_document,
    prepare_database,
    wrk,
)

ROOT = Path(__file__).resolve().parent.parent
NESTED_QUERY = (
    "{ people(limit: 40) { name friends(limit: 10) { name friends(limit: 10) { name } } } }"
)
NESTED_OBJECTS = 40 + 40 * 10 + 40 * 10 * 10
# run in each server process: say which people_service it imported, then be `people-service`
LAUNCH = (
    "import sys, people_service, people_service.cli as cli; "
    "print('people_service imported from', people_service.__file__, flush=True); "
    "sys.argv[0] = 'people-service'; sys.exit(cli.main())"
)


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def export(commit: str, into: Path) -> None:
    """The tracked files of `commit` in `into` (git archive: no worktree to clean up)."""
    into.mkdir(parents=True)
    archive = into.with_suffix(".tar")
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", commit], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()


def count_objects(value) -> int:
    """The JSON objects in `value`, itself included."""
    if isinstance(value, list):
        return sum(count_objects(item) for item in value)
    if isinstance(value, dict):
        return 1 + sum(count_objects(item) for item in value.values())
    return 0


def request(url: str, key: str, body: str | None = None) -> tuple[int, dict]:
    headers = {"X-API-Key": key, "Content-Type": "application/json"}
    data = body.encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, {}


class Version:
    """One commit's tree, database, key and running server."""

    def __init__(self, rev: str, label: str, index: int, work: Path, people: Path, threads: int):
        self.rev, self.label = rev, label
        self.commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
        self.tree = work / f"v{index}-{self.commit[:7]}"
        export(self.commit, self.tree)
        # every setting at the revision's default, as a user gets it (access log, limit storage)
        self.env = clean_environment(PYTHONPATH=str(self.tree))
        self.db = self.tree.with_suffix(".db")
        cli = [sys.executable, "-c", LAUNCH]
        self.key = prepare_database(cli, self.db, people, self.env, self.tree)[0]
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log, self.stdout = self.tree.with_suffix(".log"), self.tree.with_suffix(".out")
        self.server = subprocess.Popen(
            [*cli, "serve", "--db", str(self.db), "--port", self.url.rsplit(":", 1)[1]]
            + ["--threads", str(threads)],
            cwd=self.tree,
            env=self.env,
            stdout=open(self.stdout, "w"),
            stderr=open(self.log, "w"),  # the access log, a line per request
        )

    def check(self) -> str:
        """Ask each scenario once; say where the server's people_service came from."""
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).read()
                break
            except OSError:
                if self.server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.label} did not start; see {self.log}") from None
                time.sleep(0.1)
        status, person = request(self.url + "/person/42", self.key)
        assert status == 200 and person["name"] == "Person 42", (self.rev, status, person)
        status, answer = request(self.url + ONE_PERSON_PATH, self.key)
        assert status == 200 and answer["data"]["person"]["name"] == "Person 42", answer
        status, nested = request(
            self.url + "/graphql", self.key, json.dumps({"query": NESTED_QUERY})
        )
        found = count_objects(nested.get("data")) - 1
        assert status == 200 and found == NESTED_OBJECTS, (self.rev, status, found)
        status, sent = request(self.url + "/message", self.key, MESSAGE_BODY)
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("revs", nargs="+", metavar="REV", help="commits; the first is the base")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--warmup", type=int, default=1, help="seconds per scenario, not counted")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=8, help="serve --threads")
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
        scenarios = {
            "GET /person/42": ("/person/42", None),
            "GraphQL GET one person": (ONE_PERSON_PATH, None),
            "GraphQL POST nested (4,440 people)": (
                "/graphql",
                lua_post(work / "nested.lua", json.dumps({"query": NESTED_QUERY})),
            ),
            "POST /message": ("/message", lua_post(work / "message.lua", MESSAGE_BODY)),
        }
        for index, rev in enumerate(args.revs):
            # a REV given again (an A/A control of the noise) is labelled REV#2, REV#3, ...
            seen = args.revs[:index].count(rev)
            label = f"{rev}#{seen + 1}" if seen else rev
            print(f"{label}: exporting, importing {PEOPLE} people, starting ...", flush=True)
            versions.append(Version(rev, label, index, work, people, args.threads))
        for version in versions:
            print(f"{version.label} ({version.commit[:10]}): {version.check()}", flush=True)

        def load(v: Version, path: str, script: Path | None, duration: int) -> dict:
            return wrk(
                v.url + path,
                connections=args.connections,
                duration=duration,
                key=v.key,
                script=script,
            )

        if args.warmup:
            print(f"warm-up: {args.warmup} s per scenario and version", flush=True)
            for path, script in scenarios.values():
                for v in versions:
                    load(v, path, script, args.warmup)
        results = {(name, v.label): [] for name in scenarios for v in versions}
        for number in range(args.rounds):
            # rotate the order of the versions each round, so none always runs first
            shift = number % len(versions)
            order = versions[shift:] + versions[:shift]
            print(f"round {number + 1}/{args.rounds}: {' '.join(v.label for v in order)}")
            for name, (path, script) in scenarios.items():
                for v in order:
                    run = load(v, path, script, args.duration)
                    results[name, v.label].append(run)
                    errors = f"  non-2xx {run['non2xx']}" if run["non2xx"] else ""
                    if run["socket_errors"]:
                        errors += f"  socket errors {run['socket_errors']}"
                    print(
                        f"  {name:34} {v.label:10} {run['rps']:8,.0f} req/s  "
                        f"p50 {run['p50']:7.2f} ms  p99 {run['p99']:7.2f} ms{errors}",
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

    base = versions[0].label
    print()
    print(
        f"{args.rounds} rounds x {args.duration} s, wrk -t1 -c{args.connections}, serve "
        f"--threads {args.threads}, versions interleaved; medians of the rounds; ratios to "
        f"{base}; paired: min-max of each round's req/s over {base}'s in that round"
    )
    print()
    print(
        "| scenario | version | req/s | ratio | paired | p50 ms | ratio | p99 ms | ratio | errors |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in scenarios:
        first = results[name, base]
        b = {k: statistics.median(r[k] for r in first) for k in ("rps", "p50", "p99")}
        for v in versions:
            runs = results[name, v.label]
            m = {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50", "p99")}
            paired = [r["rps"] / r0["rps"] for r, r0 in zip(runs, first, strict=True)]
            print(
                f"| {name} | {v.label} | {m['rps']:,.0f} | {m['rps'] / b['rps']:.2f} "
                f"| {min(paired):.2f}-{max(paired):.2f} "
                f"| {m['p50']:.2f} | {m['p50'] / b['p50']:.2f} "
                f"| {m['p99']:.2f} | {m['p99'] / b['p99']:.2f} "
                f"| {sum(r['non2xx'] for r in runs)} |"
            )
    if args.keep:
        print(f"(work files in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
