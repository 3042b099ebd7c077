"""Logins under a password-guessing flood (SPEC 11b, docs/limits.md): real users' logins at the
default work factor while four addresses send wrong passwords as fast as they are answered.

Usage: python bench/logins.py [--rounds 8] [--threads 8]

Starts `people-service serve` on a fresh database in a temporary directory, creates four users
(PBKDF2-SHA256 600,000, the default), then runs two scenarios, each client from its own loopback
address (127.0.0.x, so every address has its own limits):
1. the four users log in at the same moment, twice: every status;
2. four guessers (127.0.0.2-5) post wrong passwords for the users' names, one after another;
   meanwhile the four users (127.0.0.6-9) log in together `--rounds` times: how many succeed,
   how many within 5 s, and the median time;
3. on a second server with the address budgets raised out of the way (SPEC 12b), 12
   connections from 127.0.3.1 send wrong passwords for 10 s; meanwhile GET /health from
   127.0.4.1 every 0.1 s and a real login from 127.0.5.1 every second: /health's median and
   worst latency, the real logins' times, and how fast the flood's extra logins are refused.
Loopback only; every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USERS = [f"user{n}" for n in range(4)]
PASSWORD = "correct horse battery staple {}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def login(port: int, source: str, username: str, password: str) -> tuple[int, float]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    try:
        body = json.dumps({"username": username, "password": password})
        conn.request("POST", "/auth/token", body, {"Content-Type": "application/json"})
        status = conn.getresponse().status
    except OSError:
        status = 0
    finally:
        conn.close()
    return status, time.perf_counter() - started


def together(port: int, sources: list[str]) -> list[tuple[int, float]]:
    results: list = [None] * len(USERS)

    def one(index: int) -> None:
        user = USERS[index]
        results[index] = login(port, sources[index], user, PASSWORD.format(index))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(USERS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def health(port: int, source: str) -> float:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    try:
        conn.request("GET", "/health")
        conn.getresponse().read()
    finally:
        conn.close()
    return time.perf_counter() - started


def one_address_flood(port: int) -> None:
    stop, flood = threading.Event(), []

    def attack() -> None:
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            flood.append(login(port, "127.0.3.1", USERS[0], "a wrong password guessed here"))

    attackers = [threading.Thread(target=attack, daemon=True) for _ in range(12)]
    for thread in attackers:
        thread.start()
    time.sleep(1)
    probes, real, ends = [], [], time.monotonic() + 9
    while time.monotonic() < ends:
        probes.append(health(port, "127.0.4.1"))
        if len(probes) % 10 == 0:
            real.append(login(port, "127.0.5.1", USERS[0], PASSWORD.format(0)))
        time.sleep(0.1)
    stop.set()
    for thread in attackers:
        thread.join(60)
    refused = sorted(took for status, took in flood if status == 429)
    answers = sorted({status for status, _ in flood})
    counted = ", ".join(f"{s}: {sum(1 for x, _ in flood if x == s)}" for s in answers)
    print(
        f"12 connections of one address for 10 s: /health median "
        f"{1000 * statistics.median(probes):.1f} ms, worst {1000 * max(probes):.1f} ms "
        f"({len(probes)} probes); real logins {[(s, round(t, 2)) for s, t in real]}; the "
        f"flood's answers: {counted}; a refused login's median "
        f"{1000 * statistics.median(refused):.1f} ms"
    )


def serve(cli: list, db: str, threads: int, env: dict) -> tuple[int, subprocess.Popen]:
    """`people-service serve` on a free port, once it accepts connections."""
    port = free_port()
    server = subprocess.Popen(
        [*cli, "serve", "--db", db, "--port", str(port), "--threads", str(threads)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return port, server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-logins-"))
    db = str(work / "people.db")
    env = {**os.environ, "PEOPLE_SERVICE_LOG_LEVEL": "WARNING"}
    cli = [sys.executable, "-m", "people_service.cli"]
    for index, user in enumerate(USERS):
        subprocess.run(
            [*cli, "users", "create", user, "--password-stdin", "--db", db],
            input=PASSWORD.format(index) + "\n",
            text=True,
            check=True,
            capture_output=True,
            env=env,
            cwd=ROOT,
        )
    port, server = serve(cli, db, args.threads, env)
    try:
        real = [f"127.0.0.{6 + n}" for n in range(4)]
        for attempt in (1, 2):
            statuses = [status for status, _ in together(port, real)]
            print(f"four users at the same moment, #{attempt}: {statuses}")
        stop, guesses = threading.Event(), []

        def guess(source: str) -> None:
            deadline = time.monotonic() + 600
            while not stop.is_set() and time.monotonic() < deadline:
                for user in USERS:
                    guesses.append(login(port, source, user, "a wrong password guessed here")[0])

        guessers = [
            threading.Thread(target=guess, args=(f"127.0.0.{2 + n}",), daemon=True)
            for n in range(4)
        ]
        for thread in guessers:
            thread.start()
        time.sleep(1)  # the guessers are under way
        outcomes = []
        for _ in range(args.rounds):
            outcomes += together(port, real)
        stop.set()
        for thread in guessers:
            thread.join(60)
        ok = [took for status, took in outcomes if status == 200]
        quick = [took for took in ok if took <= 5]
        print(
            f"under four guessers: {len(ok)} of {len(outcomes)} real logins succeed, "
            f"{len(quick)} within 5 s ({100 * len(quick) / len(outcomes):.0f} %), median "
            f"{statistics.median(took for _, took in outcomes):.2f} s; guessers' answers: "
            + ", ".join(f"{s}: {guesses.count(s)}" for s in sorted(set(guesses)))
        )
    finally:
        server.terminate()
        server.wait(30)
    budgets = {
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": "100000/minute",
        "PEOPLE_SERVICE_AUTH_RATE_LIMIT": "100000/minute",
    }
    port, server = serve(cli, db, args.threads, {**env, **budgets})
    try:
        one_address_flood(port)
    finally:
        server.terminate()
        server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
