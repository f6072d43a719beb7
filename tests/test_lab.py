"""`make lab` really starts JupyterLab: headless, on a free port, notebooks listed over its REST API."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@pytest.mark.slow
def test_make_lab_serves_the_notebooks(tmp_path):
    port, token = _free_port(), "course-test-token"
    args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token} --ServerApp.port_retries=0"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path))
    proc = subprocess.Popen(["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    base = f"http://127.0.0.1:{port}/api"
    try:
        listing, deadline = None, time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            try:
                listing = _get(f"{base}/contents/notebooks?token={token}")
                break
            except urllib.error.HTTPError:
                raise                      # the server answered, wrongly: fail now
            except OSError:
                time.sleep(1)              # not listening yet
        if listing is None:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"JupyterLab did not answer:\n{proc.communicate()[0][-3000:]}")
        served = {item["name"] for item in listing["content"]}
        expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
        assert expected <= served and "00_start_here.ipynb" in served
        specs = _get(f"{base}/kernelspecs?token={token}")
        assert "python3" in specs["kernelspecs"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
