"""The offline HTML page of a run (``rca ask --html``, ``rca render``): a real Self-Ask + SUNAR
+ MER trace over the demo collection (scripted chat model) rendered to one page, checked for
references to anything remote, escaped model output, the same page from a saved ``--json``
run, clean errors for bad files, and the page opened in headless Chromium (DOM and
screenshot)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home
from typer.testing import CliRunner

from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.cli import app
from rag_complexity_agents.cli.html import graph_data, render_html
from rag_complexity_agents.components import Components

Q = "In which country was the director of Spirited Away born?"
REASONING = "The evidence says Miyazaki was born in Tokyo."
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-crash-reporter",
)

Run = tuple[str, str, dict[str, Any], dict[str, Any]]


def spirited() -> Script:
    return Script(
        self_ask=[
            "Follow up: Who directed Spirited Away?",
            "Follow up: Where was Hayao Miyazaki born?",
            "So the final answer is: Japan",
        ],
        answer=["Hayao Miyazaki", "Tokyo, Japan"],
        asu="Hayao Miyazaki",
        mer=f"[Reasoning]: {REASONING}\n[Final Answer]: Japan",
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_home(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def run(home: Path) -> Run:
    """Question, answer, trace and graph data of a real self_ask_sunar_mer run."""
    parts = Components(demo_config(home))
    parts.chat = ScriptedChat(script=spirited())  # type: ignore[misc]
    graph = build_pipeline("self_ask_sunar_mer", parts.config, components=parts)
    result = run_graph(graph, Q)
    return Q, result.answer, dict(result.trace), graph_data(graph)


@pytest.fixture(scope="module")
def page(run: Run) -> str:
    return render_html(*run)


# ------------------------------------------------------------------------------ the page


def test_the_trace_has_what_the_page_shows(run: Run) -> None:
    _, answer, trace, graph = run
    assert answer == "Japan" and trace["mer"]["output"].startswith("[Reasoning]")
    batches = trace["steps"][0]["retrieval"]["rounds"][0]["batches"]
    assert [b["pool"] for b in batches] == ["R", "N"] and batches[0]["cluster_answers"]
    assert {"start", "decompose", "retrieve", "mer", "finish"} <= set(graph["nodes"])
    assert {"source": "mer", "target": "finish", "conditional": False} in graph["edges"]


def test_the_page_refers_to_nothing_remote(page: str) -> None:
    assert not re.search(r"https?://", page)
    assert not re.search(r"""(?:src|href|action|srcset)\s*=""", page, re.IGNORECASE)
    assert not re.search(r"url\(\s*['\"]?(?!#)", page)  # only in-page fragments (#arrow)
    assert "@import" not in page and "<link" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_the_page_shows_steps_batches_evidence_mer_and_costs(page: str, run: Run) -> None:
    _, _, trace, _ = run
    assert '<b id="answer">Japan</b>' in page
    assert "Who directed Spirited Away?" in page and "Where was Hayao Miyazaki born?" in page
    assert 'class="batch"' in page and "R (first stage)" in page and "N (neighbours)" in page
    assert "Hayao Miyazaki ×3" in page  # an ASU cluster of the m=3 samples
    assert "Spirited Away" in page and "first stage, rank 1, batch 0" in page
    neighbours = [e for e in trace["evidence"] if e["source"] == "neighbour"]
    if neighbours:
        assert "graph neighbour of" in page
    assert f'<pre id="mer-reasoning">[Reasoning]: {REASONING}' in page
    assert '<svg id="pipeline-graph"' in page and 'data-node="mer"' in page
    assert f"<dt>Input tokens</dt><dd>{trace['input_tokens']}</dd>" in page
    assert "Retrieval s" in page and trace["notes"][0].split(":")[0] in page


def test_every_string_from_the_trace_is_escaped(run: Run) -> None:
    _, _, trace, graph = run
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    hostile = json.loads(json.dumps(trace))
    hostile["steps"][0]["sub_question"] = evil
    hostile["steps"][0]["retrieval"]["evidence"][0]["title"] = evil
    hostile["steps"][0]["retrieval"]["rounds"][0]["batches"][0]["cluster_answers"] = [evil]
    hostile["mer"]["output"] = evil
    hostile["notes"] = [evil]
    hostile["options"] = {evil: evil}
    drawing = {"nodes": [*graph["nodes"], evil], "edges": [{"source": evil, "target": evil}]}
    page = render_html(evil, evil, hostile, drawing)
    assert "<script>alert" not in page and "<img" not in page
    assert page.count("<script>") == 1  # the page's own
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img" in page


def test_a_page_without_graph_or_mer_still_renders() -> None:
    page = render_html("q?", "", {"steps": [], "mer": None}, None)
    assert "The graph is not part of this run" in page and "MER did not run." in page


# ------------------------------------------------------------------------------ the CLI


@pytest.fixture
def cli_chat(home: Path, monkeypatch: pytest.MonkeyPatch) -> ScriptedChat:
    monkeypatch.setenv("RCA_CORPUS__HOME", str(home))
    monkeypatch.setenv("RCA_GRAPH__K", "16")
    monkeypatch.setenv("RCA_AGENTS__ABSTAIN", "exemplar")  # the scripted answer, read or not
    chat = ScriptedChat(script=spirited())
    monkeypatch.setattr(Components, "chat", property(lambda self: chat))
    return chat


def test_ask_html_and_render_of_the_saved_json_give_the_same_page(
    cli_chat: ScriptedChat, tmp_path: Path
) -> None:
    runner = CliRunner()
    asked = tmp_path / "asked.html"
    result = runner.invoke(
        app, ["ask", Q, "-p", "self_ask_sunar_mer", "--json", "--html", str(asked)]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["answer"] == "Japan" and "mer" in payload["graph"]["nodes"]
    assert all({"source", "target", "conditional"} <= set(e) for e in payload["graph"]["edges"])
    saved = tmp_path / "run.json"
    saved.write_text(result.stdout)
    rendered = tmp_path / "rendered.html"
    again = runner.invoke(app, ["render", str(saved), "--html", str(rendered)])
    assert again.exit_code == 0, again.output
    assert rendered.read_text() == asked.read_text()
    printed = runner.invoke(app, ["render", str(saved)])
    assert printed.exit_code == 0 and "A: Japan" in printed.stdout
    text = runner.invoke(app, ["ask", Q, "-p", "self_ask_sunar_mer", "--html", str(asked)])
    assert text.exit_code == 0 and "A: Japan" in text.stdout and asked.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ('{"answer": "x", "trace": ', "is not valid JSON"),
        ("[1, 2]", 'no "trace" object'),
        ('{"answer": "x"}', 'no "trace" object'),
    ],
)
def test_render_gives_one_line_for_a_bad_file(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "run.json"
    if content is not None:
        path.write_text(content)
    result = CliRunner().invoke(app, ["render", str(path), "--html", str(tmp_path / "x.html")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "x.html").exists()


# ------------------------------------------------------------------------------ Chromium


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium; installed with apt-get when missing and running as root."""
    if not Path(CHROMIUM).exists():
        if os.geteuid() != 0:
            pytest.skip(f"{CHROMIUM} is missing and installing it needs root (apt-get)")
        if shutil.which("apt-get") is None:
            pytest.skip(f"{CHROMIUM} is missing and there is no apt-get to install it")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
            if done.returncode != 0:
                pytest.skip(f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}")
    return CHROMIUM


