"""Soak: a fixed, mixed workload from several threads against the real server (long: slow)."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid

import pytest
import requests

from .conftest import GENEROUS, ServerProcess, cli, database

THREADS = 6
WARM_UP = 0.2  # the share of the workload after which the baseline RSS is taken


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def seed(tmp_path, count):
    """A database of `count` people (the long run: larger than SQLite's page caches, so warm-up
    fills them)."""
    people = [
        {
            "id": str(i),
            "name": f"Seed {i}",
            "age": i % 100,
            "email": f"seed{i}@example.org",
            "address": {
                "street": f"{i} Long Street",
                "city": f"City {i % 50}",
                "country": "Norway",
            },
            "friends": [str((i + k) % count + 1) for k in (1, 2, 3)],
        }
        for i in range(1, count + 1)
    ]
    source = tmp_path / "seed.json"
    source.write_text(json.dumps({"people": people}))
    db = database(tmp_path)
    assert cli("import", str(source), db=db).returncode == 0
    key = cli(
        "keys", "create", "--name", "soak", "--rate-limit", "100000000/minute", db=db
    ).stdout.split()[-1]
    return db, key


@pytest.mark.slow
def test_soak_mixed_load_no_5xx_nothing_lost_no_leak(tmp_path):
    """About three minutes on a 2-core machine: memory after warm-up stays flat."""
    soak(tmp_path, people=5000, per_thread=15_000, leak_check=True)


def test_a_short_soak_answers_no_5xx_and_loses_nothing(tmp_path):
    """The same workload, short enough for every run (no leak check: too few requests)."""
    soak(tmp_path, people=200, per_thread=50, leak_check=False)


def soak(tmp_path, people, per_thread, leak_check):
    db, key = seed(tmp_path, people)
    server = ServerProcess(db, env={"PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS}).start()
    headers = {"X-API-Key": key}
    nested = "{ people(limit: 10) { name friends(limit: 5) { name address { city } } } }"
    statuses: dict[int, int] = {}
    people_made: list[tuple[str, str]] = []
    messages_made: list[tuple[str, str]] = []
    lock = threading.Lock()
    progress = [0]
    baseline = {}

    def work(index: int):
        rng = random.Random(index)
        session = requests.Session()
        session.headers.update(headers)
        url = server.url
        for n in range(per_thread):
            kind = n % 10
            if kind < 3:
                response = session.get(f"{url}/person/{rng.randint(1, people)}")
            elif kind == 3:
                response = session.get(
                    f"{url}/people", params={"limit": 50, "offset": rng.randint(0, people)}
                )
            elif kind == 4:
                name = f"soak-{index}-{n}-{uuid.uuid4().hex[:6]}"
                response = session.post(f"{url}/person", json={"name": name, "age": n % 150})
                if response.status_code == 201:
                    with lock:
                        people_made.append((response.json()["id"], name))
            elif kind == 5:
                content = f"m-{index}-{n}"
                target = str(rng.randint(1, 50))
                response = session.post(
                    f"{url}/message", json={"person_id": target, "content": content}
                )
                if response.status_code == 201:
                    with lock:
                        messages_made.append((response.json()["id"], content))
            elif kind == 6:
                response = session.post(f"{url}/graphql", json={"query": nested})
            elif kind == 7:
                query = (
                    f'{{ person(id: "{rng.randint(1, people)}") {{ name friends {{ name }} }} }}'
                )
                response = session.get(f"{url}/graphql", params={"query": query})
            elif kind == 8:
                response = session.patch(
                    f"{url}/person/{rng.randint(1, 50)}", json={"age": rng.randint(0, 150)}
                )
            else:  # bad requests of every kind
                bad = n // 10 % 4
                if bad == 0:
                    response = session.post(
                        f"{url}/person",
                        data="{not json",
                        headers={"Content-Type": "application/json"},
                    )
                elif bad == 1:
                    response = session.get(f"{url}/people", params={"limit": "-1"})
                elif bad == 2:
                    response = session.get(f"{url}/person/99999999999999999999")
                else:
                    response = session.post(
                        f"{url}/graphql", json={"query": "{ person(id: 1) { nope } }"}
                    )
            with lock:
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                progress[0] += 1
                if progress[0] == int(THREADS * per_thread * WARM_UP):
                    baseline["rss"] = rss_kib(server.process.pid)
                    baseline["time"] = time.monotonic()

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(1800)
        final_rss = rss_kib(server.process.pid)
        elapsed = time.monotonic() - started
        print(
            f"\nsoak: {progress[0]} requests in {elapsed:.0f} s; statuses {statuses}; "
            f"RSS {baseline['rss']} KiB after warm-up, {final_rss} KiB at the end"
        )
        assert progress[0] == THREADS * per_thread
        assert not [status for status in statuses if status >= 500], statuses
        assert not leak_check or final_rss <= baseline["rss"] * 1.2, (baseline, final_rss)
        for person_id, name in people_made:
            response = requests.get(f"{server.url}/person/{person_id}", headers=headers, timeout=10)
            assert response.status_code == 200 and response.json()["name"] == name
        for message_id, content in messages_made:
            response = requests.get(
                f"{server.url}/message/{message_id}", headers=headers, timeout=10
            )
            assert response.json()["content"] == content
        # the lines around a traceback, not the whole log: CI shows only a failure's tail
        found = [i for i, line in enumerate(server.stderr) if "Traceback" in line]
        assert not found, "\n".join(server.stderr[max(0, found[0] - 5) : found[0] + 40])
    finally:
        assert server.stop() == 0
