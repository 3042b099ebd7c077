"""End to end: the real server (waitress, started as the README says) over HTTP on loopback."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import requests

from .conftest import ROOT, ServerProcess, cli, database, free_port


def test_first_start_loads_the_demo_and_prints_a_working_key(live):
    assert live.key.startswith("ps_")
    assert any("Loaded the demo data" in line for line in live.stdout)
    response = live.request("GET", "/people", headers=live.headers)
    assert response.status_code == 200
    assert int(response.headers["X-Total-Count"]) >= 50
    assert response.headers["Server"] == "people-service"
    assert live.request("GET", "/health").json() == {"status": "ok", "database": "ok"}


def test_a_second_start_keeps_the_data_and_prints_no_new_key(tmp_path):
    server = ServerProcess(database(tmp_path)).start()
    key = server.wait_for_output(lambda line: line.startswith("ps_"))
    assert server.stop() == 0
    again = ServerProcess(database(tmp_path)).start()
    try:
        time.sleep(0.3)
        assert not any(line.startswith("ps_") for line in again.stdout)
        response = again.request("GET", "/people?limit=1", headers={"X-API-Key": key})
        assert response.status_code == 200
    finally:
        assert again.stop() == 0


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_examples() -> list[tuple[str, ...]]:
    """The examples a reader copies, in reading order (README.md, then docs/*.md).

    ```sh blocks are ("sh", script); each `$ curl ...` of a ```console block, with the lines
    shown below it, is ("curl", command, output). Other console commands are not run here.
    """
    examples = []
    for path in DOCUMENTS:
        for kind, body in re.findall(r"```(sh|console)\n(.*?)```", path.read_text(), flags=re.S):
            if kind == "sh":
                examples.append(("sh", body))
                continue
            for command in re.split(r"^(?=\$ )", body, flags=re.M):
                if not command.startswith("$ curl "):
                    continue
                lines = command[2:].splitlines()
                end = next(i for i, line in enumerate(lines) if not line.endswith("\\"))
                examples.append(("curl", "\n".join(lines[: end + 1]), "\n".join(lines[end + 1 :])))
    return examples


def test_documented_curl_examples_work_as_written(live, tmp_path):
    """Every curl example of the README and docs/ runs, in reading order, and prints what the
    text shows where it shows an answer."""
    examples = documented_examples()
    assert sum(example[1].count("curl ") for example in examples) >= 25
    assert sum(kind == "curl" for kind, *_ in examples) >= 3
    created = cli(
        "users",
        "create",
        "ada",
        "--password-stdin",
        db=live.db,
        input="correct horse battery staple\n",
    )
    assert created.returncode == 0, created.stderr
    port = live.url.rsplit(":", 1)[1]
    # a script fails at its first error; sh blocks' curl also fails on any HTTP error status,
    # while a shown answer may be an error document; a stream (-N) is read for 3 seconds
    stream = 'if [[ " $* " == *" -N "* ]]; then command curl {0} --max-time 3 "$@" || [ $? = 28 ]; '
    prelude = {
        kind: f"set -euo pipefail\ncurl() {{ {stream.format(flags)}"
        f'else command curl {flags} "$@"; fi; }}\n'
        for kind, flags in (("sh", "-fsS"), ("curl", "-sS"))
    }
    clone, scratch = tmp_path / "clone", tmp_path / "tmp"
    clone.mkdir()
    scratch.mkdir()
    for kind, script, *shown in examples:
        script = prelude[kind] + script.replace("http://127.0.0.1:8080", f"http://127.0.0.1:{port}")
        script = script.replace(" /tmp/", f" {scratch}/")  # the test's own /tmp
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=clone,
            env={**os.environ, "KEY": live.key},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (script, result.stdout[-2000:], result.stderr[-2000:])
        if kind == "sh":
            assert "errors" not in result.stdout, (script, result.stdout[-2000:])
        else:
            assert result.stdout.rstrip("\n") == shown[0], script
    # a reader runs them in the clone: they used to leave an untracked openapi.json there
    assert list(clone.iterdir()) == []
    assert (scratch / "openapi.json").exists()


def test_concurrent_writers_lose_nothing(live):
    """8 threads writing people and messages at once: every write 201, none lost, none twice."""
    run = uuid.uuid4().hex[:8]
    per_thread = 25
    results: list[tuple[str, int, dict]] = []
    lock = threading.Lock()
    target = live.request("POST", "/person", json={"name": f"target-{run}"}, headers=live.headers)
    target_id = target.json()["id"]

    def writer(index: int):
        session = requests.Session()
        for n in range(per_thread):
            person = session.post(
                live.url + "/person",
                json={"name": f"w-{run}-{index}-{n}"},
                headers=live.headers,
                timeout=30,
            )
            message = session.post(
                live.url + "/message",
                json={"person_id": target_id, "content": f"m-{run}-{index}-{n}"},
                headers=live.headers,
                timeout=30,
            )
            with lock:
                results.append(("person", person.status_code, person.json()))
                results.append(("message", message.status_code, message.json()))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(results) == 8 * per_thread * 2
    assert all(status == 201 for _, status, _ in results), [r for r in results if r[1] != 201][:3]
    listed = live.request("GET", f"/people?name=w-{run}-&limit=1000", headers=live.headers).json()
    assert sorted(p["name"] for p in listed) == sorted(
        f"w-{run}-{i}-{n}" for i in range(8) for n in range(per_thread)
    )
    messages = live.request(
        "GET", f"/person/{target_id}/messages?limit=1000", headers=live.headers
    ).json()
    assert sorted(m["content"] for m in messages) == sorted(
        f"m-{run}-{i}-{n}" for i in range(8) for n in range(per_thread)
    )
    log = "\n".join(live.stderr)
    assert "locked" not in log and "Traceback" not in log


def test_access_log_names_request_caller_and_timing(live):
    live.request(
        "GET", "/people?limit=1", headers={**live.headers, "X-Request-ID": "e2e-log-check"}
    )
    deadline = time.monotonic() + 5
    pattern = re.compile(r"\S+ e2e-log-check demo GET /people\?limit=1 200 \d+\.\dms$")
    while time.monotonic() < deadline and not any(pattern.search(line) for line in live.stderr):
        time.sleep(0.05)
    assert any(pattern.search(line) for line in live.stderr)
    assert not any(live.key in line for line in live.stderr)


def test_server_stays_up_through_garbage(live):
    host, port = "127.0.0.1", int(live.url.rsplit(":", 1)[1])
    for payload in (
        b"\x00\xff garbage\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"POST /person HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    ):
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(payload)
            try:
                sock.recv(4096)
            except OSError:
                pass
    assert live.request("GET", "/health").status_code == 200


def test_sigterm_stops_cleanly_with_status_0(tmp_path):
    server = ServerProcess(database(tmp_path)).start()
    key = server.wait_for_output(lambda line: line.startswith("ps_"))
    assert server.request("GET", "/people", headers={"X-API-Key": key}).status_code == 200
    assert server.stop(signal.SIGTERM) == 0
    assert "people-service stopped" in "\n".join(server.stderr)


def test_python_app_py_serves_the_same_app(tmp_path, spawn):
    env = {**os.environ, "PEOPLE_SERVICE_DATABASE": database(tmp_path)}
    port = free_port()
    process = spawn(
        [sys.executable, "app.py", "--port", str(port), "--demo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:  # refused, or slow to answer under load
                time.sleep(0.1)
        else:
            raise AssertionError("python app.py did not answer")
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert out.strip().splitlines()[-1].startswith("ps_")


def test_if_none_match_on_a_write_is_a_precondition_too(live):
    """`If-None-Match: *` is HTTP's "do not overwrite": a write under it, or under the ETag the
    person has now, must be refused with 412 and change nothing (RFC 9110 13.1.2)."""
    made = live.request("POST", "/person", json={"name": "Kept", "age": 7}, headers=live.headers)
    path = f"/person/{made.json()['id']}"
    etag = made.headers["ETag"]
    for method, body, condition in (
        ("PUT", {"name": "Overwritten"}, "*"),
        ("PATCH", {"age": 8}, "*"),
        ("POST", {"age": 8}, etag),
        ("PATCH", {"age": 8}, f"W/{etag}"),
        ("DELETE", None, "*"),
    ):
        headers = {**live.headers, "If-None-Match": condition}
        response = live.request(method, path, json=body, headers=headers)
        assert response.status_code == 412, (method, condition, response.text)
        assert response.headers["Content-Type"] == "application/problem+json"
    kept = live.request("GET", path, headers=live.headers)
    assert kept.json()["name"] == "Kept" and kept.json()["age"] == 7
    other = {**live.headers, "If-None-Match": '"another-version"'}
    assert live.request("PATCH", path, json={"age": 9}, headers=other).status_code == 200
