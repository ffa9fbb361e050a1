"""Calibrating RRCP's thresholds on labelled dev data and saving them in a TOML config.

Labelled data is JSONL, one question per line::

    {"question": "...", "references": ["..."], "complex": true}

(``answers`` is accepted for ``references``; ``complex`` may be true/false or 1/0). A line
that already holds ``max_s`` and ``S_D`` (e.g. written by ``benchmarks/rrcp.py`` or
``rca rc score --json``) is used as is, without retrieval or model calls.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from .rrcp import Calibration, Method, RetrievalComplexity, Scored, calibrate


@dataclass(frozen=True)
class Labelled:
    question: str
    references: tuple[str, ...]
    label: bool
    max_s: float | None = None
    S_D: float | None = None


def _label(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in {"true", "false", "1", "0"}:
        return value.strip().lower() in {"true", "1"}
    raise InputError(f"{where}: 'complex' must be true/false or 1/0, got {value!r}")


def load_labelled(path: str | Path) -> list[Labelled]:
    """Read labelled questions (see the module docstring); bad lines raise InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"labelled data {path} does not exist")
    items: list[Labelled] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not JSON ({exc})") from exc
            if not isinstance(raw, dict) or not str(raw.get("question", "")).strip():
                raise InputError(f"{where}: needs a non-empty 'question'")
            if "complex" not in raw:
                raise InputError(f"{where}: needs a 'complex' label")
            refs = raw.get("references", raw.get("answers", [])) or []
            if isinstance(refs, str):
                refs = [refs]
            scores = (raw.get("max_s"), raw.get("S_D"))
            items.append(
                Labelled(
                    question=str(raw["question"]),
                    references=tuple(str(r) for r in refs),
                    label=_label(raw["complex"], where),
                    max_s=float(scores[0]) if scores[0] is not None else None,
                    S_D=float(scores[1]) if scores[1] is not None else None,
                )
            )
    if not items:
        raise InputError(f"{path} holds no labelled questions")
    return items


def score_labelled(
    items: Sequence[Labelled],
    pipeline: RetrievalComplexity | Callable[[], RetrievalComplexity] | None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[Scored]:
    """max s_i and S_D per question (from the line when present, else by running RRCP)."""
    scored: list[Scored] = []
    built: RetrievalComplexity | None = None
    for index, item in enumerate(items):
        if item.max_s is not None and item.S_D is not None:
            scored.append(Scored(item.max_s, item.S_D, item.label))
        else:
            if built is None:
                if pipeline is None:
                    raise ConfigError("questions without scores need an RRCP pipeline")
                built = pipeline if isinstance(pipeline, RetrievalComplexity) else pipeline()
            result = built.score(item.question, item.references)
            scored.append(Scored(result.max_s, result.S_D, item.label))
        if progress is not None:
            progress(index + 1, len(items))
    return scored


def calibrate_labelled(
    items: Sequence[Labelled],
    pipeline: RetrievalComplexity | Callable[[], RetrievalComplexity] | None,
    method: Method = "rrcp",
    *,
    defaults: tuple[float, float] = (0.15, 0.80),
) -> Calibration:
    return calibrate(score_labelled(items, pipeline), method, defaults=defaults)


_HEADER = re.compile(r"^\s*\[([^\]]+)\]\s*(#.*)?$")


def write_thresholds(path: str | Path, T_ans: float, T_com: float) -> Path:
    """Set ``[rrcp] T_ans`` / ``T_com`` in a TOML file, keeping everything else in it."""
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if text:
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML ({exc}); fix it or use --out") from exc
    values = {"T_ans": f"{T_ans:.6g}", "T_com": f"{T_com:.6g}"}
    lines = text.splitlines()
    start = next(
        (
            i
            for i, ln in enumerate(lines)
            if (m := _HEADER.match(ln)) and m.group(1).strip() == "rrcp"
        ),
        None,
    )
    if start is None:
        block = ["", "[rrcp]"] if lines else ["[rrcp]"]
        block += [f"{key} = {value}" for key, value in values.items()]
        lines += block
    else:
        end = next((i for i in range(start + 1, len(lines)) if _HEADER.match(lines[i])), len(lines))
        seen: set[str] = set()
        for i in range(start + 1, end):
            key = lines[i].split("=", 1)[0].strip()
            if key in values and "=" in lines[i]:
                lines[i] = f"{key} = {values[key]}"
                seen.add(key)
        missing = [f"{k} = {v}" for k, v in values.items() if k not in seen]
        lines[start + 1 : start + 1] = missing
    out = "\n".join(lines) + "\n"
    tomllib.loads(out)  # never write a file the config loader cannot read
    path.write_text(out, encoding="utf-8")
    return path
