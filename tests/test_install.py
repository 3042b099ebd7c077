"""A normal install: the wheel, in a fresh environment, starts on an empty database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile

import requests

from .conftest import ROOT, SECRET, free_port


def build_wheel(out) -> str:
    """The project's wheel, built offline from this checkout."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = out.glob("people_service-*.whl")
    return str(wheel)


def fresh_environment(path):
    """A new venv whose only package of ours is what gets installed into it; the libraries
    come from this environment's site-packages through a .pth file (offline, fast)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=60
    )
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # a plain directory line: the directory's own .pth files (our editable install) stay out
    (path / purelib / "libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_wheel_in_a_fresh_venv_serves_the_demo_on_an_empty_database(
    tmp_path, sqlite_only, spawn
):
    wheel = build_wheel(tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    assert "people_service/demo.json" in names
    assert "people_service/graphql/schema.graphql" in names

    python = fresh_environment(tmp_path / "venv")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PEOPLE_SERVICE_", "PYTHON", "VIRTUAL_ENV"))
    }
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    where = subprocess.run(
        [str(python), "-c", "import people_service; print(people_service.__file__)"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert where.startswith(str(tmp_path / "venv")), where

    empty = tmp_path / "empty"
    empty.mkdir()
    port = free_port()
    server = spawn(
        [str(tmp_path / "venv" / "bin" / "people-service"), "serve", "--port", str(port)],
        cwd=empty,  # the default database, data/people.db, is created here
        env={**env, "PEOPLE_SERVICE_SECRET_KEY": SECRET},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        key = None
        while key is None:
            assert time.monotonic() < deadline, "no demo key printed"
            assert server.poll() is None, server.stderr.read()
            line = server.stdout.readline()
            if re.match(r"ps_\S+$", line.strip()):
                key = line.strip()
        while True:
            try:
                response = requests.get(
                    f"http://127.0.0.1:{port}/people", headers={"X-API-Key": key}, timeout=5
                )
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.1)
        assert response.status_code == 200
        assert int(response.headers["X-Total-Count"]) >= 50
        assert (empty / "data" / "people.db").exists()
    finally:
        server.terminate()
        server.communicate(timeout=20)
    assert server.returncode == 0
