"""Run a strategy over dataset records into a resumable, crash-safe JSONL run file.

One line per question (written only once the question is finished)::

    {"id", "dataset", "question", "gold", "prediction", "metrics", "retrieval", "strategy",
     "hops", "qtype", "supporting", "error", "trace", "llm_cache", "wall_seconds",
     "load_average", "finished_at"}

``metrics`` are the answer metrics, ``retrieval`` the evidence metrics (None without gold
supporting paragraphs), ``supporting`` the gold paragraph ids and titles, ``llm_cache`` the
call cache's hits, misses and the seconds the hits originally took, ``load_average`` the
machine's 1-minute load average when the question finished (timings mean little without it).

A strategy that needs the gold record (the ceilings, :class:`~.base.RecordStrategy`)
is called with the whole :class:`~.datasets.QARecord` instead of the question alone.

Guarantees:

* **Crash safety.** Each line goes to the file in one ``write`` on an append-only descriptor
  (and is fsynced, ``eval.fsync``). A killed run leaves every finished line intact; at worst
  the last line is cut short, and the next run truncates that torn tail before appending.
* **Resume, no duplicates.** A rerun reads the ids already in the file and answers only the
  others. An exclusive lock (``<run>.lock``) stops two processes from writing one file.
* **Same settings.** ``<run>.meta.json`` records the strategy, dataset and a fingerprint of
  the settings; resuming with different settings is refused (pick another ``--out``).
* **Errors.** A question whose strategy raises is recorded with ``error`` set and an empty
  prediction; a rerun retries such questions unless ``retry_errors=False``. Errors that stop
  every question (model or collection missing, server down: ``fatal_errors``) abort the
  run without writing anything for the question, and so do ``max_consecutive_errors``
  errors in a row.
* **Order.** Once every selected question is done the file is rewritten (atomically) in
  dataset order if concurrency or earlier interruptions left it out of order, so a complete
  run yields the same file however it got there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..errors import ConfigError, CorpusError, ModelNotAvailable, ModelServerError, RCAError
from ..models.cache import call_stats
from ..types import RunResult
from .base import RecordStrategy, Strategy
from .datasets import QARecord
from .metrics import answer_scores, evidence_paragraph_id, retrieval_scores

RUN_FORMAT = 1
FATAL_ERRORS: tuple[type[BaseException], ...] = (
    ModelNotAvailable,
    ModelServerError,
    CorpusError,
    ConfigError,
)
#: Keys whose values differ between two otherwise identical runs (timings, timestamps).
VOLATILE_KEYS = frozenset({"wall_seconds", "finished_at", "seconds", "llm_cache", "load_average"})


class RunFileError(RCAError):
    """A run file is unusable, locked by another run, or was made with other settings."""


class RunAborted(RCAError):
    """The run stopped early (too many errors in a row)."""


def meta_path(out: Path) -> Path:
    return out.with_name(out.name + ".meta.json")


def lock_path(out: Path) -> Path:
    return out.with_name(out.name + ".lock")


# --------------------------------------------------------------------------------------------
# Reading and repairing run files
# --------------------------------------------------------------------------------------------


def _scan(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Complete records of a run file and the byte length they span (torn tail excluded)."""
    records: list[dict[str, Any]] = []
    good = 0
    if not path.exists():
        return records, 0
    data = path.read_bytes()
    position = 0
    while position < len(data):
        newline = data.find(b"\n", position)
        if newline < 0:
            break  # the last line was cut short by a crash
        line = data[position:newline]
        if line.strip():
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                if data.find(b"\n", newline + 1) >= 0 or data[newline + 1 :].strip():
                    raise RunFileError(
                        f"{path}: line at byte {position} is not valid JSON ({exc}); the file "
                        "was edited or corrupted - move it away and rerun"
                    ) from exc
                break  # corrupt final line: treat as torn
            if not isinstance(record, dict) or "id" not in record:
                raise RunFileError(f"{path}: line at byte {position} is not a run record")
            records.append(record)
        position = newline + 1
        good = position
    return records, good


