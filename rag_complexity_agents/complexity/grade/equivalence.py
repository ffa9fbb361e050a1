"""Stage 5 of GRADE's generation: entity equivalence inside each cluster of claims.

The LLM groups the names of a cluster's most frequent entities that denote the same thing,
as ``always`` (merged into one node) or ``context`` (edges mirrored between the nodes).
*Deviation:* a proposed equivalent name must share a content word with the group's first
name or reach ``grade.equivalence_min_cosine`` (a 0.5B model groups unrelated names, e.g. a
film and its director).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...text import as_text
from . import prompts
from .difficulty import cosine_similarities
from .kg import KnowledgeGraph, Triple, normalize_entity
from .llm import StepLLM
from .records import Claim
from .sentences import content_words

if TYPE_CHECKING:
    from ...config import GradeConfig
    from ...models.embeddings import SentenceTransformerEmbedder

_GROUP = re.compile(r"\[([^\[\]]+)\]\s*[\"']?\s*(always|context)?", re.IGNORECASE)


def parse_groups(text: str) -> tuple[list[tuple[list[str], str]], Counter[str]]:
    """``[a | b | c] always|context`` lines → (names, kind); NONE → no groups."""
    groups: list[tuple[list[str], str]] = []
    bad: Counter[str] = Counter()
    for line in as_text(text).splitlines():  # bounded input
        match = _GROUP.search(line)
        if not match:
            continue
        names = [n.strip().strip("\"'") for n in re.split(r"[|;]", match.group(1))]
        names = [n for n in names if n]
        kind = (match.group(2) or "").lower()
        if not kind:
            tail = line[match.end() :].lower()
            kind = "always" if "always" in tail else "context" if "context" in tail else ""
        if not kind:
            bad["equivalence_no_kind"] += 1
            continue
        if len(names) < 2:
            bad["equivalence_single_name"] += 1
            continue
        groups.append((names, kind))
    return groups, bad


def apply_equivalences(
    llm: StepLLM,
    kg: KnowledgeGraph,
    clusters: Sequence[Sequence[Claim]],
    triples: Sequence[Triple],
    embedder: SentenceTransformerEmbedder,
    grade: GradeConfig,
) -> dict[str, int]:
    """Ask for equivalent names per cluster and apply them to ``kg``; groups applied by kind."""
    applied = Counter[str]()
    by_claim: dict[str, list[Triple]] = {}
    for t in triples:
        by_claim.setdefault(t.sentence_id, []).append(t)
    for members in clusters:
        counts: Counter[str] = Counter()
        for claim in members:
            for t in by_claim.get(claim.id, []):
                for name in (t.subject, t.object):
                    if kg.key(name) in kg.graph:
                        counts[kg.name(kg.key(name))] += 1
        entities = [name for name, _ in counts.most_common(grade.max_entities_per_cluster)]
        if len(entities) < 2:
            continue
        messages = prompts.equivalence_messages([c.text for c in members], entities)
        reply = llm.generate("equivalence", messages, max_tokens=120)
        if reply is None:
            continue
        groups, bad = parse_groups(reply)
        llm.skipped.update(bad)
        known = {normalize_entity(e): e for e in entities}
        for names, kind in groups:
            valid = []
            for name in names:
                match = known.get(normalize_entity(name))
                if match is None:
                    llm.skipped["equivalence_unknown_entity"] += 1
                elif match not in valid:
                    valid.append(match)
            valid = similar_names(valid, embedder, grade.equivalence_min_cosine, llm.skipped)
            if len({kg.key(v) for v in valid}) < 2:
                continue
            within = {c.id for c in members}
            if kg.apply_equivalence(valid, kind, within=within):  # type: ignore[arg-type]
                applied[kind] += 1
    return dict(applied)


def similar_names(
    names: list[str],
    embedder: SentenceTransformerEmbedder,
    min_cosine: float,
    skipped: Counter[str],
) -> list[str]:
    """The names that share a content word with the first one or reach ``min_cosine``
    (the first always stays); the others are counted as rejected."""
    if len(names) < 2:
        return names
    vectors = embedder.encode(names)
    sims = cosine_similarities(vectors[0], vectors[1:])
    kept = [names[0]]
    first = content_words(names[0])
    for name, sim in zip(names[1:], sims, strict=True):
        if first & content_words(name) or sim >= min_cosine:
            kept.append(name)
        else:
            skipped["equivalence_rejected_dissimilar"] += 1
    return kept
