"""What every benchmark script shares.

Import it first (``from _common import REPO, ...``; a script's own folder is on ``sys.path``):
it keeps Hugging Face, Chroma and LangSmith offline and puts the repository on ``sys.path``
so the scripts run from a checkout without installing. It also holds the analysis block that
a rerun keeps in a results markdown file, the writer of a JSON result and its markdown, and a
one-line machine description.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "LANGSMITH_TRACING": "false",
}.items():
    os.environ.setdefault(_key, _value)

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO / ".." / "shared" / "data"
ANALYSIS_START, ANALYSIS_END = "<!-- analysis:start -->", "<!-- analysis:end -->"
_ANALYSIS = re.compile(re.escape(ANALYSIS_START) + r"(.*?)" + re.escape(ANALYSIS_END), re.S)


def read_analysis(path: Path) -> str:
    """The hand-written text between the analysis markers of ``path`` ("" if none)."""
    if not path.is_file():
        return ""
    match = _ANALYSIS.search(path.read_text(encoding="utf-8"))
    return match.group(1) if match else ""


def analysis_block(text: str, placeholder: str = "_Analysis pending._") -> list[str]:
    """Markdown lines of the analysis block (``placeholder`` while ``text`` is empty)."""
    return [ANALYSIS_START, text.strip() or placeholder, ANALYSIS_END]


def machine() -> str:
    """E.g. ``x86_64, 2 cores, Python 3.11.7``."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def write_results(
    result: dict[str, Any], out: Path, render: Callable[[dict[str, Any], str], str]
) -> None:
    """``out`` (JSON) and its markdown ``render(result, analysis)``, keeping the markdown's
    analysis block."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    md = out.with_suffix(".md")
    md.write_text(render(result, read_analysis(md)), encoding="utf-8")
    print(f"wrote {out} and {md}", flush=True)
