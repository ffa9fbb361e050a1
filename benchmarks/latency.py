"""Latency benchmark: how close each strategy comes to its token compute floor.

Run from the repository root on an otherwise idle machine::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/latency.py

Options: ``--questions N`` (the demo question plus N - 1 demo-corpus questions; default 11),
``--presets a,b`` (pipeline names, :data:`~rag_complexity_agents.config.pipelines.PIPELINES`;
default: the eight below), ``--cold-presets a,b`` (which presets also get a
cold ``rca ask`` run; default all, ``none`` for none), ``--home DIR`` (a corpus home holding
the ``demo`` collection; default: a temporary one, indexed first), ``--threads N|auto``
(``models.n_threads`` of the warm runs; default: the cpu preset's, i.e. unset: the free
cores), ``--tokens-only`` (only what does not depend on the load: the token and call counts
per preset; no rates, floors, cold runs or cold-start profile; writes
``latency_tokens.{json,md}``, so it is informative on a busy machine). It measures:

* ``prefill_tok_s`` / ``decode_tok_s``: the packaged model's prompt and generation rates with
  the thread count the runs use (an "auto" runtime fits it to the free cores first, as every
  model call does), measured before every preset (the top level gives the median; each
  entry records its ``threads``); the floor of a preset uses the rates measured just before
  it;
* per preset and question, warm (model loaded, collection open, no LLM call cache): the
  prompt tokens evaluated (``new_tokens``) vs served from the KV / prefix cache
  (``reused_tokens``), ``decoded_tokens`` and ``model_calls`` as counted by the llama.cpp
  runtime (:func:`~rag_complexity_agents.models.llamacpp.runtime_stats`), the loop's
  ``llm_calls``, the measured ``retrieval_s`` (retrieval rounds minus the ASU model calls made
  inside them), ``llm_busy_s`` (time the model was in use), ``warm_s`` and
  ``floor_s`` = new / prefill + decoded / decode + retrieval;
* ``cold_s``: a fresh ``rca ask`` process for the demo question until it exits, started once
  the load average fell to ``IDLE_LOAD`` (``--settle-s``, default 120: the longest wait);
* a cold-start profile of one fresh process: import of the ``rca`` app, model load,
  collection open (first search; split into BM25, graph, query embedder, Chroma and the
  search itself) and the first streamed token; and the slowest imports of
  ``python -X importtime``.

Targets (met / missed in the results): warm <= 1.3 x floor for every preset; the demo preset
(:data:`DEFAULT_PIPELINE`, what ``make demo`` runs) warm <= 15 s and cold <= 25 s on the demo
question; ``single_step`` warm <= 4 s. Absolute times only mean something on an idle
machine: the results state the load average and the other processes' CPU use
(:class:`OtherLoad`, the benchmark's own excluded) and call the run non-idle when the load
average before it or the others' use during it was above ``IDLE_LOAD``.

Writes ``benchmarks/results/latency.json`` and ``benchmarks/results/latency.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import REPO, analysis_block, machine, read_analysis

from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE

RESULTS = REPO / "benchmarks" / "results"
PRESETS = (
    "single_step",
    "plan_execute",
    "plan_execute_mer",
    "self_ask",
    "self_ask_sunar",
    "self_ask_sunar_mer",
    "react_sunar_mer",
    "searchain_sunar_mer",
    "ircot_sunar_mer",
)
DEMO_PRESET = DEFAULT_PIPELINE
DEMO_QUESTION = "From which university did the founder of Amazon graduate?"
FLOOR_RATIO, DEMO_WARM_S, DEMO_COLD_S, SINGLE_STEP_WARM_S = 1.3, 15.0, 25.0, 4.0
DEFAULT_FLOOR_RATIO, ONE_FACT_WARM_S, MULTI_HOP_WARM_S = 1.1, 4.0, 15.0
IDLE_LOAD = 0.5
RATE_PROMPT_TOKENS, RATE_DECODE_TOKENS = 256, 48


def chat_model(config: Any) -> str:
    """``models.chat``, with the packaged model ``auto`` picked on this machine."""
    from rag_complexity_agents.models.packaged import best_packaged_chat

    spec = config.models.chat
    return f"auto ({best_packaged_chat(config.models.home)})" if spec == "auto" else spec


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


class OtherLoad:
    """CPU used by other processes while the benchmark runs: the machine's busy CPU time
    (``/proc/stat``) minus this benchmark's own (its threads and its finished child
    processes: the cold runs and the profile), in busy cores averaged over each part of the
    run. Unlike the load average it leaves out the benchmark's own llama.cpp threads, so it
    tells whether the machine was otherwise idle. Without ``/proc/stat`` readings are None."""

    def __init__(self) -> None:
        self._last = self._sample()
        self.parts: list[dict[str, Any]] = []

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        """(monotonic s, machine busy CPU s, own and children's CPU s)."""
        from rag_complexity_agents.models.llamacpp.runtime import cpu_sample

        return cpu_sample(children=True)

    def reading(self, part: str) -> float | None:
        """Busy cores of other processes since the previous reading, recorded as ``part``."""
        now = self._sample()
        cores = None
        if now is not None and self._last is not None and now[0] > self._last[0]:
            others = (now[1] - self._last[1]) - (now[2] - self._last[2])
            cores = round(max(0.0, others) / (now[0] - self._last[0]), 2)
            self.parts.append(
                {"part": part, "seconds": round(now[0] - self._last[0], 1), "cores": cores}
            )
        self._last = now
        return cores

    def peak(self) -> float | None:
        values = [p["cores"] for p in self.parts]
        return max(values) if values else None


def rca_env(home: Path) -> dict[str, str]:
    """The environment of a child ``rca`` process: this tree first, the benchmark's home."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["RCA_CORPUS__HOME"] = str(home)
    return env


def ensure_demo_collection(home: Path) -> None:
    if (home / "collections" / "demo").is_dir():
        return
    rca = Path(sys.executable).with_name("rca")
    subprocess.run(
        [str(rca), "index", "--demo", "--quiet"], env=rca_env(home), check=True, timeout=900
    )


def questions(n: int) -> list[tuple[str, int]]:
    """(question, hops): the demo question, then demo-corpus questions taking one-fact and
    multi-hop ones in turn (so a short run has both kinds)."""
    from rag_complexity_agents.corpus.demo import load_demo_questions

    rest = [q for q in load_demo_questions() if q["question"] != DEMO_QUESTION]
    one = [q for q in rest if int(q["hops"]) == 1]
    multi = [q for q in rest if int(q["hops"]) > 1]
    mixed = [q for pair in zip(one, multi, strict=False) for q in pair]
    mixed += [q for q in rest if q not in mixed]
    return [(DEMO_QUESTION, 2), *((q["question"], int(q["hops"])) for q in mixed[: max(0, n - 1)])]


# --------------------------------------------------------------------------------------------
# Rates
# --------------------------------------------------------------------------------------------


def measure_rates(chat: Any) -> dict[str, float]:
    """Prefill and decode rates of ``chat``'s runtime (a fresh KV cache; left reset), with
    the thread count the runs use: an "auto" runtime first fits its threads to the free
    cores as every model call does (the count chosen at load follows the rounded load
    average of that moment)."""
    from rag_complexity_agents.corpus.demo import DEMO_CORPUS
    from rag_complexity_agents.models.llamacpp.prefix_cache import BLOCK

    runtime = chat._runtime()
    llama = runtime.llama
    text = DEMO_CORPUS.read_text(encoding="utf-8")
    tokens = llama.tokenize(text.encode("utf-8"), add_bos=False)[:RATE_PROMPT_TOKENS]
    with runtime.lock:
        if runtime.core_monitor is not None:
            runtime._fit_threads(runtime.core_monitor.update())
        llama.reset()
        tick = time.perf_counter()
        for start in range(0, len(tokens), BLOCK):
            llama.eval(tokens[start : start + BLOCK])
        prefill = len(tokens) / (time.perf_counter() - tick)
        # Greedy decoding with end-of-text banned: RATE_DECODE_TOKENS timed sampled tokens.
        eos = llama.token_eos()

        def no_eos(_ids: Any, scores: Any) -> Any:
            scores[eos] = -1e9
            return scores

        tick = time.perf_counter()
        steps = llama.generate(tokens[:BLOCK], temp=0.0, reset=True, logits_processor=[no_eos])
        for n, _ in enumerate(steps):
            if n == 0:  # the prompt is evaluated before the first token
                tick = time.perf_counter()
            if n == RATE_DECODE_TOKENS:
                break
        decode = RATE_DECODE_TOKENS / (time.perf_counter() - tick)
        llama.reset()
        runtime.canon = runtime.primed = 0
        runtime.generating = False
    return {
        "prefill_tok_s": round(prefill, 1),
        "decode_tok_s": round(decode, 1),
        "threads": runtime.threads,
    }


# --------------------------------------------------------------------------------------------
# Warm runs
# --------------------------------------------------------------------------------------------


def retrieval_seconds(trace: dict[str, Any]) -> float:
    """Retrieval time of a run from its trace, without the model calls ASU made inside it."""
    total = 0.0
    for step in trace.get("steps") or []:
        for rnd in (step.get("retrieval") or {}).get("rounds") or []:
            timing = ((rnd.get("retriever") or {}).get("nar") or {}).get("timing_ms") or {}
            hook_ms = float(timing.get("hook") or 0.0)
            total += float(rnd.get("seconds") or 0.0) - hook_ms / 1000.0
    return max(0.0, total)


def warm_runs(
    parts: Any,
    presets: list[str],
    qs: list[tuple[str, int]],
    chat: Any,
    others: OtherLoad,
    *,
    rates_too: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:
    """One row per preset and question; the rates measured before each preset (none
    without ``rates_too``: floors and ratios are then None); ``others`` gets a reading per
    preset."""
    from rag_complexity_agents.eval.strategies import build_strategy
    from rag_complexity_agents.models.llamacpp import runtime_stats

    rows: list[dict[str, Any]] = []
    rates_seen: list[dict[str, float]] = []
    for preset in presets:
        strategy = build_strategy(preset, parts)
        rates = measure_rates(chat) if rates_too else {}
        if rates:
            rates_seen.append(rates)
        print(f"{preset}: rates {rates or 'not measured'} load {load_average()}", flush=True)
        for i, (question, hops) in enumerate(qs):
            before, load = runtime_stats(), load_average()
            tick = time.perf_counter()
            result = strategy(question)
            warm = time.perf_counter() - tick
            after = runtime_stats()
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
            retrieval = retrieval_seconds(result.trace)
            if preset == "single_step":  # one search: the wall time the model did not use
                retrieval = max(0.0, warm - delta.get("busy_ms", 0) / 1000.0)
            floor = (
                delta.get("new_tokens", 0) / rates["prefill_tok_s"]
                + delta.get("decoded_tokens", 0) / rates["decode_tok_s"]
                + retrieval
                if rates
                else None
            )
            row = {
                "strategy": preset,
                "question": question,
                "hops": hops,
                "demo": i == 0,
                "answer": result.answer,
                "warm_s": round(warm, 2),
                "floor_s": round(floor, 2) if floor is not None else None,
                "ratio": round(warm / floor, 2) if floor else None,
                "new_tokens": delta.get("new_tokens", 0),
                "reused_tokens": delta.get("reused_tokens", 0),
                "prompt_tokens": delta.get("prompt_tokens", 0),
                "decoded_tokens": delta.get("decoded_tokens", 0),
                "model_calls": delta.get("calls", 0),
                "llm_calls": int(result.trace.get("llm_calls", 0) or 0),
                "retrieval_s": round(retrieval, 2),
                "llm_busy_s": round(delta.get("busy_ms", 0) / 1000.0, 2),
                "load": load,
            }
            rows.append(row)
            print(
                f"  {preset} q{i}: warm {row['warm_s']} s floor {row['floor_s']} s "
                f"new {row['new_tokens']} reused {row['reused_tokens']} "
                f"decoded {row['decoded_tokens']} calls {row['model_calls']} "
                f"answer {result.answer!r}",
                flush=True,
            )
        others.reading(f"warm {preset}")
    return rows, rates_seen


# --------------------------------------------------------------------------------------------
# Cold runs and the cold-start profile
# --------------------------------------------------------------------------------------------


def ask_args(preset: str) -> list[str]:
    """``rca ask`` options that run ``preset`` (a pipeline name)."""
    return ["--pipeline", preset]


def settle(target: float, limit_s: float) -> float:
    """Wait (at most ``limit_s``) until the 1-min load average is at most ``target``; the
    seconds waited. A fresh ``rca ask`` starts with as many llama.cpp threads as the rounded
    load average leaves free (until its first reading of the free cores), so right after
    the warm runs the benchmark's own finished work would cost the cold run a thread."""
    tick = time.monotonic()
    while load_average() > target and time.monotonic() - tick < limit_s:
        time.sleep(2.0)
    return round(time.monotonic() - tick, 1)


def cold_run(preset: str, question: str, home: Path, *, settle_s: float = 0.0) -> dict[str, Any]:
    """A fresh ``rca ask`` of ``preset`` for ``question``; first waits (at most
    ``settle_s``) for the load average to fall to ``IDLE_LOAD``."""
    rca = Path(sys.executable).with_name("rca")
    waited = settle(IDLE_LOAD, settle_s)
    load = load_average()
    tick = time.perf_counter()
    done = subprocess.run(
        [str(rca), "ask", *ask_args(preset), "--json", question],
        env=rca_env(home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.perf_counter() - tick
    answer = None
    if done.returncode == 0:
        answer = json.loads(done.stdout).get("answer")
    print(f"  cold {preset}: {seconds:.1f} s rc {done.returncode} answer {answer!r}", flush=True)
    return {
        "cold_s": round(seconds, 2),
        "cold_ok": done.returncode == 0,
        "cold_load": load,
        "cold_settle_s": waited,
    }


_PROFILE = r"""
import json, sys, time
steps, tick = {}, time.perf_counter()
def step(name):
    global tick
    now = time.perf_counter()
    steps[name], tick = now - tick, now
from rag_complexity_agents.cli import app  # what `rca` imports
step("import_s")
from rag_complexity_agents.components import Components
from rag_complexity_agents.config import Config
parts = Components(Config.from_env())
chat = parts.chat
chat._runtime()
step("model_load_s")
store = parts.store
store.bm25
step("bm25_load_s")
store.graph
step("graph_load_s")
store.embedder.encode_query(sys.argv[1])
step("embedder_load_s")
store.chroma_count()
step("chroma_open_s")
parts.first_stage.search(sys.argv[1], 5)
step("first_search_s")
for chunk in chat.stream([("human", sys.argv[1])], max_tokens=4):
    if chunk.content:
        break
step("first_token_s")
steps["collection_open_s"] = sum(steps[k] for k in COLLECTION_STEPS)
print(json.dumps(steps))
"""
#: The parts of "collection open" in the cold-start profile: BM25 (import of bm25s, load),
#: the neighbourhood graph, the query embedder (load and first vector), Chroma (import,
#: client start, collection) and the first search with all of them loaded.
COLLECTION_STEPS = (
    "bm25_load_s",
    "graph_load_s",
    "embedder_load_s",
    "chroma_open_s",
    "first_search_s",
)
_PROFILE = _PROFILE.replace("COLLECTION_STEPS", repr(COLLECTION_STEPS))


def cold_profile(home: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _PROFILE, DEMO_QUESTION],
        env=rca_env(home),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    steps = {k: round(v, 2) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    imports = subprocess.run(  # the same path again, with the import time of every module
        [sys.executable, "-X", "importtime", "-c", _PROFILE, DEMO_QUESTION],
        env=rca_env(home),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    packages: dict[str, float] = {}  # top-level package -> its largest cumulative import time
    for line in imports.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*([\w.]+)", line)
        if match:
            name = match.group(2).split(".")[0]
            packages[name] = max(packages.get(name, 0.0), int(match.group(1)) / 1e6)
    top = sorted(((sec, name) for name, sec in packages.items()), reverse=True)
    return {
        **steps,
        "load": load_average(),
        "slowest_imports": [[n, round(s, 2)] for s, n in top[:10]],
    }


# --------------------------------------------------------------------------------------------
# Summary, targets, output
# --------------------------------------------------------------------------------------------


def summarise(rows: list[dict[str, Any]], cold: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for preset in dict.fromkeys(r["strategy"] for r in rows):
        mine = [r for r in rows if r["strategy"] == preset]
        demo = next(r for r in mine if r["demo"])
        sums = {
            k: sum(r[k] for r in mine)
            for k in ("new_tokens", "reused_tokens", "decoded_tokens", "model_calls", "llm_calls")
        }
        warm = statistics.mean(r["warm_s"] for r in mine)
        one = [r["warm_s"] for r in mine if r["hops"] == 1]
        multi = [r["warm_s"] for r in mine if r["hops"] > 1]
        floors = [r["floor_s"] for r in mine]
        floor = None if None in floors else statistics.mean(floors)
        n = len(mine)
        out.append(
            {
                "strategy": preset,
                "questions": n,
                "warm_s": round(warm, 2),
                "floor_s": round(floor, 2) if floor is not None else None,
                "ratio": round(warm / floor, 2) if floor else None,
                "one_fact_warm_s": round(statistics.mean(one), 2) if one else None,
                "multi_hop_warm_s": round(statistics.mean(multi), 2) if multi else None,
                "demo_warm_s": demo["warm_s"],
                "demo_floor_s": demo["floor_s"],
                **(cold.get(preset) or {"cold_s": None}),
                **{k: round(v / n, 1) for k, v in sums.items()},
                "retrieval_s": round(statistics.mean(r["retrieval_s"] for r in mine), 2),
                "llm_busy_s": round(statistics.mean(r["llm_busy_s"] for r in mine), 2),
            }
        )
    return out


def targets(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def check(name: str, value: float | None, limit: float) -> None:
        met = None if value is None else value <= limit
        out.append({"target": name, "value": value, "limit": limit, "met": met})

    for s in summary:
        ratio = s["ratio"]
        default = s["strategy"] == DEFAULT_PIPELINE
        check(
            f"{s['strategy']} warm / floor", ratio, DEFAULT_FLOOR_RATIO if default else FLOOR_RATIO
        )
        if default:
            check(
                f"{DEFAULT_PIPELINE} one-fact warm s (mean)", s["one_fact_warm_s"], ONE_FACT_WARM_S
            )
            check(
                f"{DEFAULT_PIPELINE} multi-hop warm s (mean)",
                s["multi_hop_warm_s"],
                MULTI_HOP_WARM_S,
            )
        if s["strategy"] == DEMO_PRESET:
            check(f"{DEMO_PRESET} demo question warm s", s["demo_warm_s"], DEMO_WARM_S)
            check(f"{DEMO_PRESET} demo question cold s", s.get("cold_s"), DEMO_COLD_S)
        if s["strategy"] == "single_step":
            check("single_step warm s (mean)", s["warm_s"], SINGLE_STEP_WARM_S)
    return out


def idle(start_load: float, others_peak: float | None) -> bool:
    """An idle run: the load average before it started and the other processes' CPU use in
    every part of it (when measurable) at most ``IDLE_LOAD``."""
    return start_load <= IDLE_LOAD and (others_peak is None or others_peak <= IDLE_LOAD)


def write_markdown(data: dict[str, Any], path: Path) -> None:
    loads = data["load_average"]
    rates = ", ".join(
        f"{r['prefill_tok_s']}/{r['decode_tok_s']} ({r.get('threads', '?')} thr.)"
        for r in data["rates"]
    )
    peak = max((p["cores"] for p in data.get("other_load") or []), default=None)
    label = (
        "idle"
        if data["idle"]
        else f"**NON-IDLE run** (load average at start {loads['start']}, other processes "
        f"up to {peak} busy cores)"
    )
    lines = [
        "# Latency: warm and cold wall time against the token compute floor",
        "",
        f"Reproduce from the repository root: `.venv/bin/python {data['command']}` — "
        f"chat model `{data.get('chat_model')}`, {data['machine']}, threads {data['threads']}, "
        f"{data['questions']} question(s), {label}. Load average (1 min, this benchmark's "
        f"threads included): start {loads['start']}, end {loads['end']}, max {loads['max']}; "
        f"other processes' busy cores (the benchmark's own CPU excluded): peak {peak}. "
        + ("" if data["idle"] else "Absolute times of a non-idle run are not meaningful. "),
        "",
        f"Rates (median of one measurement before each preset): prefill "
        f"**{data['prefill_tok_s']} tok/s**, decode **{data['decode_tok_s']} tok/s** "
        f"(each: {rates}).",
        "",
        "Floor = new prompt tokens / prefill + decoded tokens / decode + retrieval time. Token "
        "counts come from the llama.cpp runtime (`runtime_stats()`); per question, averaged. "
        "Cold = a fresh `rca ask` process for the demo question, started once the load average "
        f"fell to {IDLE_LOAD} (waited "
        + ", ".join(
            f"{s['strategy']} {s['cold_settle_s']} s"
            for s in data["summary"]
            if s.get("cold_settle_s") is not None
        )
        + ").",
        "",
        "| strategy | warm s | floor s | warm/floor | one-fact warm s | multi-hop warm s | demo "
        "warm s | cold s | new tok | reused tok | decoded tok | model calls | loop LLM calls | "
        "retrieval s | model busy s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in data["summary"]:
        lines.append(
            f"| {s['strategy']} | {s['warm_s']} | {s['floor_s']} | {s['ratio']} | "
            f"{s['one_fact_warm_s']} | {s['multi_hop_warm_s']} | {s['demo_warm_s']} | "
            f"{s.get('cold_s') if s.get('cold_s') is not None else '—'} | "
            f"{s['new_tokens']} | {s['reused_tokens']} | {s['decoded_tokens']} | "
            f"{s['model_calls']} | {s['llm_calls']} | {s['retrieval_s']} | {s['llm_busy_s']} |"
        )
    lines += ["", "## Targets", "", "| target | value | limit | |", "|---|---:|---:|---|"]
    for t in data["targets"]:
        verdict = "—" if t["met"] is None else ("met" if t["met"] else "missed")
        lines.append(f"| {t['target']} | {t['value']} | {t['limit']} | {verdict} |")
    prof = data.get("cold_profile")
    if prof:
        lines += [
            "",
            "## Cold start (one fresh process)",
            "",
            f"Import of the `rca` app {prof['import_s']} s, model load {prof['model_load_s']} s, "
            f"collection open (first search) {prof['collection_open_s']} s "
            f"{collection_parts(prof)}, first token "
            f"{prof['first_token_s']} s (load {prof['load']}). Slowest imported packages "
            "on that path (`python -X importtime`; cumulative s, a package's imports included): "
            + ", ".join(f"`{n}` {s}" for n, s in prof["slowest_imports"])
            + ".",
        ]
    lines += ["", "## Analysis", "", *analysis_block(read_analysis(path)), ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def collection_parts(prof: dict[str, Any]) -> str:
    """The parts of the profile's collection open, e.g. "(BM25 0.4 + graph 0.0 + ...)"."""
    names = {
        "bm25_load_s": "BM25",
        "graph_load_s": "graph",
        "embedder_load_s": "query embedder",
        "chroma_open_s": "Chroma",
        "first_search_s": "first search",
    }
    if any(key not in prof for key in names):  # a profile without the collection parts
        return ""
    return "(" + " + ".join(f"{label} {prof[key]}" for key, label in names.items()) + ")"


def write_tokens_markdown(data: dict[str, Any], path: Path) -> None:
    """The ``--tokens-only`` table: what the model read and wrote per preset."""
    loads = data["load_average"]
    lines = [
        "# Latency: model work per preset (token counts only)",
        "",
        f"`{data['command']}` — {data['machine']}, {data['questions']} question(s), load "
        f"average {loads['start']} → {loads['end']} (max {loads['max']}). Token and call "
        "counts do not depend on the load; the seconds do (shown for reference only).",
        "",
        "| strategy | new tok | reused tok | decoded tok | model calls | loop LLM calls | "
        "demo new tok | demo decoded tok | warm s (loaded) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in data["summary"]:
        demo = next(r for r in data["rows"] if r["strategy"] == s["strategy"] and r["demo"])
        lines.append(
            f"| {s['strategy']} | {s['new_tokens']} | {s['reused_tokens']} | "
            f"{s['decoded_tokens']} | {s['model_calls']} | {s['llm_calls']} | "
            f"{demo['new_tokens']} | {demo['decoded_tokens']} | {s['warm_s']} |"
        )
    path.write_text("\n".join([*lines, ""]), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=11)
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--cold-presets", default=None, help="default: the --presets; 'none'")
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument(
        "--threads",
        default=None,
        help="models.n_threads of the warm runs and rates: a number, "
        "or 'auto' (free cores); default: the cpu preset's, unset = the free cores (cold "
        "runs always use it)",
    )
    ap.add_argument("--no-profile", action="store_true", help="skip the cold-start profile")
    ap.add_argument(
        "--settle-s",
        type=float,
        default=120.0,
        help="before each cold run, wait at most this long for the load average to fall to "
        f"{IDLE_LOAD} (0: do not wait)",
    )
    ap.add_argument(
        "--tokens-only",
        action="store_true",
        help="token and call counts only (no rates, floors, cold runs or profile)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="results file stem (default: latency, or latency_tokens with --tokens-only)",
    )
    args = ap.parse_args(argv)
    out = args.out or ("latency_tokens" if args.tokens_only else "latency")
    presets = [p for p in args.presets.split(",") if p]
    cold_presets = (
        presets
        if args.cold_presets is None
        else ([] if args.cold_presets == "none" else args.cold_presets.split(","))
    )
    if args.tokens_only:
        cold_presets = []
    from rag_complexity_agents.config import Config
    from rag_complexity_agents.eval.strategies import EvalComponents
    from rag_complexity_agents.models.llamacpp import loaded_runtimes

    loads = [load_average()]  # before any work of the benchmark's own
    others = OtherLoad()
    tmp = None
    home = args.home
    if home is None:
        tmp = tempfile.TemporaryDirectory(prefix="rca-latency-")
        home = Path(tmp.name)
    ensure_demo_collection(home)
    os.environ["RCA_CORPUS__HOME"] = str(home)
    qs = questions(args.questions)
    profile = None if args.no_profile or args.tokens_only else cold_profile(home)
    others.reading("index and cold-start profile")
    loads.append(load_average())
    overrides: dict[str, Any] = {}
    if args.threads is not None:
        overrides["models.n_threads"] = None if args.threads == "auto" else int(args.threads)
    parts = EvalComponents(Config.from_env().with_overrides(overrides), llm_cache=None)
    chat = parts.chat
    chat._runtime()  # model loaded
    parts.first_stage.search(DEMO_QUESTION, 5)  # collection open
    rows, rates = warm_runs(parts, presets, qs, chat, others, rates_too=not args.tokens_only)
    loads += [r["load"] for r in rows]
    cold = {}
    for preset in cold_presets:
        cold[preset] = cold_run(preset, DEMO_QUESTION, home, settle_s=args.settle_s)
        cold[preset]["cold_others"] = others.reading(f"cold {preset}")
        loads.append(cold[preset]["cold_load"])
    loads.append(load_average())
    for row in rows:  # cold runs answer the demo question only
        row["cold_s"] = (cold.get(row["strategy"]) or {}).get("cold_s") if row["demo"] else None
    summary = summarise(rows, cold)
    data = {
        "command": "benchmarks/latency.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine(),
        "chat_model": chat_model(parts.config),
        "threads": chat._runtime().threads,
        # 1 = every preset and question used the one model loaded before the warm runs
        "models_loaded": len(loaded_runtimes()),
        "questions": len(qs),
        # 1-min load average, the benchmark's own threads included (start: before any work)
        "load_average": {"start": loads[0], "end": loads[-1], "max": max(loads)},
        # busy cores of other processes per part of the run (the benchmark's own excluded)
        "other_load": others.parts,
        "idle": idle(loads[0], others.peak()),
        "prefill_tok_s": round(statistics.median(r["prefill_tok_s"] for r in rates), 1)
        if rates
        else None,
        "decode_tok_s": round(statistics.median(r["decode_tok_s"] for r in rates), 1)
        if rates
        else None,
        "rates": rates,
        "summary": summary,
        "targets": [] if args.tokens_only else targets(summary),
        "cold_profile": profile,
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{out}.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.tokens_only:
        write_tokens_markdown(data, RESULTS / f"{out}.md")
    else:
        write_markdown(data, RESULTS / f"{out}.md")
    print(f"wrote {RESULTS / out}.json and .md", flush=True)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
