"""Stage 6 of GRADE's generation: a question per sampled path, whose answer is the path's
last entity.

``grade.question_mode="compose"`` (default) builds the question MuSiQue-style from one-hop
pieces: the LLM writes a one-hop question about the path's last fact and a noun-phrase
description of each bridge entity ("the city where Hayao Miyazaki was born"), nested by
string substitution, so the question provably covers every hop. ``"direct"`` is the paper's
single call over all triples (the packaged 0.5B model then mostly asks about the first hops
only). Either way a question is dropped by rule when it contains the answer, has no wh-word,
or does not mention the path's first entity.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...text import as_text, normalize_answer
from . import prompts
from .kg import KnowledgeGraph, Path
from .llm import StepLLM
from .sentences import grounded

if TYPE_CHECKING:
    from ...config import GradeConfig

#: One-hop questions (``("q", s, r, o, answer)``) and descriptions (``("d", s, r, o)``) already
#: asked for, shared across the paths of a run.
QuestionMemo = dict[tuple[str, ...], str | None]
Fact = tuple[str, str, str]

_QUESTION_START = re.compile(
    r"^(who|whom|whose|what|which|where|when|why|how|in which|at which|on which|from which|"
    r"is|are|was|were|did|does|do|name)\b",
    re.IGNORECASE,
)


_WH = re.compile(r"\b(who|whom|whose|what|which|where|when|why|how)\b", re.IGNORECASE)
_QUESTION_LABEL = re.compile(r"^(?:multi-hop\s+)?question\s*[:：-]\s*", re.IGNORECASE)
_OTHER_LABEL = re.compile(r"^(answer|chain)\s*:", re.IGNORECASE)
_DESCRIPTION_LABEL = re.compile(r"^\s*description\s*[:：-]\s*", re.IGNORECASE)


def parse_question(text: str) -> str | None:
    """The question of a ``Question: …`` reply (the first line that reads like one). Only
    the first :data:`~...agents.parsers.MAX_CHARS` characters are read."""
    for raw in as_text(text).splitlines():
        line = raw.strip().strip("*").strip()
        if not line:
            continue
        line = _QUESTION_LABEL.sub("", line)
        if _OTHER_LABEL.match(line):
            continue
        line = line.split("|")[0].strip().strip('"').strip()
        if "?" in line:
            line = line[: line.index("?") + 1]
        elif not _QUESTION_START.match(line):
            continue  # a statement, not a question
        if len(line.split()) >= 4:
            return line if line.endswith("?") else line.rstrip(".") + "?"
    return None


def parse_description(text: str, described: str) -> str | None:
    """A short noun phrase from a description reply (None if empty, too long, or naming the
    entity it should describe). Only the first :data:`~...agents.parsers.MAX_CHARS`
    characters are read."""
    for raw in as_text(text).splitlines():
        line = _DESCRIPTION_LABEL.sub("", raw.strip())
        line = line.strip().strip("\"'").rstrip(".").strip()
        if not line:
            continue
        if len(line.split()) > 16 or "?" in line:
            return None
        target = normalize_answer(described)
        if target and re.search(rf"\b{re.escape(target)}\b", normalize_answer(line)):
            return None
        return line
    return None


def replace_name(text: str, name: str, replacement: str) -> str | None:
    """``text`` with the first mention of ``name`` (case-insensitive, a leading "the" of the
    name optional) replaced by ``replacement``; None when ``name`` is not mentioned."""
    bare = re.sub(r"^(the|a|an)\s+", "", name.strip(), flags=re.IGNORECASE)
    pattern = re.compile(rf"(?<!\w)(?:the\s+)?{re.escape(bare)}(?!\w)", re.IGNORECASE)
    match = pattern.search(text)
    if match is None or not bare:
        return None
    out = text[: match.start()] + replacement + text[match.end() :]
    return out[:1].upper() + out[1:] if match.start() == 0 else out


def path_chain(kg: KnowledgeGraph, path: Path) -> list[Fact]:
    """The path's facts as (source name, relation, target name)."""
    return [(kg.name(lk.source), lk.triple.relation, kg.name(lk.target)) for lk in path.links]


def path_answer(kg: KnowledgeGraph, path: Path) -> str:
    """The surface name of the path's last entity (as written in its triple)."""
    last = path.links[-1]
    return last.triple.object.strip() if not last.mirrored else kg.name(path.end)


