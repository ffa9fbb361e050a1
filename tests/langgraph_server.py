"""Test helper: a real ``langgraph dev`` serving the repository's ``langgraph.json`` from a
work directory of the test's (absolute graph paths, so the server's state stays there),
stopped with everything it started (its process group) however the test ends."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = json.loads((ROOT / "langgraph.json").read_text())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def _wait_until_ready(server: subprocess.Popen[bytes], url: str, log: Path) -> None:
    import httpx

    deadline = time.monotonic() + 180
    while True:
        assert server.poll() is None, log.read_text(errors="replace")[-3000:]
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "langgraph dev did not answer /ok in 180 s"
        time.sleep(0.5)


@contextmanager
def langgraph_dev(workdir: Path, env: Mapping[str, str]) -> Iterator[tuple[str, Path]]:
    """(base URL, server log) of ``langgraph dev`` run in ``workdir`` with ``env`` added to
    the process environment and langgraph.json's own."""
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        pytest.skip(
            "langgraph-cli is not installed (pip install 'rag-complexity-agents[langgraph]')"
        )
    spec = {
        **SPEC,
        "dependencies": [str(ROOT)],
        "graphs": {name: str(ROOT / p.removeprefix("./")) for name, p in SPEC["graphs"].items()},
    }
    (workdir / "langgraph.json").write_text(json.dumps(spec))
    port = free_port()
    full_env = {**os.environ, **SPEC["env"], "LANGGRAPH_NO_VERSION_CHECK": "true", **env}
    command = [str(cli), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--config", str(workdir / "langgraph.json")]
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            command,
            cwd=workdir,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_until_ready(server, url, log_path)
            yield url, log_path
        finally:
            _stop(server)
