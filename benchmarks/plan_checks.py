"""Parts of the default that act on some questions only, measured on the questions they change.

* ``agents.plan_checks`` (on): a plan that has lost the question's subject becomes the
  question itself ("subject"), and so does one with a step that copies words of a planning
  exemplar ("exemplar"); a "Who is X?" step asks for the relative of X the question wants
  ("relation");
* ``mer.after_one_step_plan`` (off, so MER is skipped after a plan of one answered step);
* ``agents.tidy_plans`` (off): a step that only asks what a thing the question names is
  dropped ("identity step"), a plan with a step that restates the question becomes that
  step ("restated"), and steps after the last one that asks the question's kind of
  answer are cut ("after the answer").

(``agents.one_step_exemplar`` is not measured here: it rewords most plans, so it is a
full-set row of ``end_to_end.py``.)

A question whose plan a part leaves alone makes the same LLM calls either way (greedy
decoding, LLM cache) and so gives the same answer; a full-set run of each variant would
repeat those calls for nothing. So, per chat model and question set:

1. every question's plan as the default makes it, and with each plan-changing part's other
   value (the planning call only: the graph is stopped at its first plan; the other plans
   come from the LLM cache);
2. the default with the part and without, on the questions whose plan it changes (for the
   MER skip: whose plan has one step).

Sets: MuSiQue and 2Wiki compositional (all 134 questions each, the end-to-end benchmark's
pooled collection and settings) and the Adaptive-RAG benchmark's mixed set (60 one-fact and
60 multi-hop questions, its collection and settings).

Resumable (plan files and run files under ``<cache>/plan_checks_runs``, and the LLM cache);
writes ``benchmarks/results/plan_checks.{json,md}``, keeping the markdown's analysis block and,
with ``--parts``, the other parts' rows of a model from the file it replaces::

    .venv/bin/python benchmarks/plan_checks.py --data ../shared/data [--parts tidy_plans]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import adaptive
import end_to_end as e2e
from _common import DEFAULT_DATA, REPO, analysis_block, machine, write_results

from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.agents.plan_execute import leaks_an_exemplar, named_steps, restates
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE
from rag_complexity_agents.eval.base import EvalComponents
from rag_complexity_agents.eval.datasets import QARecord, dataset_subset, resolve_dataset
from rag_complexity_agents.eval.harness import evaluate, run_fingerprint
from rag_complexity_agents.eval.runner import read_run
from rag_complexity_agents.models.cache import open_llm_cache

MODELS = ("llamacpp:qwen2.5-coder-1.5b", "llamacpp:qwen2.5-0.5b")
SETS = ("musique", "2wikimultihopqa_compositional", "mixed")


@dataclass(frozen=True)
class Part:
    """A part of the default that acts on some questions only: its config key, the default's
    value, the value it is measured against, whether it changes plans (else it acts after a
    one-step plan), and how the markdown names the questions it changes."""

    key: str
    default: bool
    other: bool
    plans: bool
    changed: str


PARTS: dict[str, Part] = {
    "plan_checks": Part("agents.plan_checks", True, False, True, "plans changed by the checks"),
    "mer_after_one_step_plan": Part(
        "mer.after_one_step_plan", False, True, False, "one-step plans"
    ),
    "tidy_plans": Part("agents.tidy_plans", False, True, True, "plans tidied"),
}
RESULTS = REPO / "benchmarks" / "results"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated chat models")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated question sets")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts")
    parser.add_argument("--limit", type=int, default=None, help="first n questions of a set")
    parser.add_argument("--cache", default=str(default_home() / "benchmarks"))
    parser.add_argument("--out", default=str(RESULTS / "plan_checks.json"))
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    for given, known, what in ((args.sets, SETS, "sets"), (args.parts, PARTS, "parts")):
        unknown = sorted(set(given) - set(known))
        if unknown:
            parser.error(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    return args


Setup = tuple[Config, list[tuple[QARecord, dict[str, Any]]]]


def setups(args: argparse.Namespace, model: str) -> Iterator[tuple[str, Setup]]:
    """(set, (config with its collection, (record, raw JSON line) pairs)) per asked set."""
    if {"musique", "2wikimultihopqa_compositional"} & set(args.sets):
        settings = e2e.parse_args(["--data", args.data, "--cache", args.cache])
        settings.set = ["agents.stop=evidence"]  # the end-to-end benchmark's value
        base = e2e.make_config(settings, model)
        pool = [r for name in e2e.POOL for r in e2e.dataset_records(name, args.data)]
        collection, _ = e2e.build_collection(pool, base, label="pooled", index=True)
        config = base.with_overrides({"collection": collection})
        for name in ("musique", "2wikimultihopqa_compositional"):
            if name in args.sets:
                subset = dataset_subset(name)
                raw = adaptive.raw_lines(
                    resolve_dataset(subset.dataset if subset else name, args.data)
                )
                records = e2e.dataset_records(name, args.data)[: e2e.ROLE_LIMITS["strong"]]
                yield name, (config, [(r, raw[r.id]) for r in records])
    if "mixed" in args.sets:
        settings = adaptive.parse_args(["--data", args.data, "--model", model])
        settings.cache = args.cache
        config = adaptive.make_config(settings)
        pairs = adaptive.mixed_sample(args.data, settings.per_side)
        collection, _ = adaptive.build_collection([r for r, _ in pairs], config)
        yield "mixed", (config.with_overrides({"collection": collection}), pairs)


def first_plan(graph: Any, question: str) -> list[str]:
    """The plan the graph runs for ``question`` (stopped before its first retrieval)."""
    for update in graph.stream({"question": question}, stream_mode="updates"):
        plan = (update.get("plan") or {}).get("plan")
        if plan:
            return list(plan)
        if set(update) - {"start", "plan"}:
            break
    return []


def plans(
    config: Config,
    parts: EvalComponents,
    pairs: Sequence[tuple[QARecord, Any]],
    runs: Path,
    chosen: Sequence[str] = tuple(PARTS),
) -> dict[str, dict[str, list[str]]]:
    """Label ("default" or a plan-changing part of ``chosen``) → question id → the plan the
    default runs (with that part's other value); one resumable JSONL file a label under
    ``runs``."""
    found = {}
    labels = {"default": config} | {
        name: config.with_overrides({PARTS[name].key: PARTS[name].other})
        for name in chosen
        if PARTS[name].plans
    }
    for label, c in labels.items():
        path = runs / f"plans__{label}.jsonl"
        done: dict[str, list[str]] = {}
        if path.is_file():  # keep the finished lines (a line cut short by a kill is dropped)
            text = path.read_text(encoding="utf-8")
            kept = text[: text.rfind("\n") + 1]
            path.write_text(kept, encoding="utf-8")
            done = {line["id"]: line["plan"] for line in map(json.loads, kept.splitlines())}
        graph = build_pipeline(DEFAULT_PIPELINE, c, components=derive_components(parts, c))
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            for record, _ in pairs:
                if record.id not in done:
                    done[record.id] = first_plan(graph, record.question)
                    line = {"id": record.id, "question": record.question, "plan": done[record.id]}
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
                    out.flush()
        found[label] = done
    return found


def changed_by(part: str, default: list[str], other: list[str], question: str) -> str | None:
    """How ``part`` changes a question's run, from the default's plan and the plan with the
    part's other value (None: it does not)."""
    if part == "mer_after_one_step_plan":
        return "one-step plan" if len(default) == 1 else None
    if default == other:
        return None
    if part == "tidy_plans":
        if named_steps(default, question) != default:
            return "identity step"
        return "restated" if restates(default, question) else "after the answer"
    if default == [question]:
        return "exemplar" if leaks_an_exemplar(other, question) else "subject"
    return "relation"


def run_part(
    part: str,
    config: Config,
    parts: EvalComponents,
    pairs: Sequence[tuple[QARecord, dict[str, Any]]],
    runs: Path,
    quiet: bool,
) -> dict[str, list[dict[str, Any]]]:
    """Variant ("default" / "other") → per-question lines of the default pipeline on the
    questions of ``pairs`` (none: empty)."""
    if not pairs:
        return {"default": [], "other": []}
    ids = "\n".join(r.id for r, _ in pairs)
    subset = runs / f"{part}__{hashlib.sha256(ids.encode()).hexdigest()[:10]}.jsonl"
    subset.write_text("".join(json.dumps(raw) + "\n" for _, raw in pairs), encoding="utf-8")
    chosen = PARTS[part]
    lines = {}
    for variant, value in (("default", chosen.default), ("other", chosen.other)):
        c = config.with_overrides({chosen.key: value})
        fingerprint = run_fingerprint(c, DEFAULT_PIPELINE, subset.stem)
        out = runs / f"{subset.stem}__{variant}__{fingerprint}.jsonl"
        evaluate(
            c,
            DEFAULT_PIPELINE,
            subset,
            out=out,
            progress=not quiet,
            components=derive_components(parts, c),
        )
        lines[variant] = read_run(out)
    return lines


ONE_FACT = frozenset(adaptive.SINGLE_HOP_FILES)


def _tally(lines: Sequence[dict[str, Any]]) -> dict[str, int]:
    right = sum(1 for x in lines if (x.get("metrics") or {}).get("cover_em"))
    calls = sum(int((x.get("trace") or {}).get("llm_calls") or 0) for x in lines)
    return {"n": len(lines), "right": right, "llm_calls": calls}


def summarise(
    part: str,
    lines: dict[str, list[dict[str, Any]]],
    kinds: dict[str, str],
    groups: dict[str, str],
) -> list[dict[str, Any]]:
    """Rows of (check, group) with both variants' right answers and LLM calls."""
    keys = sorted({(kinds[x["id"]], groups[x["id"]]) for x in lines["default"]})
    return [
        {
            "part": part,
            "check": kind,
            "group": name,
            **{
                variant: _tally(
                    [x for x in found if (kinds[x["id"]], groups[x["id"]]) == (kind, name)]
                )
                for variant, found in lines.items()
            },
        }
        for kind, name in keys
    ]


def run_model(args: argparse.Namespace, model: str) -> dict[str, Any]:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model)
    rows: list[dict[str, Any]] = []
    counts: dict[str, dict[str, int]] = {}
    for name, (config, pairs) in setups(args, model):
        pairs = pairs[: args.limit] if args.limit else pairs
        runs = Path(args.cache) / "plan_checks_runs" / slug / name
        parts = EvalComponents(config, llm_cache=open_llm_cache(config))
        print(f"== {model} {name}: plans of {len(pairs)} questions", flush=True)
        planned = plans(config, parts, pairs, runs, args.parts)
        groups = {
            r.id: name
            if name != "mixed"
            else ("mixed one-fact" if r.dataset in ONE_FACT else "mixed multi-hop")
            for r, _ in pairs
        }
        counts[name] = {"questions": len(pairs)}
        for part in args.parts:
            other = planned.get(part, planned["default"])
            kinds = {
                r.id: kind
                for r, _ in pairs
                if (kind := changed_by(part, planned["default"][r.id], other[r.id], r.question))
            }
            counts[name][part] = len(kinds)
            chosen = [(r, raw) for r, raw in pairs if r.id in kinds]
            print(f"== {model} {name}: {part} on {len(chosen)} questions", flush=True)
            lines = run_part(part, config, parts, chosen, runs, args.quiet)
            rows += summarise(part, lines, kinds, groups)
    return {"model": model, "counts": counts, "rows": rows}


