"""Stage 5 of GRADE's generation: entity equivalence inside each cluster of claims.

The LLM groups the names of a cluster's most frequent entities that denote the same thing,
as ``always`` (merged into one node) or ``context`` (edges mirrored between the nodes).
*Deviations:* a proposed equivalent name must share a content word with the group's first
name or reach ``grade.equivalence_min_cosine`` (a 0.5B model groups unrelated names, e.g. a
film and its director); ``grade.equivalence="pairs"`` replaces the group prompt by a Yes/No
question per pair of names that look like one name written two ways (:func:`alias_pairs`),
merged on Yes.
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
    """Find equivalent names per cluster (``grade.equivalence``) and apply them to ``kg``;
    groups applied by kind."""
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
        claims = [c.text for c in members]
        if grade.equivalence == "pairs":
            groups = confirmed_pairs(llm, claims, entities)
        else:
            groups = proposed_groups(llm, claims, entities, embedder, grade.equivalence_min_cosine)
        within = {c.id for c in members}
        for names, kind in groups:
            if len({kg.key(n) for n in names}) < 2:
                continue
            if kg.apply_equivalence(names, kind, within=within):  # type: ignore[arg-type]
                applied[kind] += 1
    return dict(applied)


def proposed_groups(
    llm: StepLLM,
    claims: Sequence[str],
    entities: Sequence[str],
    embedder: SentenceTransformerEmbedder,
    min_cosine: float,
) -> list[tuple[list[str], str]]:
    """The paper's step: the LLM groups ``entities`` as ``always`` or ``context``; names it
    invents are dropped, and so are names unlike the group's first (:func:`similar_names`)."""
    reply = llm.generate(
        "equivalence", prompts.equivalence_messages(claims, entities), max_tokens=120
    )
    if reply is None:
        return []
    groups, bad = parse_groups(reply)
    llm.skipped.update(bad)
    known = {normalize_entity(e): e for e in entities}
    out = []
    for names, kind in groups:
        valid = []
        for name in names:
            match = known.get(normalize_entity(name))
            if match is None:
                llm.skipped["equivalence_unknown_entity"] += 1
            elif match not in valid:
                valid.append(match)
        out.append((similar_names(valid, embedder, min_cosine, llm.skipped), kind))
    return out


_NOT_A_GIVEN_NAME = frozenset(
    {"the", "north", "south", "east", "west", "northern", "southern", "eastern", "western"}
)


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and word.replace("-", "").replace(".", "").isalpha()


def alias_pairs(entities: Sequence[str]) -> list[tuple[str, str]]:
    """(short, long) pairs of ``entities`` that look like one name written two ways: a name
    and the same name with a qualifier (``Ann Arbor`` / ``Ann Arbor, Michigan``, ``Green`` /
    ``Green (album)``), or a surname and the one full name of the list that ends with it
    (``Pepys`` / ``Samuel Pepys``; not ``South Jakarta``). The candidates of
    ``grade.equivalence="pairs"``."""
    pairs = []
    full_names: dict[str, list[str]] = {}
    for long in entities:
        words = long.split()
        if (
            2 <= len(words) <= 4
            and all(map(_capitalised, words))
            and words[0].lower() not in _NOT_A_GIVEN_NAME
        ):
            full_names.setdefault(words[-1], []).append(long)
    for short in entities:
        if not short[:1].isupper():
            continue
        pairs += [
            (short, long) for long in entities if long.startswith((f"{short}, ", f"{short} ("))
        ]
        if _capitalised(short) and len(full_names.get(short, [])) == 1:
            pairs.append((short, full_names[short][0]))
    return pairs


def confirmed_pairs(
    llm: StepLLM, claims: Sequence[str], entities: Sequence[str]
) -> list[tuple[list[str], str]]:
    """The :func:`alias_pairs` of ``entities`` the LLM calls the same thing (P(yes) >= 0.5),
    each as an ``always`` group (deviation from the paper, see ``grade.equivalence``)."""
    out: list[tuple[list[str], str]] = []
    for short, long in alias_pairs(entities):
        p = llm.yes("alias", prompts.alias_messages(claims, short, long))
        if p is not None and p >= 0.5:
            out.append(([long, short], "always"))
        elif p is not None:
            llm.skipped["alias_rejected"] += 1
    return out


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