def _ours(profile: Path) -> list[int]:
    """Processes still running with our profile directory on their command line."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(profile).encode() in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.fixture
def browse(chromium: str, tmp_path: Path) -> Iterator[Any]:
    """Run headless Chromium on a page; every process it started is killed afterwards."""
    profile = tmp_path / "chromium-profile"
    started: list[subprocess.Popen[bytes]] = []

    def run_chromium(*args: str) -> bytes:
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
        )
        started.append(proc)
        out, _ = proc.communicate(timeout=120)
        return out

    yield run_chromium
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the whole process group it started
        proc.wait(timeout=10)
    for pid in _ours(profile):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(profile, ignore_errors=True)


def _png_colours(data: bytes) -> tuple[int, int, int]:
    """Width, height and number of distinct pixel colours of an 8-bit RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + size]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + size
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    previous, colours = bytearray(stride), set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        colours.update(bytes(line[i : i + 3]) for i in range(0, stride, bpp))
        previous = line
    return width, height, len(colours)


def test_the_page_in_headless_chromium(page: str, tmp_path: Path, browse: Any) -> None:
    path = tmp_path / "run.html"
    path.write_text(page, encoding="utf-8")
    dom = browse("--dump-dom", path.as_uri()).decode("utf-8")
    assert re.search(r'<b id="answer">Japan</b>', dom)
    assert "Who directed Spirited Away?" in dom  # a step's sub-question
    assert re.search(r'<td class="title">Spirited Away</td>', dom)  # an evidence title
    assert re.search(r'<tr class="batch[^"]*"><td>batch 0</td>', dom)
    assert re.search(rf'<pre id="mer-reasoning">\[Reasoning\]: {re.escape(REASONING)}', dom)
    assert '<svg id="pipeline-graph"' in dom
    shot = tmp_path / "run.png"
    browse(f"--screenshot={shot}", "--window-size=900,1200", path.as_uri())
    width, height, colours = _png_colours(shot.read_bytes())
    assert (width, height) == (900, 1200)
    assert colours > 8, f"the screenshot looks blank ({colours} colours)"