def _set(group: str) -> str:
    """The question set of a row's group ("mixed one-fact" → "mixed")."""
    return group.split()[0]


def merged(
    run: dict[str, Any], chosen: Sequence[str], earlier: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """``run`` (of the parts ``chosen``) with the rows and counts of the other parts and sets
    from the same model's run in ``earlier`` (a results file's runs)."""
    before = next((r for r in earlier if r["model"] == run["model"]), None)
    if before is None:
        return run
    rows = [
        r
        for r in before["rows"]
        if r["part"] not in chosen or _set(r["group"]) not in run["counts"]
    ] + run["rows"]
    counts = {
        name: {**before["counts"].get(name, {}), **found}
        for name, found in {**before["counts"], **run["counts"]}.items()
    }
    rows.sort(key=lambda r: (SETS.index(_set(r["group"])), list(PARTS).index(r["part"])))
    return {**run, "counts": counts, "rows": rows}


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    out = [
        "# Parts of the default measured on the questions they change",
        "",
        f"Pipeline `{DEFAULT_PIPELINE}` (the default); MuSiQue and 2Wiki compositional with the "
        "end-to-end benchmark's pooled collection and settings, the mixed set (60 one-fact, "
        f"60 multi-hop) with the Adaptive-RAG benchmark's; {result['machine']}; "
        f"{result['date']}.",
        "",
        f"Reproduce (resumable): `{result['command']}`",
        "",
        "A question a part does not change makes the same LLM calls either way, so each part is "
        "run only on the questions it changes. `agents.plan_checks` (on): on those whose plan "
        "it changes (`subject`: the plan became the question; `exemplar`: it became the "
        "question because a step copied an exemplar's words; `relation`: a 'Who is X?' step "
        "asks for X's relative). `mer.after_one_step_plan` (off): on those whose plan has one "
        "step. `agents.tidy_plans` (off): on those whose plan it changes (`identity step`: a "
        "step that asks what a named thing is was dropped; `restated`: the plan became its "
        "step that restates the question; `after the answer`: steps after the question's "
        "kind of answer were cut). *default*: the default's value; *other*: the other value.",
        "",
    ]
    for run in result["runs"]:
        counts = "; ".join(
            f"{name}: {c['questions']} questions, "
            + ", ".join(f"{PARTS[part].changed} {c[part]}" for part in PARTS if part in c)
            for name, c in run["counts"].items()
        )
        out += [
            f"## `{run['model']}`",
            "",
            counts + ".",
            "",
            "| part | check | set | n | right: default | right: other | LLM calls: default "
            "| LLM calls: other |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in run["rows"]:
            d, o = row["default"], row["other"]
            out.append(
                f"| `{row['part']}` | {row['check']} | {row['group']} | {d['n']} | "
                f"{d['right']} | {o['right']} | {d['llm_calls']} | {o['llm_calls']} |"
            )
        out.append("")
    out += ["right: cover-EM.", "", *analysis_block(analysis), ""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    result: dict[str, Any] = {
        "pipeline": DEFAULT_PIPELINE,
        "runs": [],
        # every model and part: a run of some merges into the file's others
        "command": "benchmarks/plan_checks.py --data ../shared/data"
        + (f" --sets {','.join(args.sets)}" if tuple(args.sets) != SETS else "")
        + (f" --limit {args.limit}" if args.limit else ""),
        "machine": machine(),
        "date": date.today().isoformat(),
    }
    out = Path(args.out)
    earlier = json.loads(out.read_text(encoding="utf-8"))["runs"] if out.is_file() else []
    for model in args.models:  # written after each model: a partial result can be committed
        run = run_model(args, model)
        earlier = [merged(run, args.parts, earlier), *(r for r in earlier if r["model"] != model)]
        result["runs"] = sorted(earlier, key=lambda r: [*MODELS, r["model"]].index(r["model"]))
        write_results(result, out, render_markdown)


if __name__ == "__main__":
    main()
