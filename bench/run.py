"""Benchmark the real server against its peers in one interleaved wrk run, unpinned.

Usage: python bench/run.py [--rounds 5] [--duration 5] [--connections 16] [--threads 8]
                           [--warmup 1] [--only TEXT[,TEXT...]]

It prints the date, nproc and the CPU model, builds a fresh database through the CLI (`import`
of 10,000 people with 10 friends each, then `keys create` of a key with its own rate limit,
1000000000/minute, so that every request is charged) and starts these servers on 127.0.0.1,
each on its own free port, with the caller's PEOPLE_SERVICE_* variables removed:
- `people-service serve --threads N`: the service, one process, metrics on (the default);
- the same with PEOPLE_SERVICE_METRICS=false: what metrics cost (skipped, with the reason
  printed, where GET /metrics is absent or the setting does not switch it off);
- `people-service serve --workers 2 --threads N`;
- GUNICORN (below) on app.py, with the rate-limit storage left to the app, and again with
  PEOPLE_SERVICE_RATE_LIMIT_STORAGE=redis://127.0.0.1:6379 (skipped without gunicorn, or
  when no Redis answers there);
- bench/flask_floor.py: Flask + one sqlite3 lookup under waitress, N threads: the floor;
- bench/strawberry_floor.py: FastAPI + Strawberry answering the one-person query over the same
  sqlite3 file, under uvicorn (skipped unless fastapi, strawberry-graphql and uvicorn import).

Scenarios (wrk -t1, --connections, --duration seconds each):
- GET /person/{id} on serve, serve without metrics, serve --workers 2, gunicorn, gunicorn
  with Redis limits, and the Flask floor;
- GraphQL one person by GET on serve, and on the Strawberry peer;
- POST /message on serve.
Every answer is checked first (2xx; the service's answers equal the one-process server's,
with the rate-limit headers; the peers' data equal the service's). After a warm-up, each
round runs every scenario once, in a shuffled order, and waits for the loaded server to be
idle again. Nothing is pinned: the servers and wrk share the machine's cores, as in a
deployment with the load generator on the same host.

It prints per scenario the median req/s with the rounds' min-max, p50 and p99, and the cores
busy outside the benchmark meanwhile; then the issue's targets as ratios of medians, each with
the min-max of the per-round ratios (the two scenarios of a round ran minutes apart at most);
the p99 of the multi-process servers against one process's; metrics' share of a request
(1 - on / off); every process's peak RSS (VmHWM) and the listening sockets of the
multi-process servers (one per worker with SO_REUSEPORT). `--only` keeps the scenarios whose
name contains one of the texts (any case). On 2 cores the defaults take about five minutes,
--rounds 3 --duration 3 about two and a half. Needs wrk (apt-get install wrk).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PEOPLE, FRIENDS = 10_000, 10
# The deployment the README recommends for gunicorn (the workers and threads of serve's peer).
GUNICORN = "gunicorn -w 2 -k gthread --threads 8 --reuse-port app:app"
REDIS = "redis://127.0.0.1:6379"
SECRET = "bench-secret-0123456789-0123456789-012"
RATE_LIMIT = "1000000000/minute"  # a limit of its own, never reached
ONE_PERSON_QUERY = '{ person(id: "42") { name address { city } } }'
ONE_PERSON_PATH = "/graphql?" + urllib.parse.urlencode({"query": ONE_PERSON_QUERY})
MESSAGE_BODY = json.dumps({"person_id": "42", "content": "Hello from wrk"})

PERSON = "GET /person/{id}"
NO_METRICS = "GET /person/{id}, PEOPLE_SERVICE_METRICS=false"
WORKERS = "GET /person/{id}, serve --workers 2"
GUNICORN_SQLITE = "GET /person/{id}, gunicorn"
GUNICORN_REDIS = "GET /person/{id}, gunicorn, Redis limits"
FLOOR = "GET /person/{id}, Flask floor"
ONE_PERSON = "GraphQL GET one person"
STRAWBERRY = "GraphQL GET one person, FastAPI + Strawberry"
MESSAGE = "POST /message"
# (label, numerator, denominator, needed ratio); the ratios of req/s medians the issues ask for
TARGETS = [
    ("serve --workers 2 ÷ serve, GET /person/{id}", WORKERS, PERSON, 1.6),
    (f"`{GUNICORN}` ÷ serve", GUNICORN_SQLITE, PERSON, 1.6),
    ("the same, Redis limits, ÷ serve", GUNICORN_REDIS, PERSON, 1.4),
    ("GraphQL one person ÷ GET /person/{id}", ONE_PERSON, PERSON, 0.9),
    ("GraphQL one person ÷ FastAPI + Strawberry", ONE_PERSON, STRAWBERRY, 3.3),
    ("GET /person/{id} ÷ Flask floor", PERSON, FLOOR, 1.0),
    ("POST /message ÷ GET /person/{id}", MESSAGE, PERSON, 0.6),
    ("metrics on ÷ off, GET /person/{id} (share < 5 %)", PERSON, NO_METRICS, 0.95),
]
MULTI_PROCESS = (WORKERS, GUNICORN_SQLITE, GUNICORN_REDIS)  # p99 no worse than one process's
RSS_LIMIT_MIB = 80


@dataclass(frozen=True)
class Scenario:
    name: str
    server: str
    path: str
    body: str | None = None  # a JSON body: POST
    authenticated: bool = True


SCENARIOS = [
    Scenario(PERSON, "serve", "/person/4242"),
    Scenario(NO_METRICS, "serve-no-metrics", "/person/4242"),
    Scenario(WORKERS, "workers", "/person/4242"),
    Scenario(GUNICORN_SQLITE, "gunicorn", "/person/4242"),
    Scenario(GUNICORN_REDIS, "gunicorn-redis", "/person/4242"),
    Scenario(FLOOR, "flask-floor", "/person/4242", authenticated=False),
    Scenario(ONE_PERSON, "serve", ONE_PERSON_PATH),
    Scenario(STRAWBERRY, "strawberry", ONE_PERSON_PATH, authenticated=False),
    Scenario(MESSAGE, "serve", "/message", MESSAGE_BODY),
]


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict
    idle: str  # a cheap path: answered once started, and once a load is done
    port: int
    log: Path
    process: subprocess.Popen | None = None
    url: str = field(init=False)

    def __post_init__(self):
        self.url = f"http://127.0.0.1:{self.port}"

    def pids(self) -> list[int]:
        """The server's process and all its descendants (workers)."""
        found, todo = [], [self.process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as children:
                        todo += [int(child) for child in children.read().split()]
            except OSError:
                pass
        return found


def machine() -> str:
    """The date, the cores and the CPU model, for the record of a run."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line)
    except (OSError, StopIteration):
        pass
    now = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    cores = len(os.sched_getaffinity(0))  # what nproc says
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return f"{now}; nproc {cores}; {model}; Python {sys.version.split()[0]}; load {load}"


def code_measured() -> str:
    """Which people_service the servers import, and the commit of this checkout."""
    where = subprocess.run(
        [sys.executable, "-c", "import people_service; print(people_service.__file__)"],
        cwd="/",  # as the console script imports it: not from the current directory
        env=clean_environment(),
        capture_output=True,
        text=True,
    ).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    return f"people_service from {where or '?'}; {ROOT} at {commit or '?'}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def people_document() -> dict:
    """10,000 people; person i names i+1..i+5 (wrapping), so with the reverse links 10 each."""
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
                "friends": [str((i + k - 1) % PEOPLE + 1) for k in range(1, FRIENDS // 2 + 1)],
            }
        )
    return {"people": people}


def clean_environment(**settings: str) -> dict:
    """The caller's environment without its PEOPLE_SERVICE_* settings, plus `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEOPLE_SERVICE_")}
    return {**env, "PEOPLE_SERVICE_SECRET_KEY": SECRET, **settings}


def prepare_database(cli: list[str], db: Path, people: Path, env: dict, cwd: Path) -> list[str]:
    """Import `people` into a fresh `db` and create the keys (bench, then bench-admin with the
    admin scope), with commands every revision of the CLI has; returns the keys."""

    def run(*args: str) -> str:
        done = subprocess.run([*cli, *args], cwd=cwd, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"people-service {' '.join(args)} failed:\n{done.stderr}")
        return done.stdout

    run("import", "--db", str(db), str(people))
    keys = []
    for name, scopes in (("bench", "read,write"), ("bench-admin", "read,write,admin")):
        created = run(
            *("keys", "create", "--db", str(db), "--name", name, "--scopes", scopes),
            *("--rate-limit", RATE_LIMIT),
        )
        keys.append(created.strip().splitlines()[-1])  # alone on the last line
    return keys


def redis_answers(uri: str) -> bool:
    parts = urllib.parse.urlsplit(uri)
    try:
        with socket.create_connection((parts.hostname, parts.port or 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def tool(name: str) -> str | None:
    """A command of this Python's environment (the venv), else of PATH."""
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


def servers_for(names: set[str], db: Path, work: Path, threads: int) -> tuple[dict, dict]:
    """(name -> Server not started yet, name -> why it is skipped)."""
    service, gunicorn = tool("people-service"), tool("gunicorn")
    peers = ("fastapi", "strawberry", "uvicorn")
    skipped = {}
    if gunicorn is None:
        skipped["gunicorn"] = skipped["gunicorn-redis"] = "gunicorn is not installed"
    elif not redis_answers(REDIS):
        skipped["gunicorn-redis"] = f"no Redis answers at {REDIS}"
    if not all(importlib.util.find_spec(name) for name in peers):
        skipped["strawberry"] = "needs: pip install fastapi strawberry-graphql uvicorn"
    skipped = {name: reason for name, reason in skipped.items() if name in names}
    servers = {}
    for name in sorted(names - skipped.keys()):
        port = free_port()
        serve = [service, "serve", "--db", str(db), "--port", str(port), "--threads", str(threads)]
        env = clean_environment()
        idle = "/health"
        if name == "serve":
            command = serve
        elif name == "serve-no-metrics":
            command, env["PEOPLE_SERVICE_METRICS"] = serve, "false"
        elif name == "workers":
            command = [*serve, "--workers", "2"]
        elif name.startswith("gunicorn"):
            command = [gunicorn, *shlex.split(GUNICORN)[1:], "--bind", f"127.0.0.1:{port}"]
            env["PEOPLE_SERVICE_DATABASE"] = str(db)
            if name == "gunicorn-redis":
                env["PEOPLE_SERVICE_RATE_LIMIT_STORAGE"] = REDIS
        elif name == "flask-floor":
            command = [sys.executable, str(BENCH / "flask_floor.py"), str(port), str(threads)]
            command.append(str(db))
            idle = "/person/1"
        else:
            command = [sys.executable, str(BENCH / "strawberry_floor.py"), str(port), str(db)]
        servers[name] = Server(name, command, env, idle, port, work / f"{name}.log")
    return servers, skipped


def start(server: Server) -> None:
    server.process = subprocess.Popen(
        server.command,
        cwd=ROOT,  # app.py, for gunicorn
        env=server.env,
        stdout=subprocess.DEVNULL,
        stderr=open(server.log, "w"),
        start_new_session=True,  # its workers are stopped with it
    )


def wait_ready(server: Server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = server.log.read_text()[-1500:]
            raise RuntimeError(f"{server.name} exited at start; see {server.log}:\n{tail}")
        try:
            urllib.request.urlopen(server.url + server.idle, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{server.name} did not answer in {timeout:.0f} s; see {server.log}")


def settle(server: Server) -> None:
    """Wait until the server has finished what the last load left queued."""
    try:
        urllib.request.urlopen(server.url + server.idle, timeout=60).read()
    except OSError:
        pass


def stop(servers: dict) -> None:
    """SIGTERM to each server's process group (its workers too), SIGKILL to what is left."""

    def signal_group(server: Server, number: int) -> None:
        try:
            os.killpg(server.process.pid, number)
        except ProcessLookupError:
            pass

    started = [server for server in servers.values() if server.process]
    for server in started:
        signal_group(server, signal.SIGTERM)
    for server in started:
        try:
            server.process.wait(30)
        except subprocess.TimeoutExpired:
            pass
        signal_group(server, signal.SIGKILL)
        server.process.wait()


def listening_sockets(port: int) -> int:
    """Sockets listening on `port` (several: one per worker, SO_REUSEPORT)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":  # 0A: LISTEN
                count += 1
    return count


def peak_rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# -- the load of other processes ---------------------------------------------------------------

HZ = os.sysconf("SC_CLK_TCK")


def machine_ticks() -> int:
    """Clock ticks the CPUs spent on anything: user, nice, system, and steal (time the
    hypervisor gave to other machines)."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _io, _irq, _soft, steal = map(int, stat.readline().split()[1:9])
    return user + nice + system + steal


def process_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime


def our_ticks(servers: dict) -> int:
    """Ticks of the servers' processes, this process and its reaped children (wrk)."""
    times = os.times()
    ours = round((times.user + times.system + times.children_user + times.children_system) * HZ)
    return ours + sum(process_ticks(pid) for s in servers.values() for pid in s.pids())


# -- checking answers --------------------------------------------------------------------------

APP_HEADERS = ("Content-Type", "ETag", "Cache-Control", "X-RateLimit-Limit")


def ask(url: str, scenario: Scenario, key: str, always: bool = False):
    """(status, headers, body) of the scenario's request; the key only when it is
    authenticated, or `always`."""
    headers = {"X-API-Key": key} if scenario.authenticated or always else {}
    data = None
    if scenario.body is not None:
        data = scenario.body.encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url + scenario.path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def check_answers(scenarios: list[Scenario], servers: dict, key: str) -> None:
    """Every scenario answers 2xx, the service's with the rate-limit headers; on another server
    as serve answers the same request (the floors: the same data). Raises otherwise."""
    for scenario in scenarios:
        status, headers, body = ask(servers[scenario.server].url, scenario, key)
        if not 200 <= status < 300:
            raise RuntimeError(f"{scenario.name}: status {status}: {body[:300]!r}")
        if scenario.authenticated and "X-RateLimit-Limit" not in headers:
            raise RuntimeError(f"{scenario.name}: no rate-limit header: is the key limited?")
        if scenario.server == "serve":
            continue
        _, expected_headers, expected = ask(servers["serve"].url, scenario, key, always=True)
        got, want = json.loads(body), json.loads(expected)
        if scenario.server == "strawberry":
            got, want = got.get("data"), want["data"]
        elif scenario.server == "flask-floor":
            got, want = (got["id"], got["name"]), (want["id"], want["name"])
        else:
            got = (got, {name: headers.get(name) for name in APP_HEADERS})
            want = (want, {name: expected_headers.get(name) for name in APP_HEADERS})
        if got != want:
            raise RuntimeError(f"{scenario.name}: answers\n  {got}\nwhere serve answers\n  {want}")


def metrics_missing(servers: dict, admin_key: str) -> str | None:
    """Why the metrics on/off pair cannot be measured, or None when it can."""

    def status(server: Server) -> int:
        request = urllib.request.Request(server.url + "/metrics", headers={"X-API-Key": admin_key})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    on = status(servers["serve"])
    if on != 200:
        return f"GET /metrics answers {on} on serve: this code has no metrics"
    if status(servers["serve-no-metrics"]) == 200:
        return "GET /metrics still answers with PEOPLE_SERVICE_METRICS=false: no such switch"
    return None


# -- wrk ---------------------------------------------------------------------------------------

UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def lua_post(path: Path, body: str) -> Path:
    path.write_text(
        f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    return path


def wrk(url: str, *, connections: int, duration: int, key: str | None, script: Path | None):
    command = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "30s", "--latency"]
    if key:
        command += ["-H", f"X-API-Key: {key}"]
    if script:
        command += ["-s", str(script)]
    output = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    latency = {}
    for percent in ("50", "99"):
        # wrk pads seconds with a space: "   50%    2.01s "
        found = re.search(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s|m)\s*$", output, re.M)
        if found is None:
            raise RuntimeError(f"no {percent}% latency in wrk's output for {url}:\n{output}")
        latency[percent] = float(found.group(1)) * UNITS[found.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket_errors = re.search(r"Socket errors: (.*)", output)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": latency["50"],
        "p99": latency["99"],
        "non2xx": int(errors.group(1)) if errors else 0,
        "socket_errors": socket_errors.group(1) if socket_errors else "",
    }


# -- the report --------------------------------------------------------------------------------


def median(runs: list[dict], name: str) -> float:
    return statistics.median(run[name] for run in runs)


def print_report(args, scenarios, results, skipped, rss, sockets) -> None:
    print()
    print(
        f"{args.rounds} rounds x {args.duration} s, wrk -t1 -c{args.connections}, "
        f"{args.threads} threads per serve process and floor, unpinned, interleaved; "
        "medians, with the rounds' min-max; others: cores busy outside the benchmark"
    )
    print()
    print("| scenario | req/s | min-max | p50 ms | p99 ms | errors | others |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for scenario in scenarios:
        runs = results[scenario.name]
        rps = [run["rps"] for run in runs]
        errors = "; ".join(
            [str(sum(run["non2xx"] for run in runs))]
            + [run["socket_errors"] for run in runs if run["socket_errors"]]
        )
        print(
            f"| {scenario.name} | {statistics.median(rps):,.0f} | {min(rps):,.0f}-{max(rps):,.0f}"
            f" | {median(runs, 'p50'):.2f} | {median(runs, 'p99'):.2f} | {errors} "
            f"| {median(runs, 'others'):.2f} |"
        )
    for name, reason in skipped.items():
        print(f"- skipped {name}: {reason}")

    print()
    print("Targets: ratios of the medians above; min-max of the same ratio within each round")
    print()
    print("| target | ratio | min-max | needed | met |")
    print("|---|---:|---:|---:|---|")
    for label, top, bottom, needed in TARGETS:
        if top not in results or bottom not in results:
            print(f"| {label} | - | - | ≥ {needed} | not measured |")
            continue
        value = median(results[top], "rps") / median(results[bottom], "rps")
        paired = [a["rps"] / b["rps"] for a, b in zip(results[top], results[bottom], strict=True)]
        met = "met" if value >= needed else "NOT met"
        print(
            f"| {label} | {value:.2f} | {min(paired):.2f}-{max(paired):.2f} | ≥ {needed} | {met} |"
        )
    if PERSON in results:
        one = median(results[PERSON], "p99")
        for name in MULTI_PROCESS:
            if name in results:
                p99 = median(results[name], "p99")
                met = "met" if p99 <= one else "NOT met"
                print(f"| p99 of {name} ≤ serve's | {p99:.2f} ms | | ≤ {one:.2f} ms | {met} |")
    if rss:
        worst = max(rss.values())
        met = "met" if worst <= RSS_LIMIT_MIB else "NOT met"
        print(f"| peak RSS per process, largest | {worst:.1f} MiB | | ≤ {RSS_LIMIT_MIB} | {met} |")
    if PERSON in results and NO_METRICS in results:
        on, off = median(results[PERSON], "rps"), median(results[NO_METRICS], "rps")
        print()
        print(f"Metrics' share of GET /person/{{id}} (1 - on / off): {1 - on / off:.1%}")
    print()
    print("Peak RSS (VmHWM), MiB: " + ", ".join(f"{n} {mib:.1f}" for n, mib in rss.items()))
    print("Listening sockets: " + ", ".join(f"{n} {count}" for n, count in sockets.items()))
    if sockets.get("workers", 2) < 2:
        print("(serve --workers 2 shares one socket: its workers have no SO_REUSEPORT socket each)")
    print()
    print("Per round, req/s:")
    for scenario in scenarios:
        rounds = "  ".join(f"{run['rps']:,.0f}" for run in results[scenario.name])
        print(f"- {scenario.name}: {rounds}")


def main() -> int:
    # a SIGTERM (timeout, kill) still stops the servers, in the finally below
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--warmup", type=int, default=1, help="seconds per scenario, first")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--threads", type=int, default=8, help="per serve process and the Flask floor"
    )
    parser.add_argument("--only", help="comma-separated texts: the scenarios whose name has one")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        parser.error("needs wrk (apt-get install wrk)")

    scenarios = SCENARIOS
    if args.only:
        texts = [text.strip().lower() for text in args.only.split(",") if text.strip()]
        scenarios = [s for s in scenarios if any(text in s.name.lower() for text in texts)]
    started = time.monotonic()
    print(machine(), flush=True)
    print(code_measured(), flush=True)
    work = Path(tempfile.mkdtemp(prefix="people-bench-"))
    db, people = work / "people.db", work / "people.json"
    people.write_text(json.dumps(people_document()))
    print(f"importing {PEOPLE} people, {FRIENDS} friends each ...", flush=True)
    key, admin_key = prepare_database(
        [tool("people-service")], db, people, clean_environment(), ROOT
    )
    needed = {s.server for s in scenarios} | {"serve"}
    servers, skipped = servers_for(needed, db, work, args.threads)
    results: dict[str, list[dict]] = {}
    rss: dict[str, float] = {}
    sockets: dict[str, int] = {}
    try:
        for server in servers.values():
            start(server)
        for name, server in list(servers.items()):
            try:
                wait_ready(server)
            except RuntimeError as error:
                if name == "serve":
                    raise
                skipped[name] = f"did not start: {error}"
                stop({name: servers.pop(name)})
        if "serve-no-metrics" in servers:
            reason = metrics_missing(servers, admin_key)
            if reason:
                skipped["serve-no-metrics"] = reason
                stop({"serve-no-metrics": servers.pop("serve-no-metrics")})
        for name, reason in skipped.items():
            print(f"skipped {name}: {reason}", flush=True)
        scenarios = [s for s in scenarios if s.server not in skipped]
        check_answers(scenarios, servers, key)
        print(f"{len(scenarios)} scenarios answer correctly", flush=True)

        scripts = {
            s.name: lua_post(work / f"post-{n}.lua", s.body)
            for n, s in enumerate(scenarios)
            if s.body is not None
        }

        def load(scenario: Scenario, duration: int) -> dict:
            server = servers[scenario.server]
            ticks, ours, clock = machine_ticks(), our_ticks(servers), time.monotonic()
            result = wrk(
                server.url + scenario.path,
                connections=args.connections,
                duration=duration,
                key=key if scenario.authenticated else None,
                script=scripts.get(scenario.name),
            )
            settle(server)
            others = (machine_ticks() - ticks) - (our_ticks(servers) - ours)
            return {**result, "others": max(0, others) / HZ / (time.monotonic() - clock)}

        if args.warmup:
            print(f"warm-up: {args.warmup} s per scenario", flush=True)
            for scenario in scenarios:
                load(scenario, args.warmup)
        results = {s.name: [] for s in scenarios}
        for number in range(1, args.rounds + 1):
            print(f"round {number}/{args.rounds}", flush=True)
            order = list(scenarios)
            random.Random(number).shuffle(order)  # no scenario always follows the same one
            for scenario in order:
                results[scenario.name].append(load(scenario, args.duration))
        for name, server in servers.items():
            if server.process.poll() is not None:
                raise RuntimeError(f"{name} stopped during the run; see {server.log}")
            if name in ("flask-floor", "strawberry"):
                continue
            pids = server.pids()
            for index, pid in enumerate(pids):
                label = name if len(pids) == 1 else f"{name} {'parent' if not index else index}"
                rss[label] = peak_rss_mib(pid)
            if name in ("workers", "gunicorn", "gunicorn-redis"):
                sockets[name] = listening_sockets(server.port)
    except BaseException:
        print(f"(stopped: the servers' logs are in {work})", file=sys.stderr)
        raise
    finally:
        stop(servers)

    print_report(args, scenarios, results, skipped, rss, sockets)
    print()
    print(f"{machine()}; took {time.monotonic() - started:.0f} s")
    if args.keep:
        (work / "results.json").write_text(json.dumps(results, indent=1))
        print(f"work files (database, server logs, results.json) in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
