"""Stage 2 of GRADE's generation: decontextualised claims and their consistency check.

The LLM rewrites several sentences per prompt (``grade.sentences_per_prompt``) as standalone
claims; ``grade.claims="rule"`` replaces that step by a pronoun substitution with the document
title (the packaged 0.5B model copies sentences unchanged anyway). A second LLM call judges
whether each LLM claim is consistent with its sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...text import as_text
from . import prompts
from .kg import normalize_entity
from .llm import StepLLM
from .records import Claim, Sentence

if TYPE_CHECKING:
    from ...config import GradeConfig

_PRONOUN = re.compile(
    r"\b(he|she|it|they|his|her|its|their|the (?:city|company|film|novel|book|country|"
    r"university|river|band|team|town|state|museum|building|tower|mountain|island))\b",
    re.IGNORECASE,
)
_POSSESSIVE = frozenset({"his", "her", "its", "their"})


def rule_claim(sentence: str, title: str) -> str:
    """Rule-based decontextualisation: the first pronoun or "the city"-style reference within
    the first six words becomes the document title (possessives get 's), unless the sentence
    already names the title before it."""
    title = title.strip()
    match = _PRONOUN.search(sentence)
    if not title or match is None or len(sentence[: match.start()].split()) > 5:
        return sentence
    if normalize_entity(title) in normalize_entity(sentence[: match.start()]):
        return sentence
    word = match.group(1).lower()
    replacement = f"{title}'s" if word in _POSSESSIVE else title
    return sentence[: match.start()] + replacement + sentence[match.end() :]


_NUMBERED = re.compile(r"^\s*(?:[-*•]\s*)?(?:claim\s*)?\(?(\d+)[.):\]]\s*(.*)$", re.IGNORECASE)
_NONE = re.compile(r"^\W*(none|n/?a|no claim|-)\W*$", re.IGNORECASE)
MAX_NUMBER_DIGITS = 9
"""Longest run of digits (leading zeros aside) read as an item number."""


def item_number(digits: str) -> int:
    """The value of a run of digits; -1 for a run too long to be an item number (``int``
    on thousands of digits raises, and costs quadratic time below that limit)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= MAX_NUMBER_DIGITS else -1


def parse_numbered(text: str, n: int) -> tuple[dict[int, str], Counter[str]]:
    """Lines ``k. item`` for k in 1..n (first occurrence wins); NONE items are dropped. Only
    the first :data:`~...agents.parsers.MAX_CHARS` characters are read."""
    out: dict[int, str] = {}
    bad: Counter[str] = Counter()
    for line in as_text(text).splitlines():
        match = _NUMBERED.match(line)
        if not match:
            continue
        k, item = item_number(match.group(1)), match.group(2).strip().strip('"').strip()
        if not 1 <= k <= n:
            bad["claim_bad_number"] += 1
            continue
        if k in out:
            continue
        if not item or _NONE.match(item):
            bad["claim_none"] += 1
            out[k] = ""
            continue
        out[k] = item
    return {k: v for k, v in out.items() if v}, bad


def write_claims(
    llm: StepLLM, sentences: Sequence[Sentence], contexts: dict[str, str], grade: GradeConfig
) -> list[Claim]:
    """One claim per sentence (by rule, or by the LLM over batches of a document's
    sentences with the start of the document as context); unusable items are counted."""
    if grade.claims == "rule":
        return [Claim(s.id, s, rule_claim(s.text, s.title)) for s in sentences]
    out: list[Claim] = []
    by_doc: dict[str, list[Sentence]] = {}
    for s in sentences:
        by_doc.setdefault(s.doc_id, []).append(s)
    size = grade.sentences_per_prompt
    for doc_id, group in by_doc.items():
        for start in range(0, len(group), size):
            batch = group[start : start + size]
            messages = prompts.claims_messages(
                batch[0].title, contexts[doc_id][:1200], [s.text for s in batch]
            )
            reply = llm.generate("claims", messages, max_tokens=grade.max_tokens)
            if reply is None:
                continue
            items, bad = parse_numbered(reply, len(batch))
            llm.skipped.update(bad)
            for k, sentence in enumerate(batch, start=1):
                text = items.get(k)
                if text is None:
                    llm.skipped["claim_missing"] += 1
                    continue
                out.append(Claim(sentence.id, sentence, text))
    return out


def consistent_claims(llm: StepLLM, claims: Sequence[Claim], grade: GradeConfig) -> list[Claim]:
    """LLM claims that the model judges inconsistent with their sentence are dropped (rule
    claims only substitute a pronoun and are consistent by construction)."""
    if grade.consistency == "none" or grade.claims == "rule":
        return list(claims)
    kept = []
    for claim in claims:
        p = llm.yes("consistency", prompts.consistency_messages(claim.sentence.text, claim.text))
        if p is None:
            continue
        if p < grade.consistency_threshold:
            llm.skipped["claim_inconsistent"] += 1
            continue
        kept.append(claim)
    return kept
