"""Stage 3 of GRADE's generation: knowledge-graph triples from claims.

Triples are extracted for ``grade.triples_per_prompt`` claims per prompt (1 by default: a
0.5B model repeats and mixes up triples when given several claims); both entities of a
triple must share a content word with their claim.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...text import as_text
from . import prompts
from .claims import item_number
from .kg import Triple, normalize_entity
from .llm import StepLLM
from .records import Claim
from .sentences import grounded

if TYPE_CHECKING:
    from ...config import GradeConfig

_BRACKET = re.compile(r"[()\[\]]")  # a triple is the bracket-free part holding a "|"


def parse_triples(
    text: str, ids: Sequence[str], sources: Sequence[str] | None = None
) -> tuple[list[Triple], Counter[str]]:
    """``(subject | relation | object | n)`` lines → triples for claim ``ids[n-1]``.

    Three fields are accepted when the prompt had one claim. With ``sources`` (the claim texts)
    both entities must share a content word with their claim (drops copied exemplars and
    invented entities).
    """
    triples: list[Triple] = []
    seen: set[Triple] = set()
    bad: Counter[str] = Counter()
    for raw in as_text(text).splitlines():  # bounded input
        line = raw.strip().lstrip("-*• ").strip()
        if "|" not in line:
            continue
        part = next(p for p in _BRACKET.split(line) if "|" in p)
        fields = [f.strip().strip("\"'`") for f in part.split("|")]
        fields = [f for f in fields if f != ""]
        if len(fields) == 3 and len(ids) == 1:
            fields.append("1")
        if len(fields) != 4:
            bad["triple_wrong_fields"] += 1
            continue
        subject, relation, obj, number = fields
        digits = re.sub(r"\D", "", number)
        if not digits or not 1 <= item_number(digits) <= len(ids):
            bad["triple_bad_claim_number"] += 1
            continue
        index = item_number(digits) - 1
        if not subject or not obj or not relation or normalize_entity(subject) == "":
            bad["triple_empty_field"] += 1
            continue
        if normalize_entity(subject) == normalize_entity(obj):
            bad["triple_self_loop"] += 1
            continue
        if sources is not None and not (
            grounded(subject, sources[index]) and grounded(obj, sources[index])
        ):
            bad["triple_ungrounded"] += 1
            continue
        triple = Triple(subject, relation, obj, ids[index])
        if triple in seen:
            continue
        seen.add(triple)
        triples.append(triple)
    return triples, bad


def extract_triples(llm: StepLLM, claims: Sequence[Claim], grade: GradeConfig) -> list[Triple]:
    """The grounded triples of every claim; unusable lines and replies are counted."""
    out: list[Triple] = []
    size = grade.triples_per_prompt
    for start in range(0, len(claims), size):
        batch = claims[start : start + size]
        texts = [c.text for c in batch]
        reply = llm.generate(
            "triples",
            prompts.triples_messages(texts),
            max_tokens=min(grade.max_tokens, 60 * len(batch)),
            stop=["\n\n"],
        )
        if reply is None:
            continue
        found, bad = parse_triples(reply, [c.id for c in batch], texts)
        llm.skipped.update(bad)
        if not found:
            llm.skipped["triples_none_in_reply"] += 1
        out.extend(found)
    return out
