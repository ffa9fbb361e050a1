"""GRADE benchmark: the hops × D_r difficulty matrix on real MuSiQue questions, and generation.

Matrix: one per row of the end-to-end benchmark on MuSiQue (``benchmarks/end_to_end.py``:
every role, strategy and model of its plan), read from the run file that row writes under the
end-to-end settings (``<cache>/end_to_end_runs/<model>/musique__<strategy>__<hash>.jsonl``;
``--e2e-args`` passes the options the end-to-end runs were started with, so that the hashes
match; run files of other settings are ignored). Whatever part of a row has run is used:
every row reports its ``n`` against its planned size, and rows without a run file are listed
as not run. D_r of every question of ``musique_dev_ctx.jsonl`` is 1 − min cosine of the
question with its supporting paragraphs (packaged MiniLM); its quartiles over all 134
questions are the same bins for every row. Per row: the error rate (1 − ``acc``) per (hops,
D_r bin) cell, GRADE's bin-level Pearson r (cell mean D_r vs error rate per hop row; diagonal
position vs error rate) and, as an extra, the item-level r of D_r with each question's
correctness. The primary row (``--primary``, default ``single_step`` of the main model: it
covers the most questions) gives the top-level ``cells``, ``r_bin_*`` and the heatmap
``grade.png``. Unlike the paper, D_r is over MuSiQue's supporting paragraphs (not 128–256-token
chunks) and correctness is ``acc`` (not an LLM judge).

``--rerender`` rewrites ``grade.json``/``.md``/``.png`` from the matrices stored in an existing
``grade.json`` (recomputing the bin-level r from its cells) when the run files are not at hand;
``--markdown-only`` rewrites ``grade.md`` alone from it.

Generation (``--generate-docs``): runs the generation pipeline on a subset of the bundled demo
corpus with the packaged LLM or ``--generate-model`` (LLM steps cached, so reruns are instant)
and records how many validated questions of each hop count it produced; ``--generate-source
musique --generate-n-docs 500`` generates from the first 500 pooled MuSiQue paragraphs instead.
It counts the questions whose path uses a link that exists only through an entity equivalence
(GRADE's "missing links") and scores ``--generate-strategy`` on the generated questions over
the documents: its error rate on those questions against the rest.

Run from the repository root::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RCA_MODELS__N_THREADS=1 .venv/bin/python \\
        benchmarks/grade.py --data ../shared/data

Writes ``benchmarks/results/grade.json`` (``{"cells": [{"hops", "dr_bin", "n",
"error_rate"}], "r_bin_by_hop": {hops: r}, "r_bin_diagonal": r, "pearson_dr_accuracy_by_hop":
{hops: r}, "generation": {"questions", "by_hops"}, "strategies": {row: {..., "n",
"planned_n", "model", "role", "run_file"}}, "not_run": [...]}``), ``grade.md`` and
``grade.png``; text between the
``<!-- analysis:start -->`` / ``<!-- analysis:end -->`` markers of an existing ``grade.md`` is
kept.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from _common import REPO

from rag_complexity_agents.complexity.grade.difficulty import (
    DifficultyMatrix,
    cosine_similarities,
    difficulty_matrix,
    quantile_edges,
    retrieval_difficulty,
)
from rag_complexity_agents.complexity.grade.matrix import (
    difficulty_items,
    matrix_markdown,
    save_heatmap,
)
from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.eval.datasets import load_records, resolve_dataset
from rag_complexity_agents.eval.grade import supports_from_dataset
from rag_complexity_agents.eval.runner import read_run
from rag_complexity_agents.models.embeddings import load_embedder

ANALYSIS = re.compile(r"<!-- analysis:start -->.*?<!-- analysis:end -->", re.DOTALL)
DEFAULT_DOCS = (
    # chains of the demo questions q01 (Spirited Away → Japan), q05 (Amazon → Rio Grande)
    "demo-134,demo-077,demo-074,demo-098,demo-064,demo-111,demo-020"
)


def _monotone(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a (one level)"
    return "yes" if all(b >= a for a, b in itertools.pairwise(values)) else "no"


def plan_rows(args: argparse.Namespace) -> list[tuple[Any, Path]]:
    """The end-to-end benchmark's plan rows on ``--dataset``, each with the run file it writes
    under the settings that ``--e2e-args`` gives ``end_to_end.py`` (resolved as its ``run``
    resolves them: the pooled corpus's collection name is part of the settings)."""
    import end_to_end as e2e

    given = shlex.split(args.e2e_args)
    e2e_args = e2e.parse_args(
        ["--data", args.data, "--cache", args.cache, "--model", args.model, *given]
    )
    best_loops = [s.strip() for s in e2e_args.best_loops.split(",") if s.strip()]
    plan = e2e.build_plan(
        model=e2e_args.model, strong_model=e2e_args.strong_model or None, best_loops=best_loops
    )
    pool = [r for name in e2e.POOL for r in load_records(resolve_dataset(name, args.data))]
    base = e2e.make_config(e2e_args, e2e_args.model)
    collection, _ = e2e.build_collection(pool, base, label="pooled", index=False)
    rows = []
    for planned in plan:
        if planned.dataset == args.dataset:
            config = e2e.make_config(e2e_args, planned.model)
            config = config.with_overrides({"collection": collection})
            rows.append((planned, e2e.run_file(e2e_args, config, planned)))
    return rows


def row_name(strategy: str, model: str, main_model: str) -> str:
    """A row's key: the strategy, with the model when it is not the main one."""
    return strategy if model == main_model else f"{strategy} ({model.removeprefix('llamacpp:')})"


def matrices(args: argparse.Namespace, config: Config) -> dict[str, Any]:
    dataset = resolve_dataset(args.dataset, args.data)
    supports = supports_from_dataset(dataset)
    embedder = load_embedder(config.models.embedding)
    all_dr = []
    for support in supports.values():
        if support.texts:
            vectors = embedder.encode([support.question, *support.texts])
            sims = cosine_similarities(vectors[0], vectors[1:])
            all_dr.append(retrieval_difficulty(sims, config.grade.aggregation, p=config.grade.p))
    edges = quantile_edges(all_dr, config.grade.n_dr_bins)
    out: dict[str, Any] = {"dr_edges": edges, "dataset_questions": len(all_dr)}
    per_row: dict[str, Any] = {}
    aggregations: list[dict[str, Any]] = []
    not_run: list[str] = []
    order = [r.id for r in load_records(dataset)]
    for planned, run in plan_rows(args):
        name = row_name(planned.strategy, planned.model, args.model)
        wanted = set(order[: planned.limit])  # a run file may hold more (an earlier, larger plan)
        rows = [r for r in read_run(run) if r["id"] in wanted] if run.is_file() else []
        inputs = difficulty_items(
            rows,
            supports,
            embedder,
            aggregation=config.grade.aggregation,
            p=config.grade.p,
            metric=config.grade.metric,
        )
        if not inputs.items:
            not_run.append(f"{name} (n={planned.limit})")
            continue
        matrix = difficulty_matrix(inputs.items, n_bins=config.grade.n_dr_bins, edges=edges)
        data = matrix.to_dict()
        data.update(
            strategy=planned.strategy,
            model=planned.model,
            role=planned.role,
            planned_n=planned.limit,
            run_file=f"{run.parent.name}/{run.name}",
            skipped=inputs.skipped,
            accuracy=round(sum(i.correct for i in inputs.items) / len(inputs.items), 4),
        )
        per_row[name] = {"matrix": matrix, "data": data}
        if planned.model == args.strong_model and planned.strategy in AGGREGATION_ROWS:
            aggregations += aggregation_rows(name, rows, supports, embedder, config)
    out["aggregations"] = aggregations
    out["strategies"] = per_row
    out["not_run"] = not_run
    return out


AGGREGATION_ROWS = ("single_step", "plan_execute")
"""The strong model's rows on which min, mean and power D_r are compared."""


def aggregation_rows(
    name: str, rows: list[dict[str, Any]], supports: Any, embedder: Any, config: Config
) -> list[dict[str, Any]]:
    """The paper's Table 3 comparison on one run: for each D_r aggregation, the matrix with
    D_r binned within each hop level (the paper's way) and its correlations."""
    out = []
    for aggregation in ("min", "mean", "power"):
        inputs = difficulty_items(
            rows,
            supports,
            embedder,
            aggregation=aggregation,
            p=config.grade.p,
            metric=config.grade.metric,
        )
        matrix = difficulty_matrix(inputs.items, n_bins=config.grade.n_dr_bins, binning="per_hop")
        data = matrix.to_dict()
        out.append(
            {
                "row": name,
                "aggregation": aggregation,
                "p": config.grade.p if aggregation == "power" else None,
                "binning": "per_hop",
                "n": data["n"],
                "r_bin_by_hop": data["r_bin_by_hop"],
                "r_bin_diagonal": data["r_bin_diagonal"],
                "pearson_dr_accuracy_all": data["pearson_dr_accuracy_all"],
            }
        )
    return out


def aggregation_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The D_r aggregation table (the paper's Table 3 comparison)."""

    def r(value: Any) -> str:
        return "—" if value is None else f"{value:+.2f}"

    hops = sorted({h for row in rows for h in row["r_bin_by_hop"]}, key=int)
    lines = [
        "### D_r aggregation: min, mean and power (the paper's Table 3 comparison)",
        "",
        "The strong model's rows; D_r binned within each hop level (the paper's way); bin-level "
        "r per hop row (positive = error rises with D_r) and item-level r of D_r with "
        "correctness over all questions (negative = harder, more often wrong). Power: p = "
        f"{next((row['p'] for row in rows if row['p'] is not None), '–')}.",
        "",
        "| row | aggregation | n | "
        + " | ".join(f"bin r, {h} hops" for h in hops)
        + " | bin r, diagonal | item r |",
        "|---|---|---|" + "---|" * (len(hops) + 2),
    ]
    for row in rows:
        lines.append(
            f"| {row['row']} | {row['aggregation']} | {row['n']} | "
            + " | ".join(r(row["r_bin_by_hop"].get(h)) for h in hops)
            + f" | {r(row['r_bin_diagonal'])} | {r(row['pearson_dr_accuracy_all'])} |"
        )
    return [*lines, ""]


def generation_documents(args: argparse.Namespace) -> tuple[list[Any], str]:
    """The documents to generate from and a name for them: the demo ids of
    ``--generate-docs``, or the first ``--generate-n-docs`` distinct paragraphs of the
    dataset ``--generate-source`` (its questions' paragraphs pooled in file order)."""
    from rag_complexity_agents.corpus.demo import DEMO_CORPUS
    from rag_complexity_agents.corpus.documents import iter_documents
    from rag_complexity_agents.eval.datasets import build_pooled_corpus

    if args.generate_source == "demo":
        ids = args.generate_docs.split(",")
        return [d for d in iter_documents(DEMO_CORPUS) if d.id in ids], "demo"
    records = load_records(resolve_dataset(args.generate_source, args.data))
    pooled = build_pooled_corpus(records, title_in_text=False)
    return list(pooled.documents[: args.generate_n_docs]), args.generate_source


def generation(args: argparse.Namespace, config: Config) -> dict[str, Any]:
    from rag_complexity_agents.complexity.grade.generate import GradeGenerator, write_jsonl
    from rag_complexity_agents.models.cache import LLMCallCache

    docs, source = generation_documents(args)
    if args.generate_model:
        config = config.with_overrides({"models.chat": args.generate_model})
    cache = LLMCallCache(Path(args.cache) / "grade_llm_cache.sqlite")
    started = time.perf_counter()
    generator = GradeGenerator.from_config(
        config, cache=cache, progress=None if args.quiet else print
    )
    result = generator.run(docs)
    cache.close()
    qa_path = Path(args.cache) / f"grade_generated_{source}.jsonl"
    write_jsonl(result.questions, qa_path)
    data = result.to_dict()
    data["source"] = source
    data["model"] = config.models.chat
    data["equivalence"] = config.grade.equivalence
    data["documents"] = len(docs) if source != "demo" else [d.id for d in docs]
    data["wall_seconds"] = round(time.perf_counter() - started, 1)
    data["qa_file"] = str(qa_path)
    data["missing_links"] = sum(1 for q in result.questions if q.equivalence_links)
    data["examples"] = [
        {
            "hops": q.hops,
            "question": q.question,
            "answer": q.answer,
            "path": list(q.path),
            "equivalence_links": list(q.equivalence_links),
            "dr": round(q.dr, 4),
        }
        for q in sorted(result.questions, key=lambda q: not q.equivalence_links)[:8]
    ]
    if args.generate_strategy and result.questions:
        linked = {q.id for q in result.questions if q.equivalence_links}
        ids = {q.id for q in result.questions}
        data["strategy"] = score_generated(args, config, docs, source, qa_path, ids, linked)
    return data


def newcombe(a: list[float], b: list[float], z: float = 1.96) -> dict[str, float] | None:
    """The difference of two error rates, ``mean(a) - mean(b)``, with Newcombe's hybrid
    Wilson score interval (95% for z = 1.96): valid for a group of two questions, where a
    bootstrap of two equal values has no spread. None when a group is empty."""
    if not a or not b:
        return None

    def wilson(values: list[float]) -> tuple[float, float, float]:
        n, p = len(values), sum(values) / len(values)
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return p, centre - half, centre + half

    (p1, l1, u1), (p2, l2, u2) = wilson(a), wilson(b)
    delta = p1 - p2
    return {
        "delta": round(delta, 4),
        "lo": round(delta - math.hypot(p1 - l1, u2 - p2), 4),
        "hi": round(delta + math.hypot(u1 - p1, p2 - l2), 4),
    }


def score_generated(
    args: argparse.Namespace,
    config: Config,
    docs: list[Any],
    source: str,
    qa_path: Path,
    ids: set[str],
    linked: set[str],
) -> dict[str, Any]:
    """Run ``--generate-strategy`` on the generated questions over their documents (one chunk
    per document) and compare its error rate on the ``linked`` questions (whose path uses a
    link that exists only through an equivalence) against the rest (:func:`newcombe`). The run
    file is shared by every generation from the same documents: only ``ids`` are read."""
    import hashlib

    import numpy as np

    from rag_complexity_agents.corpus.store import CorpusStore
    from rag_complexity_agents.eval.harness import evaluate
    from rag_complexity_agents.eval.strategies import EvalComponents
    from rag_complexity_agents.models.cache import open_llm_cache

    digest = hashlib.sha256("\n".join(d.id for d in docs).encode()).hexdigest()[:12]
    config = config.with_overrides(
        {
            "corpus.home": args.cache,
            "corpus.chunk_size": 4096,
            "corpus.chunk_overlap": 0,
            "collection": f"grade-generation-{digest}",
        }
    )
    store = CorpusStore.open_or_create(config.collection, config)
    if len(store) < len(docs):
        store.ingest(docs, progress=not args.quiet)
    parts = EvalComponents(config, llm_cache=open_llm_cache(config))
    model = config.models.chat.replace(":", "-")
    out = (
        Path(args.cache)
        / "grade_runs"
        / f"{source}_{digest}__{args.generate_strategy}__{model}.jsonl"
    )
    evaluate(
        config, args.generate_strategy, qa_path, out=out, progress=not args.quiet, components=parts
    )
    errors: dict[bool, list[float]] = {True: [], False: []}
    for line in read_run(out):
        if line["id"] not in ids:
            continue
        errors[line["id"] in linked].append(1.0 - float(line["metrics"][config.grade.metric]))
    return {
        "name": args.generate_strategy,
        "model": config.models.chat,
        "metric": config.grade.metric,
        "run_file": str(out),
        "n_missing_link": len(errors[True]),
        "n_rest": len(errors[False]),
        "error_missing_link": round(float(np.mean(errors[True])), 4) if errors[True] else None,
        "error_rest": round(float(np.mean(errors[False])), 4) if errors[False] else None,
        "difference": newcombe(errors[True], errors[False]),
    }


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _rates(values: dict[str, float]) -> str:
    return " / ".join(f"{values[k]:.2f}" for k in sorted(values, key=int))


def _r(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f}"


def summary_lines(matrices: dict[str, Any]) -> list[str]:
    """One line per end-to-end row: its size, accuracy, error by hops and by D_r bin, and the
    r statistics (the full matrices are in ``grade.json``)."""
    lines = [
        "| row | role | n | acc % | error by hops (2 / 3 / 4) | error by D_r bin (1–4) "
        "| bin-level r, 2 hops | bin-level r, diagonal | item-level r, all |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in matrices.items():
        data = entry["data"]
        n = f"{data['n']}" + (
            f" of {data['planned_n']}" if data.get("planned_n", data["n"]) > data["n"] else ""
        )
        lines.append(
            f"| {name} | {data.get('role', '–')} | {n} | {data.get('accuracy', 0) * 100:.1f} | "
            f"{_rates(data['error_rate_by_hop'])} | {_rates(data['error_rate_by_bin'])} | "
            f"{_r(data['r_bin_by_hop'].get('2'))} | {_r(data['r_bin_diagonal'])} | "
            f"{_r(data['pearson_dr_accuracy_all'])} |"
        )
    return lines


def markdown(results: dict[str, Any], primary: str, previous: str | None) -> str:
    """``grade.md``: the primary row's full matrix, one summary line per other row, the
    generation run and the kept analysis block."""
    lines = [
        "# GRADE: difficulty matrix on MuSiQue and generated questions",
        "",
        f"Model: `{results['model']}`; dataset `{results['dataset']}` "
        f"({results['dataset_questions']} questions with supporting paragraphs); D_r = 1 − min "
        "cosine (MiniLM) of the question with its supporting paragraphs; D_r quartile edges over "
        f"all questions (not the paper's per-hop binning): "
        f"{', '.join(f'{e:.3f}' for e in results['dr_edges'])}; correctness = "
        f"`{results['metric']}`. Each row is read from the end-to-end run file of that row as "
        "it was when the matrices were computed; `end_to_end.md` has the current figures.",
        "",
    ]
    if results.get("command"):
        lines += [
            "Reproduce (the matrices read the end-to-end run files; generation LLM steps are "
            "cached):",
            "",
            "```bash",
            results["command"],
            "```",
            "",
        ]
    matrices = results["_matrices"]
    entry = matrices[primary]
    data = entry["data"]
    size = f"n={data['n']}"
    if data.get("planned_n"):
        size += f" of {data['planned_n']} planned; {data['role']} row, `{data['model']}`"
    lines.append(matrix_markdown(entry["matrix"], title=f"{primary} ({size})"))
    hop_rates = [data["error_rate_by_hop"][k] for k in sorted(data["error_rate_by_hop"])]
    bin_rates = [data["error_rate_by_bin"][k] for k in sorted(data["error_rate_by_bin"])]
    lines += [
        f"Error rises along hops: **{_monotone(hop_rates)}** "
        f"({', '.join(f'{r:.2f}' for r in hop_rates)}); along D_r bins: "
        f"**{_monotone(bin_rates)}** ({', '.join(f'{r:.2f}' for r in bin_rates)}).",
        "",
        "### Every row",
        "",
        *summary_lines(matrices),
        "",
        "Error rates are 1 − acc; hops missing from a row's sample are left out. "
        "The full matrix of every row is in `grade.json`.",
        "",
    ]
    if results.get("aggregations"):
        lines += aggregation_markdown(results["aggregations"])
    if results.get("not_run"):
        lines += [
            "End-to-end rows without a run file when the matrices were computed: "
            f"{', '.join(results['not_run'])}.",
            "",
        ]
    gen = results.get("generation")
    if gen:
        docs = gen.get("documents", [])
        source = gen.get("source", "demo")
        where = "demo corpus subset" if source == "demo" else f"pooled {source} paragraphs"
        graph = gen.get("graph") or {}
        lines += [
            f"### Generation ({where}, `{gen.get('model', 'packaged LLM')}`)",
            "",
            f"{gen['questions']} validated questions, by hops {gen['by_hops']}, from "
            f"{docs if isinstance(docs, int) else len(docs)} documents in "
            f"{gen.get('wall_seconds')} s (LLM steps cached; a rerun costs nothing). "
            f"Graph: {graph.get('nodes')} nodes, {graph.get('edges')} edges, "
            f"{graph.get('merged_entities')} entities merged and {graph.get('mirrored_edges')} "
            f"edges mirrored by equivalence (`grade.equivalence = "
            f"{gen.get('equivalence', 'groups')}`); "
            f"{gen.get('missing_links', 0)} questions whose path uses a link that exists only "
            "through an equivalence.",
            "",
            f"Skipped (reason: count): {json.dumps(gen.get('skipped', {}))}",
            "",
        ]
        run = gen.get("strategy")
        if run:
            diff = run.get("difference")
            lines += [
                f"`{run['name']}` ({run['model']}, error = 1 − {run['metric']}) over the "
                f"documents: error {_rate(run['error_missing_link'])} on the "
                f"{run['n_missing_link']} missing-link questions, {_rate(run['error_rest'])} "
                f"on the other {run['n_rest']}"
                + (
                    f"; difference {diff['delta']:+.2f} [{diff['lo']:+.2f}, {diff['hi']:+.2f}] "
                    "(Newcombe's 95% interval)."
                    if diff
                    else "."
                ),
                "",
            ]
        for ex in gen.get("examples", []):
            links = ex.get("equivalence_links") or []
            lines.append(
                f"- {ex['hops']} hops, D_r {ex['dr']}: {ex['question']} → **{ex['answer']}** "
                f"(path {' → '.join(ex['path'])}"
                + (f"; equivalence links {links}" if links else "")
                + ")"
            )
        lines.append("")
    lines.append(previous or "<!-- analysis:start -->\n<!-- analysis:end -->")
    return "\n".join(lines) + "\n"


def markdown_only(out: Path) -> int:
    """Rewrite ``grade.md`` alone from the rows stored in ``out`` (JSON and PNG untouched)."""
    if not out.is_file():
        print(f"{out} does not exist; run the benchmark first", file=sys.stderr)
        return 2
    stored = json.loads(out.read_text(encoding="utf-8"))
    primary = stored["primary_strategy"]
    strategies = {
        name: {"matrix": DifficultyMatrix.from_dict(data), "data": data}
        for name, data in stored["strategies"].items()
    }
    ordered = {primary: strategies[primary]} | {k: v for k, v in strategies.items() if k != primary}
    md_path = out.with_suffix(".md")
    match = ANALYSIS.search(md_path.read_text(encoding="utf-8")) if md_path.is_file() else None
    md_path.write_text(
        markdown({**stored, "_matrices": ordered}, primary, match.group(0) if match else None),
        encoding="utf-8",
    )
    print(f"wrote {md_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / ".." / "shared" / "data"))
    parser.add_argument("--dataset", default="musique")
    parser.add_argument("--model", default="llamacpp:qwen2.5-0.5b")
    parser.add_argument("--cache", default=str(default_home() / "benchmarks"))
    parser.add_argument(
        "--e2e-args",
        default="",
        help="options the end-to-end runs were started with (e.g. '--set models.n_threads=1'; "
        "they decide which run file is each row's); --data, --cache and --model are passed on",
    )
    parser.add_argument("--primary", default="single_step")
    parser.add_argument(
        "--strong-model",
        default="llamacpp:qwen2.5-coder-1.5b",
        help="the model whose single-step and plan-and-execute rows compare D_r aggregations",
    )
    parser.add_argument("--generate-docs", default=DEFAULT_DOCS, help="demo ids; '' to skip")
    parser.add_argument(
        "--generate-source",
        default="demo",
        help="'demo' (the ids of --generate-docs) or a dataset whose pooled paragraphs are "
        "the documents (e.g. musique)",
    )
    parser.add_argument("--generate-n-docs", type=int, default=500)
    parser.add_argument(
        "--generate-model",
        default="",
        help="the chat model that generates the questions and answers them with "
        "--generate-strategy (default: --model)",
    )
    parser.add_argument("--paths-per-hop", type=int, default=30, help="grade.paths_per_hop")
    parser.add_argument(
        "--generate-strategy",
        default="single_step",
        help="harness strategy scored on the generated questions ('' to skip)",
    )
    parser.add_argument("--claims", default="rule", choices=["llm", "rule"])
    parser.add_argument(
        "--equivalence",
        default="groups",
        choices=["groups", "pairs"],
        help="grade.equivalence: the paper's group prompt, or a Yes/No question per pair of "
        "names written two ways (a qualifier, a surname)",
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "grade.json"))
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--rerender",
        action="store_true",
        help="rewrite the outputs from the matrices stored in --out (no run files needed)",
    )
    parser.add_argument(
        "--markdown-only",
        action="store_true",
        help="rewrite only grade.md from the rows stored in --out",
    )
    args = parser.parse_args(argv)
    if args.markdown_only:
        return markdown_only(Path(args.out))
    if args.rerender:
        return rerender(Path(args.out))
    config = Config().with_overrides(
        {
            "models.chat": args.model,
            "grade.claims": args.claims,
            "grade.equivalence": args.equivalence,
            "grade.paths_per_hop": args.paths_per_hop,
        }
    )

    results: dict[str, Any] = {
        "model": args.model,
        "dataset": args.dataset,
        "metric": config.grade.metric,
        "aggregation": config.grade.aggregation,
        "command": " ".join(
            [
                "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RCA_MODELS__N_THREADS=1 .venv/bin/python "
                "benchmarks/grade.py",
                *(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
            ]
        ),
    }
    found = matrices(args, config)
    results["dr_edges"] = found["dr_edges"]
    results["dataset_questions"] = found["dataset_questions"]
    results["not_run"] = found["not_run"]
    results["aggregations"] = found["aggregations"]
    strategies = found["strategies"]
    if args.primary not in strategies:
        print(f"no run file for the end-to-end row {args.primary}", file=sys.stderr)
        return 2
    if args.generate_docs or args.generate_source != "demo":
        generated = generation(args, config)
    else:
        generated = {"questions": 0, "by_hops": {}, "skipped": "not run"}
    write_outputs(results, strategies, args.primary, generated, Path(args.out))
    return 0


def write_outputs(
    results: dict[str, Any],
    strategies: dict[str, Any],
    primary_name: str,
    generated: dict[str, Any],
    out: Path,
) -> None:
    """``grade.json`` (``results`` + the primary strategy's top-level keys + all strategies),
    ``grade.md`` (keeping its analysis section) and ``grade.png``."""
    primary = strategies[primary_name]["data"]
    results["primary_strategy"] = primary_name
    results["n"] = primary["n"]
    results["cells"] = [
        {k: c[k] for k in ("hops", "dr_bin", "n", "error_rate")} for c in primary["cells"]
    ]
    for key in (
        "r_bin_by_hop",
        "r_bin_diagonal",
        "pearson_dr_accuracy_by_hop",
        "pearson_dr_accuracy_all",
        "pearson_diagonal",
        "diagonal",
    ):
        results[key] = primary[key]
    results["strategies"] = {name: e["data"] for name, e in strategies.items()}
    results["generation"] = generated

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    save_heatmap(
        strategies[primary_name]["matrix"],
        out.with_suffix(".png"),
        title=f"MuSiQue, {primary_name}, {results['model']}: error rate (n={primary['n']})",
    )
    md_path = out.with_suffix(".md")
    previous = None
    if md_path.is_file():
        match = ANALYSIS.search(md_path.read_text(encoding="utf-8"))
        previous = match.group(0) if match else None
    ordered = {primary_name: strategies[primary_name]} | {
        k: v for k, v in strategies.items() if k != primary_name
    }
    md_path.write_text(
        markdown({**results, "_matrices": ordered}, primary_name, previous), encoding="utf-8"
    )
    print(f"wrote {out}, {md_path}, {out.with_suffix('.png')}")


def rerender(out: Path) -> int:
    """Rewrite the outputs from the per-strategy matrices stored in ``out``."""
    if not out.is_file():
        print(f"{out} does not exist; run the benchmark first", file=sys.stderr)
        return 2
    stored = json.loads(out.read_text(encoding="utf-8"))
    strategies = {}
    for name, data in stored["strategies"].items():
        matrix = DifficultyMatrix.from_dict(data)
        strategies[name] = {"matrix": matrix, "data": matrix.to_dict()}
    keep = ("model", "dataset", "metric", "aggregation", "dr_edges", "dataset_questions")
    results = {k: stored[k] for k in keep}
    results.update({k: stored[k] for k in ("command", "not_run", "aggregations") if k in stored})
    write_outputs(results, strategies, stored["primary_strategy"], stored["generation"], out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