def check_question(
    llm: StepLLM, kg: KnowledgeGraph, path: Path, question: str, answer: str
) -> bool:
    """The rule checks (no answer leak, a wh-word, the first entity named); failures are
    counted."""
    norm_q, norm_a = normalize_answer(question), normalize_answer(answer)
    if norm_a and re.search(rf"\b{re.escape(norm_a)}\b", norm_q):
        llm.skipped["question_leaks_answer"] += 1
        return False
    if not _WH.search(question):
        llm.skipped["question_not_interrogative"] += 1
        return False
    if not grounded(kg.name(path.start), question):
        llm.skipped["question_misses_start_entity"] += 1
        return False
    return True


def write_question(
    llm: StepLLM, kg: KnowledgeGraph, path: Path, grade: GradeConfig
) -> tuple[str, str] | None:
    """The paper's direct mode: one call over the whole chain → (question, answer)."""
    answer = path_answer(kg, path)
    reply = llm.generate(
        "question",
        prompts.question_messages(path_chain(kg, path), answer),
        max_tokens=grade.question_max_tokens,
        stop=["\n"],
    )
    if reply is None:
        return None
    question = parse_question(reply)
    if question is None:
        llm.skipped["question_unparseable"] += 1
        return None
    if not check_question(llm, kg, path, question, answer):
        return None
    return question, answer


def hop_question(
    llm: StepLLM, fact: Fact, answer: str, memo: QuestionMemo, grade: GradeConfig
) -> str | None:
    """The one-hop question about ``fact`` whose answer is ``answer`` (memoised)."""
    key = ("q", *fact, answer)
    if key not in memo:
        reply = llm.generate(
            "hop_question",
            prompts.hop_question_messages(fact, answer),
            max_tokens=grade.question_max_tokens,
            stop=["\n"],
        )
        memo[key] = parse_question(reply) if reply is not None else None
        if reply is not None and memo[key] is None:
            llm.skipped["question_unparseable"] += 1
    return memo[key]


def describe(llm: StepLLM, fact: Fact, memo: QuestionMemo) -> str | None:
    """A noun phrase that describes the fact's target through its source (memoised)."""
    key = ("d", *fact)
    if key not in memo:
        reply = llm.generate(
            "description", prompts.description_messages(fact), max_tokens=32, stop=["\n"]
        )
        memo[key] = parse_description(reply, fact[2]) if reply is not None else None
        if reply is not None and memo[key] is None:
            llm.skipped["description_unusable"] += 1
    return memo[key]


def prefetch(
    llm: StepLLM, kg: KnowledgeGraph, paths: Sequence[Path], memo: QuestionMemo, grade: GradeConfig
) -> None:
    """Run all one-hop questions, then all descriptions, so consecutive prompts share
    their (system + exemplars) prefix and llama.cpp reuses its KV cache."""
    chains = [path_chain(kg, p) for p in paths]
    for path, chain in zip(paths, chains, strict=True):
        hop_question(llm, chain[-1], path_answer(kg, path), memo, grade)
    for path, chain in zip(paths, chains, strict=True):
        if memo.get(("q", *chain[-1], path_answer(kg, path))) is None:
            continue  # the path cannot be composed; its descriptions are not needed
        for fact in chain[:-1]:
            describe(llm, fact, memo)


def compose_question(
    llm: StepLLM, kg: KnowledgeGraph, path: Path, memo: QuestionMemo, grade: GradeConfig
) -> tuple[str, str] | None:
    """MuSiQue-style composition: a one-hop question about the last fact whose subject is
    replaced by a nested description of the bridge entities (one LLM call per distinct
    fact, shared across paths through ``memo``)."""
    answer = path_answer(kg, path)
    *bridges, last = path_chain(kg, path)
    question = hop_question(llm, last, answer, memo, grade)
    if question is None:
        return None
    description: str | None = None
    for s, r, o in bridges:
        current = describe(llm, (s, r, o), memo)
        if current is None:
            return None
        if description is not None:
            current = replace_name(current, s, description)
            if current is None:
                llm.skipped["description_misses_entity"] += 1
                return None
        description = current
    composed = question if description is None else replace_name(question, last[0], description)
    if composed is None:
        llm.skipped["question_misses_bridge_entity"] += 1
        return None
    if not check_question(llm, kg, path, composed, answer):
        return None
    return composed, answer
