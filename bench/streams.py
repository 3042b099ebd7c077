"""What open event streams cost ordinary requests: GET /person/{id} with none and with four open.

Usage: python bench/streams.py [--rounds 3] [--duration 5] [--connections 16] [--threads 8]

Builds the database bench/run.py builds (10,000 people, a key with its own huge limit), starts
`people-service serve --threads N` (so EVENT_STREAMS is N/2: four with the default 8 threads),
and runs wrk on GET /person/{id}: alternately with no stream open and with four streams open
(each read by a thread of this script, as a dashboard would; no events are written, so each
stream costs its heartbeat and the process's once-a-second query). Prints the median req/s of
each and the loss; the issue's target is at most 5 %.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as harness  # noqa: E402  (bench/run.py: the database, the servers, wrk)

STREAMS = 4


def open_streams(port: int, key: str, count: int) -> tuple[list, threading.Event]:
    """`count` streams, each read by a thread; waits for slots that streams of an earlier
    round still hold (a stream whose client left ends at its next heartbeat)."""
    stop = threading.Event()
    conns = []
    while len(conns) < count:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/events", headers={"X-API-Key": key, "Accept": "text/event-stream"})
        response = conn.getresponse()
        if response.status == 503:
            conn.close()
            time.sleep(0.5)
            continue
        assert response.status == 200, response.status
        threading.Thread(target=read, args=(response, stop), daemon=True).start()
        conns.append(conn)
    return conns, stop


def read(response, stop: threading.Event) -> None:
    while not stop.is_set() and response.read1(4096):
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as work:
        work = Path(work)
        people, db = work / "people.json", work / "bench.db"
        people.write_text(json.dumps(harness.people_document()))
        env = harness.clean_environment()
        cli = [sys.executable, "-m", "people_service.cli"]
        key, _ = harness.prepare_database(cli, db, people, env, harness.ROOT)
        servers, _ = harness.servers_for({"serve"}, db, work, args.threads)
        server = servers["serve"]
        harness.start(server)
        try:
            harness.wait_ready(server)
            url = f"http://127.0.0.1:{server.port}/person/17"
            run = dict(connections=args.connections, duration=args.duration, key=key, script=None)
            harness.wrk(url, **{**run, "duration": 1})  # warm-up
            plain, streamed = [], []
            for _ in range(args.rounds):
                plain.append(harness.wrk(url, **run)["rps"])
                conns, stop = open_streams(server.port, key, STREAMS)
                try:
                    streamed.append(harness.wrk(url, **run)["rps"])
                finally:
                    stop.set()
                    for conn in conns:
                        conn.close()
        finally:
            harness.stop(servers)
    base, loaded = statistics.median(plain), statistics.median(streamed)
    print(f"GET /person/{{id}}, no stream:     {base:8.0f} req/s  rounds {plain}")
    print(f"GET /person/{{id}}, {STREAMS} streams open: {loaded:8.0f} req/s  rounds {streamed}")
    print(f"loss: {100 * (1 - loaded / base):.1f} % (target: at most 5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
