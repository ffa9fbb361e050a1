"""The bundled demo corpus: short factual paragraphs with multi-hop chains, and questions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEMO_DIR = Path(__file__).parent
DEMO_CORPUS = DEMO_DIR / "demo_corpus.jsonl"
DEMO_QUESTIONS = DEMO_DIR / "demo_questions.jsonl"


def load_demo_questions() -> list[dict[str, Any]]:
    """Demo questions with gold answers, hop counts and supporting paragraph ids."""
    with open(DEMO_QUESTIONS, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
