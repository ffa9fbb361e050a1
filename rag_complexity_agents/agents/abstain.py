"""Honest abstention: a run's final answer is never a few-shot exemplar's answer that the
run's evidence does not support.

Each loop already drops its own exemplars' answers as they appear (:func:`.steps.copied_exemplar`
with the loop's set); :func:`exemplar_answers` gathers the answers of every exemplar this
package shows a model (the loops' prompts in :mod:`.prompts` and the Meta Evidence Reasoner's),
so the final answer can be checked against all of them, whichever prompt it came through.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..text import normalize_answer


@lru_cache(maxsize=1)
def exemplar_answers() -> frozenset[str]:
    """Every final and intermediate answer of every few-shot exemplar (loop prompts and MER)."""
    from ..retrieval.mer import DEFAULT_EXEMPLARS
    from .prompts import cot, react, searchain, self_ask

    answers: set[str] = set()
    for module in (cot, react, searchain, self_ask):
        answers |= module.exemplar_answers()
    for exemplar in DEFAULT_EXEMPLARS:
        answers.add(exemplar.answer)
        answers.update(answer for _, answer in exemplar.path)
    return frozenset(answers)


def unsupported_exemplar(answer: str, state: Mapping[str, Any]) -> bool:
    """True when ``answer`` is a few-shot exemplar's answer (:func:`exemplar_answers`; not
    'yes' / 'no', which are a kind of answer rather than content) that no passage the run
    retrieved contains (title or text, whole words after normalisation): the run should say
    it found nothing. A run that retrieved nothing at all (closed book, e.g. the
    ``no_retrieval`` loop) answers from the model's knowledge and is left alone."""
    retrievals = state.get("retrievals") or []
    norm = normalize_answer(answer)
    if not retrievals or norm not in _guarded_answers():
        return False
    for record in retrievals:
        for doc in record.get("docs") or []:
            text = normalize_answer(f"{doc.get('title', '')} {doc.get('text', '')}")
            if f" {norm} " in f" {text} ":
                return False
    return True


@lru_cache(maxsize=1)
def _guarded_answers() -> frozenset[str]:
    return frozenset(normalize_answer(a) for a in exemplar_answers()) - {"", "yes", "no"}


__all__ = ["exemplar_answers", "unsupported_exemplar"]
