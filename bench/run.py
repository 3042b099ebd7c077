"""Benchmark the real server against a bare WSGI baseline under the same waitress, loaded by wrk.

Usage: python bench/run.py [--rounds 5] [--duration 5] [--connections 16] [--threads 4]

It builds a fresh database (10,000 people, 10 friends each, 20,000 messages), starts
`people-service serve` and bench/baseline.py with the same waitress thread count, and runs wrk
against each scenario in interleaved rounds. It prints per scenario the median req/s, p50 and
p99 latency, and the ratio to the baseline measured in the same run; then single-client
latencies of the two GraphQL queries, the SQL statements of the nested one, and the server's
peak RSS. Needs wrk (apt-get install wrk). Everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from people_service import create_app, credentials, service, transfer  # noqa: E402
from people_service.web import services  # noqa: E402

PEOPLE, FRIENDS, MESSAGES = 10_000, 10, 20_000
ONE_PERSON = '{ person(id: "42") { name address { city } } }'
NESTED = "{ people(limit: 40) { name friends(limit: 10) { name friends(limit: 10) { name } } } }"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_database(path: Path) -> str:
    """A fresh database with the benchmark's data; returns an API key with room for the load."""
    app = create_app({"DATABASE": str(path), "LOG_LEVEL": "WARNING"})
    store = services(app).store
    people = []
    for i in range(1, PEOPLE + 1):
        people.append(
            {
                "id": str(i),
                "name": f"Person {i}",
                "age": i % 100,
                "email": f"person{i}@example.org",
                "address": {
                    "street": f"{i} Main Street",
                    "city": f"City {i % 97}",
                    "country": "Norway",
                },
                # i and i+1..i+5 (wrapping): with the reverse links, 10 friends each
                "friends": [str((i + k - 1) % PEOPLE + 1) for k in range(1, FRIENDS // 2 + 1)],
            }
        )
    transfer.import_people(store, {"people": people})
    key = credentials.create_key(store, "bench", "read,write", "1000000000/minute")
    viewer = credentials.caller_from_key(store, key).viewer
    with store.transaction():
        for n in range(MESSAGES):
            message = {"person_id": str(n % PEOPLE + 1), "content": f"m{n}"}
            service.send_message(store, viewer, message)
    services(app).usage.stop()
    store.close()
    return key


def wait_ready(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def lua_post(path: Path, body: str) -> Path:
    escaped = body.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        f'wrk.method = "POST"\nwrk.body = "{escaped}"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    return path


UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk(url: str, *, connections: int, duration: int, key: str | None, script: Path | None):
    command = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency"]
    if key:
        command += ["-H", f"X-API-Key: {key}"]
    if script:
        command += ["-s", str(script)]
    output = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    latency = {}
    for percent in ("50", "99"):
        value, unit = re.search(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s)$", output, re.M).groups()
        latency[percent] = float(value) * UNITS[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket_errors = re.search(r"Socket errors: (.*)", output)
    return {
        "rps": rps,
        "p50": latency["50"],
        "p99": latency["99"],
        "non2xx": int(errors.group(1)) if errors else 0,
        "socket_errors": socket_errors.group(1) if socket_errors else "",
    }


def nested_statements(db: Path, key: str) -> int:
    """SQL statements the nested query runs, counted with sqlite3's trace callback."""
    app = create_app({"DATABASE": str(db), "LOG_LEVEL": "WARNING"})
    store = services(app).store
    client = app.test_client()
    headers = {"X-API-Key": key}
    client.post("/graphql", json={"query": NESTED}, headers=headers)  # warm the caches
    statements: list[str] = []
    store._db().conn.set_trace_callback(statements.append)
    response = client.post("/graphql", json={"query": NESTED}, headers=headers)
    store._db().conn.set_trace_callback(None)
    assert "errors" not in response.json, response.json
    services(app).usage.stop()
    store.close()
    return len(statements)


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--only", help="run only the scenarios whose name contains this text")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="people-bench-"))
    db = work / "people.db"
    print(f"building {PEOPLE} people, {FRIENDS} friends each, {MESSAGES} messages ...", flush=True)
    key = build_database(db)
    statements = nested_statements(db, key)

    port, base_port = free_port(), free_port()
    env = {**os.environ, "PEOPLE_SERVICE_SECRET_KEY": "bench-secret-0123456789-0123456789-012"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "people_service.cli",
            "serve",
            "--db",
            str(db),
            "--port",
            str(port),
            "--threads",
            str(args.threads),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(work / "server.log", "w"),
    )
    baseline = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "baseline.py"), str(base_port), str(args.threads)]
    )
    floor_port = free_port()
    floor = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "flask_floor.py"),
            str(floor_port),
            str(args.threads),
            str(db),
        ]
    )
    url, base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{base_port}"
    floor_url = f"http://127.0.0.1:{floor_port}"
    try:
        wait_ready(url + "/health")
        wait_ready(base + "/")
        wait_ready(floor_url + "/person/1")
        one = url + "/graphql?" + urllib.parse.urlencode({"query": ONE_PERSON})
        scenarios = {
            "bare WSGI baseline": (base + "/", None, None),
            "reference: Flask + one sqlite3 lookup, nothing else": (
                floor_url + "/person/4242",
                None,
                None,
            ),
            "GET /person/{id}": (url + "/person/4242", key, None),
            "GET /people?limit=100": (url + "/people?limit=100", key, None),
            "POST /message": (
                url + "/message",
                key,
                lua_post(work / "message.lua", '{"person_id": "42", "content": "Hello from wrk"}'),
            ),
            "GraphQL GET one person": (one, key, None),
            "GraphQL POST nested (4,440 people)": (
                url + "/graphql",
                key,
                lua_post(work / "nested.lua", json.dumps({"query": NESTED})),
            ),
        }
        if args.only:
            scenarios = {
                name: spec
                for name, spec in scenarios.items()
                if args.only in name or name.startswith(("bare", "reference"))
            }
        results: dict[str, list[dict]] = {name: [] for name in scenarios}
        for number in range(1, args.rounds + 1):
            print(f"round {number}/{args.rounds}", flush=True)
            for name, (target, credential, script) in scenarios.items():
                results[name].append(
                    wrk(
                        target,
                        connections=args.connections,
                        duration=args.duration,
                        key=credential,
                        script=script,
                    )
                )
        single = {
            name: wrk(
                scenarios[name][0],
                connections=1,
                duration=args.duration,
                key=key,
                script=scenarios[name][2],
            )
            for name in ("GraphQL GET one person", "GraphQL POST nested (4,440 people)")
            if name in scenarios
        }
        rss = peak_rss_mib(server.pid)
    finally:
        for process in (server, baseline, floor):
            process.terminate()
            process.wait(30)

    base_rps = statistics.median(r["rps"] for r in results["bare WSGI baseline"])
    print()
    print(
        f"{args.rounds} rounds x {args.duration} s, wrk -t1 -c{args.connections}, "
        f"waitress threads={args.threads}; medians"
    )
    print()
    print("| scenario | req/s | ratio to baseline | p50 ms | p99 ms | non-2xx |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        rps = statistics.median(r["rps"] for r in runs)
        p50 = statistics.median(r["p50"] for r in runs)
        p99 = statistics.median(r["p99"] for r in runs)
        bad = sum(r["non2xx"] for r in runs)
        print(f"| {name} | {rps:,.0f} | {rps / base_rps:.2f} | {p50:.2f} | {p99:.2f} | {bad} |")
    if len(single) == 2:
        one_p50 = single["GraphQL GET one person"]["p50"]
        nested_p50 = single["GraphQL POST nested (4,440 people)"]["p50"]
        print()
        print(
            f"single client p50: one person {one_p50:.2f} ms, nested {nested_p50:.2f} ms "
            f"({nested_p50 / one_p50:.1f}x)"
        )
    print(f"SQL statements of the nested query: {statements}")
    print(f"peak RSS of the server: {rss:.1f} MiB")
    print(f"(work files in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
