"""Webhook delivery throughput: 1,000 events to a loopback receiver under serve --workers 2.

Usage: python bench/webhooks.py [--events 1000] [--workers 2]

A fresh SQLite database in a temporary directory gets a webhook (through the CLI) to a
receiver on 127.0.0.1 (http.server, threads, answering 204) and then EVENTS person.deleted
events written in one transaction through the store, so that every delivery is due when the
server starts. It then starts `people-service serve --workers N` on the database and prints
how long the receiver took, from the server's ready line to the last first delivery, and the
events a second; duplicates are counted too (there should be none).
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from people_service.store import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def receiver():
    seen, lock, done = [], threading.Lock(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                seen.append((self.headers["webhook-id"], time.perf_counter()))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen, done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    server, seen, _ = receiver()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    with tempfile.TemporaryDirectory() as directory:
        db = os.path.join(directory, "people.db")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("PEOPLE_SERVICE_")},
            "PEOPLE_SERVICE_WEBHOOK_ALLOW_PRIVATE": "true",
        }
        command = [sys.executable, "-m", "people_service.cli"]
        run = dict(env=env, cwd=ROOT, check=True, capture_output=True)
        subprocess.run([*command, "init-db", "--db", db], **run)
        subprocess.run([*command, "webhooks", "create", url, "--db", db], **run)
        store = open_store(db)
        with store.transaction():
            for n in range(args.events):
                store.insert_event("person.deleted", {"id": str(n + 1)})
        store.close()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
        serve = [*command, "serve", "--db", db, "--port", port, "--workers", str(args.workers)]
        log = open(os.path.join(directory, "serve.log"), "w+")
        process = subprocess.Popen(serve, env=env, cwd=ROOT, stderr=log, stdout=log, text=True)
        try:
            while not re.search(r"ready on http://", open(log.name).read()):
                if process.poll() is not None:
                    raise SystemExit(open(log.name).read())
                time.sleep(0.01)
            started = time.perf_counter()
            deadline = time.monotonic() + 120
            while len({event for event, _ in seen}) < args.events:
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {len(seen)} in 120 s\n" + open(log.name).read()[-3000:])
                time.sleep(0.01)
            last = max(at for _, at in seen)
        finally:
            process.terminate()
            process.wait(30)
    elapsed = last - started
    print(f"nproc {os.cpu_count()}; serve --workers {args.workers}; SQLite")
    print(
        f"{args.events} events delivered in {elapsed:.2f} s: {args.events / elapsed:.0f} events/s"
        f" ({len(seen) - args.events} duplicates)"
    )
    server.shutdown()


if __name__ == "__main__":
    main()