def read_run(path: str | Path) -> list[dict[str, Any]]:
    """The finished records of a run file (a torn last line is ignored)."""
    path = Path(path)
    if not path.is_file():
        raise RunFileError(f"run file {path} does not exist")
    return _scan(path)[0]


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``.meta.json`` beside a run file ({} when there is none)."""
    meta = meta_path(Path(path))
    if not meta.is_file():
        return {}
    try:
        value = json.loads(meta.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunFileError(f"{meta} is not valid JSON ({exc})") from exc
    return value if isinstance(value, dict) else {}


def _atomic_write(path: Path, payload: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _dumps(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")


@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    path = lock_path(out)
    handle = open(path, "a+b")  # noqa: SIM115 - held for the whole run
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RunFileError(
                f"another run is writing {out} (lock {path} is held); wait for it or pick "
                "another --out"
            ) from exc
        yield
    finally:
        handle.close()


# --------------------------------------------------------------------------------------------
# One question
# --------------------------------------------------------------------------------------------


def _error_info(exc: BaseException) -> dict[str, str]:
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
    }


def enrich_evidence(trace: dict[str, Any], resolve: Callable[[str], str | None] | None) -> None:
    """Add ``doc_id`` (the pooled paragraph id) to evidence entries that lack one."""
    evidence = trace.get("evidence")
    if resolve is None or not isinstance(evidence, list):
        return
    for item in evidence:
        if isinstance(item, dict) and evidence_paragraph_id(item) is None and item.get("id"):
            doc_id = resolve(str(item["id"]))
            if doc_id:
                item["doc_id"] = doc_id


def answer_record(
    record: QARecord,
    strategy: Strategy,
    *,
    strategy_name: str,
    resolve: Callable[[str], str | None] | None = None,
    recall_ks: Sequence[int] = (2, 5, 10),
    fatal_errors: tuple[type[BaseException], ...] = FATAL_ERRORS,
) -> dict[str, Any]:
    """Run one question and build its run-file line (fatal errors propagate)."""
    error: dict[str, str] | None = None
    trace: dict[str, Any] = {}
    prediction = ""
    with call_stats() as stats:
        started = time.perf_counter()
        try:
            result = (
                strategy.answer_record(record)
                if isinstance(strategy, RecordStrategy)
                else strategy(record.question)
            )
            if not isinstance(result, RunResult):
                raise TypeError(
                    f"strategy {strategy_name!r} returned {type(result).__name__}, not RunResult"
                )
            prediction = str(result.answer or "")
            trace = dict(result.trace or {})
        except fatal_errors:
            raise
        except Exception as exc:
            error = _error_info(exc)
        wall = time.perf_counter() - started
    enrich_evidence(trace, resolve)
    raw_evidence = trace.get("evidence")
    evidence: list[dict[str, Any]] = (
        [item for item in raw_evidence if isinstance(item, dict)]
        if isinstance(raw_evidence, list)
        else []
    )
    retrieval = (
        retrieval_scores(
            evidence,
            supporting_ids=record.supporting_ids,
            supporting_titles=record.supporting_titles,
            ks=recall_ks,
        )
        if error is None and record.has_retrieval_gold and trace.get("retrieval_calls") != 0
        else None
    )
    return {
        "id": record.id,
        "dataset": record.dataset,
        "question": record.question,
        "gold": list(record.answers),
        "prediction": prediction,
        "metrics": answer_scores(prediction, record.answers),
        "retrieval": retrieval,
        "strategy": strategy_name,
        "hops": record.hops,
        "qtype": record.qtype,
        "supporting": {
            "ids": list(record.supporting_ids),
            "titles": list(record.supporting_titles),
        },
        "error": error,
        "trace": trace,
        "llm_cache": stats.to_dict(),
        "wall_seconds": round(wall, 3),
        "load_average": round(os.getloadavg()[0], 2),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    """What one call of :func:`run_eval` did."""

    out: Path
    selected: int
    already_done: int
    answered: int
    errors: int
    complete: bool


def _check_meta(out: Path, meta: Mapping[str, Any]) -> None:
    existing = read_meta(out)
    if not existing:
        payload = {"format": RUN_FORMAT, **meta}
        payload.setdefault("created", datetime.now(UTC).isoformat(timespec="seconds"))
        _atomic_write(
            meta_path(out),
            json.dumps(payload, indent=2, ensure_ascii=False, default=str).encode("utf-8"),
        )
        return
    old, new = existing.get("fingerprint"), meta.get("fingerprint")
    if old is not None and new is not None and old != new:
        raise RunFileError(
            f"{out} was started with other settings (fingerprint {old}, now {new}; strategy "
            f"{existing.get('strategy')!r}, model {existing.get('model')!r}); resume it with "
            "the same settings or write to another --out"
        )


def run_eval(
    records: Sequence[QARecord],
    strategy: Strategy,
    out: str | Path,
    *,
    strategy_name: str,
    meta: Mapping[str, Any] | None = None,
    order: Sequence[str] | None = None,
    concurrency: int = 1,
    progress: bool = True,
    retry_errors: bool = True,
    resolve: Callable[[str], str | None] | None = None,
    recall_ks: Sequence[int] = (2, 5, 10),
    fsync: bool = True,
    fatal_errors: tuple[type[BaseException], ...] = FATAL_ERRORS,
    max_consecutive_errors: int | None = 10,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> RunSummary:
    """Answer every record not yet in ``out`` and append one line per finished question.

    ``order`` (all ids of the dataset file, in file order; default: ``records``) decides the
    final order of the file. ``meta`` is stored beside the run; its ``fingerprint`` guards
    resuming. See the module docstring for the guarantees.
    """
    out = Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    if concurrency < 1:
        raise ConfigError("concurrency must be at least 1")
    with _exclusive(out):
        _check_meta(out, {"strategy": strategy_name, **(meta or {})})
        existing, good_bytes = _scan(out)
        if out.exists() and out.stat().st_size != good_bytes:
            with open(out, "r+b") as handle:  # drop the torn tail of a killed run
                handle.truncate(good_bytes)
                os.fsync(handle.fileno())
        if retry_errors and any(r.get("error") for r in existing):
            existing = [r for r in existing if not r.get("error")]
            _atomic_write(out, b"".join(_dumps(r) for r in existing))
        done = {str(r["id"]) for r in existing}
        todo = [r for r in records if r.id not in done]
        already = len(records) - len(todo)

        answered = errors = consecutive = 0
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        bar = tqdm(
            total=len(records),
            initial=already,
            desc=f"{strategy_name}",
            unit="q",
            disable=not progress,
            dynamic_ncols=True,
        )
        sums = {"cover_em": 0.0, "f1": 0.0}

        def write(line: dict[str, Any]) -> None:
            nonlocal answered, errors, consecutive
            payload = _dumps(line)
            written = os.write(fd, payload)
            if written != len(payload):  # pragma: no cover - regular files write fully
                raise RunFileError(f"short write to {out}; the disk may be full")
            if fsync:
                os.fsync(fd)
            answered += 1
            if line["error"]:
                errors += 1
                consecutive += 1
            else:
                consecutive = 0
            sums["cover_em"] += line["metrics"]["cover_em"]
            sums["f1"] += line["metrics"]["f1"]
            bar.update(1)
            bar.set_postfix(
                cover_em=f"{sums['cover_em'] / answered:.3f}",
                f1=f"{sums['f1'] / answered:.3f}",
                errors=errors,
                refresh=False,
            )
            if on_record is not None:
                on_record(line)
            if max_consecutive_errors is not None and consecutive >= max_consecutive_errors:
                raise RunAborted(
                    f"{consecutive} questions in a row failed (last: {line['error']['type']}: "
                    f"{line['error']['message'][:300]}); fix the cause and rerun - finished "
                    f"questions are kept in {out} and failed ones are retried"
                )

        def answer(record: QARecord) -> dict[str, Any]:
            return answer_record(
                record,
                strategy,
                strategy_name=strategy_name,
                resolve=resolve,
                recall_ks=recall_ks,
                fatal_errors=fatal_errors,
            )

        try:
            if concurrency == 1:
                for record in todo:
                    write(answer(record))
            else:
                _run_parallel(todo, answer, write, concurrency)
        finally:
            bar.close()
            os.close(fd)

        final, _ = _scan(out)
        selected = {r.id for r in records}
        complete = selected <= {str(r["id"]) for r in final}
        if complete:
            _reorder(out, final, order if order is not None else [r.id for r in records])
        return RunSummary(out, len(records), already, answered, errors, complete)


def _run_parallel(
    todo: Sequence[QARecord],
    answer: Callable[[QARecord], dict[str, Any]],
    write: Callable[[dict[str, Any]], None],
    concurrency: int,
) -> None:
    """Answer with a thread pool; only this thread writes, as results arrive."""
    pending: set[Future[dict[str, Any]]] = set()
    queue = iter(todo)
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rca-eval")
    try:
        for record in queue:
            pending.add(executor.submit(answer, record))
            if len(pending) >= concurrency:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                write(future.result())
                for record in queue:
                    pending.add(executor.submit(answer, record))
                    break
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


def _reorder(out: Path, records: list[dict[str, Any]], order: Sequence[str]) -> None:
    position = {qid: i for i, qid in enumerate(order)}
    ranked = sorted(
        enumerate(records),
        key=lambda pair: (position.get(str(pair[1]["id"]), len(position)), pair[0]),
    )
    if [i for i, _ in ranked] != list(range(len(records))):
        _atomic_write(out, b"".join(_dumps(r) for _, r in ranked))


def strip_volatile(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record without timings and timestamps (for comparing two runs)."""
    clean: dict[str, Any] = {}
    for key, value in record.items():
        if key in VOLATILE_KEYS:
            continue
        clean[key] = strip_volatile(value) if isinstance(value, Mapping) else value
    return clean
