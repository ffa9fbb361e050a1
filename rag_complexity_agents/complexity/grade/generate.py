"""GRADE's generation pipeline: difficulty-controlled multi-hop questions from documents.

documents → sentences → factual filter → decontextualised claims (LLM) + consistency check
(LLM) → triples (LLM) → knowledge graph (exact-match merge) → soft clustering of claims (Gaussian
mixture over claim embeddings) → entity equivalence inside each cluster (LLM; "always" merges,
"context" mirrors edges) → shortest 2–5-hop paths, one per (start, end) → sampled per hop count
→ a question per path whose answer is the path's last entity (LLM) → validation drops
ambiguous pairs (LLM) → records with hops, path, supporting chunks, D_r and the links that
exist only by equivalence.

Small local models break formats: every LLM reply is parsed leniently and whatever cannot be
used is skipped and counted in :attr:`GenerationResult.skipped` (a ``Counter`` of reasons);
nothing malformed raises. Every LLM step is cached on disk (an :class:`LLMCallCache`, keyed by
step, prompt and model identity), so an interrupted run resumes where it stopped.

Deviations from the paper, for CPU-sized models (each documented where it is configured):

* the factual filter is a rule (a sentence with a verb-like word and a name, number or date,
  not a question or an opinion) instead of an LLM call;
* claims are written for several sentences per prompt (``grade.sentences_per_prompt``) and
  triples for ``grade.triples_per_prompt`` claims (1 by default: a 0.5B model repeats and
  mixes up triples when given several claims); ``grade.claims="rule"`` replaces the LLM
  claim step by a pronoun substitution with the document title (the packaged 0.5B model
  copies sentences unchanged anyway); the paper's LLM step stays the default;
* claim embeddings are reduced by PCA before the Gaussian mixture (few claims, 384 dims);
* a proposed equivalent name must share a content word with the group's first name or reach
  ``grade.equivalence_min_cosine`` (a 0.5B model groups unrelated names, e.g. a film and its
  director);
* ``grade.question_mode="compose"`` (default) builds the question MuSiQue-style from one-hop
  pieces: the LLM writes a one-hop question about the path's last fact and a noun-phrase
  description of each bridge entity ("the city where Hayao Miyazaki was born"), nested by
  string substitution, so the question provably covers every hop; ``"direct"`` is the
  paper's single call over all triples (the packaged 0.5B model then mostly asks about the
  first hops only);
* the answer is the surface name of the path's last entity; a question is also dropped by rule
  when it contains the answer, has no wh-word, or does not mention the path's first entity.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...config import Config
from ...corpus.documents import SourceDocument, chunk_grade_setting
from ...errors import InputError, ModelNotAvailable, ModelServerError
from ...text import normalize_answer
from . import prompts
from .difficulty import cosine_similarities, retrieval_difficulty
from .kg import KnowledgeGraph, Path, Triple, normalize_entity, sample_paths

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ...eval.cache import LLMCallCache
    from ...models.embeddings import SentenceTransformerEmbedder

ProgressFn = Callable[[str], None]

# --------------------------------------------------------------------------------------------
# Sentences and the factual filter (pure)
# --------------------------------------------------------------------------------------------

_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "jr",
        "sr",
        "vs",
        "etc",
        "inc",
        "ltd",
        "co",
        "no",
        "fig",
        "e.g",
        "i.e",
        "u.s",
        "u.k",
        "approx",
    ]
)
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_OPINION = re.compile(
    r"\b(i|we|you|my|our|your|think|believe|feel|perhaps|maybe|should|must|opinion)\b",
    re.IGNORECASE,
)
_VERBISH = re.compile(
    r"\b(is|are|was|were|be|been|has|have|had|\w+ed|\w+s|became|won|wrote|made|built|began|"
    r"lies|rose|took|gave|held|ran|led|grew|flows|stands)\b",
    re.IGNORECASE,
)
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "and",
        "or",
        "with",
        "from",
        "as",
        "is",
        "was",
        "were",
        "be",
        "its",
        "his",
        "her",
        "their",
        "this",
        "that",
        "which",
        "who",
        "whom",
        "whose",
        "it",
        "he",
        "she",
        "they",
    ]
)


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences without breaking initials (J. R. R. Tolkien) or common
    abbreviations (U.S., Dr.)."""
    pieces: list[str] = []
    start = 0
    for match in _SPLIT.finditer(text):
        before = text[start : match.start() + 1].rstrip()
        last = before.rsplit(None, 1)[-1] if before.split() else ""
        token = last.rstrip(".!?\"')]").lower()
        if (len(token) == 1 and token.isalpha()) or token in _ABBREVIATIONS:
            continue
        if last.endswith(".") and re.fullmatch(r"(?:[A-Za-z]\.){2,}", last):
            continue
        pieces.append(text[start : match.end()].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return [" ".join(p.split()) for p in pieces if p.strip()]


def is_factual(sentence: str, *, min_words: int = 5, max_words: int = 80) -> bool:
    """Rule-based factual filter: a declarative sentence of reasonable length with a
    verb-like word and a name, number or date, and no first/second person or opinion words."""
    words = _WORD.findall(sentence)
    if not min_words <= len(sentence.split()) <= max_words or len(words) < 3:
        return False
    if sentence.rstrip().endswith("?") or _OPINION.search(sentence):
        return False
    has_anchor = any(ch.isdigit() for ch in sentence) or any(w[0].isupper() for w in words[1:])
    return has_anchor and bool(_VERBISH.search(sentence))


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


def content_words(text: str) -> set[str]:
    return {w for w in normalize_entity(text).split() if w not in _STOP}


def grounded(name: str, text: str) -> bool:
    """Whether an extracted entity name shares a content word with its source text."""
    words = content_words(name)
    return bool(words) and bool(words & content_words(text))


# --------------------------------------------------------------------------------------------
# Lenient parsers (pure): they return what is usable plus a Counter of what was not
# --------------------------------------------------------------------------------------------

_NUMBERED = re.compile(r"^\s*(?:[-*•]\s*)?(?:claim\s*)?\(?(\d+)[.):\]]\s*(.*)$", re.IGNORECASE)
_NONE = re.compile(r"^\W*(none|n/?a|no claim|-)\W*$", re.IGNORECASE)


def parse_numbered(text: str, n: int) -> tuple[dict[int, str], Counter[str]]:
    """Lines ``k. item`` for k in 1..n (first occurrence wins); NONE items are dropped."""
    out: dict[int, str] = {}
    bad: Counter[str] = Counter()
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if not match:
            continue
        k, item = int(match.group(1)), match.group(2).strip().strip('"').strip()
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


_TRIPLE_LINE = re.compile(r"[(\[]?([^()\[\]]*\|[^()\[\]]*)[)\]]?")


def parse_triples(
    text: str, ids: Sequence[str], sources: Sequence[str] | None = None
) -> tuple[list[Triple], Counter[str]]:
    """``(subject | relation | object | n)`` lines → triples for claim ``ids[n-1]``.

    Three fields are accepted when the prompt had one claim. With ``sources`` (the claim texts)
    both entities must share a content word with their claim (drops copied exemplars and
    invented entities).
    """
    triples: list[Triple] = []
    bad: Counter[str] = Counter()
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*• ").strip()
        if "|" not in line:
            continue
        match = _TRIPLE_LINE.search(line)
        fields = [f.strip().strip("\"'`") for f in (match.group(1) if match else line).split("|")]
        fields = [f for f in fields if f != ""]
        if len(fields) == 3 and len(ids) == 1:
            fields.append("1")
        if len(fields) != 4:
            bad["triple_wrong_fields"] += 1
            continue
        subject, relation, obj, number = fields
        digits = re.sub(r"\D", "", number)
        if not digits or not 1 <= int(digits) <= len(ids):
            bad["triple_bad_claim_number"] += 1
            continue
        index = int(digits) - 1
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
        if triple in triples:
            continue
        triples.append(triple)
    return triples, bad


_GROUP = re.compile(r"\[([^\]]+)\]\s*[\"']?\s*(always|context)?", re.IGNORECASE)


def parse_groups(text: str) -> tuple[list[tuple[list[str], str]], Counter[str]]:
    """``[a | b | c] always|context`` lines → (names, kind); NONE → no groups."""
    groups: list[tuple[list[str], str]] = []
    bad: Counter[str] = Counter()
    for line in text.splitlines():
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


_QUESTION_START = re.compile(
    r"^(who|whom|whose|what|which|where|when|why|how|in which|at which|on which|from which|"
    r"is|are|was|were|did|does|do|name)\b",
    re.IGNORECASE,
)


_WH = re.compile(r"\b(who|whom|whose|what|which|where|when|why|how)\b", re.IGNORECASE)


def parse_question(text: str) -> str | None:
    """The question of a ``Question: …`` reply (the first line that reads like one)."""
    for raw in text.splitlines():
        line = raw.strip().strip("*").strip()
        if not line:
            continue
        line = re.sub(r"^(?:multi-hop\s+)?question\s*[:：-]\s*", "", line, flags=re.IGNORECASE)
        if re.match(r"^(answer|chain)\s*:", line, re.IGNORECASE):
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
    entity it should describe)."""
    for raw in text.splitlines():
        line = re.sub(r"^\s*description\s*[:：-]\s*", "", raw.strip(), flags=re.IGNORECASE)
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


def parse_yes_no(text: str) -> float | None:
    """1.0 for a reply starting with yes/true, 0.0 for no/false, None otherwise."""
    word = re.sub(r"[^a-z]", " ", text.lower()).split()
    if not word:
        return None
    if word[0] in {"yes", "true", "consistent", "valid"}:
        return 1.0
    if word[0] in {"no", "false", "inconsistent", "invalid"}:
        return 0.0
    return None


# --------------------------------------------------------------------------------------------
# Cached LLM steps
# --------------------------------------------------------------------------------------------

_FATAL = (ModelNotAvailable, ModelServerError)


class StepLLM:
    """Runs and caches the pipeline's LLM calls; failures are counted, never raised
    (except a missing model or a dead model server, which no retry can fix)."""

    def __init__(
        self, chat: BaseChatModel, cache: LLMCallCache | None, skipped: Counter[str]
    ) -> None:
        self.chat = chat
        self.cache = cache
        self.skipped = skipped
        self.calls: Counter[str] = Counter()
        self.hits: Counter[str] = Counter()
        self._identity: str | None = None

    def _key(self, step: str, messages: prompts.Messages, **params: Any) -> str:
        if self._identity is None:
            from ...eval.cache import model_identity

            self._identity = json.dumps(model_identity(self.chat), sort_keys=True, default=str)
        payload = json.dumps([step, messages, params, self._identity], ensure_ascii=False)
        return "grade:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def _cached(self, step: str, key: str) -> Any:
        if self.cache is None:
            return None
        entry = self.cache.get(key)
        if entry is None:
            return None
        self.hits[step] += 1
        return entry.value

    def _store(self, key: str, value: Any, step: str, seconds: float) -> None:
        if self.cache is not None:
            self.cache.put(key, value, kind=f"grade.{step}", seconds=seconds)

    def generate(
        self,
        step: str,
        messages: prompts.Messages,
        *,
        max_tokens: int,
        stop: Sequence[str] | None = None,
    ) -> str | None:
        """Greedy reply text, or None (counted as ``llm_error:<step>``)."""
        key = self._key(step, messages, max_tokens=max_tokens, stop=list(stop or []))
        cached = self._cached(step, key)
        if isinstance(cached, str):
            return cached
        started = time.perf_counter()
        self.calls[step] += 1
        try:
            reply = _invoke(self.chat, messages, max_tokens, stop)
        except _FATAL:
            raise
        except Exception:
            self.skipped[f"llm_error:{step}"] += 1
            return None
        self._store(key, reply, step, time.perf_counter() - started)
        return reply

    def yes(self, step: str, messages: prompts.Messages) -> float | None:
        """P(yes) from next-token probabilities when the model offers them, else a parsed
        Yes/No reply (1.0 / 0.0); None when neither works (counted)."""
        key = self._key(step, messages, judge="yes")
        cached = self._cached(step, key)
        if isinstance(cached, int | float):
            return float(cached)
        started = time.perf_counter()
        self.calls[step] += 1
        try:
            probability = getattr(self.chat, "yes_probability", None)
            if callable(probability):
                value: float | None = float(probability(messages))
            else:
                value = parse_yes_no(_invoke(self.chat, messages, 3))
        except _FATAL:
            raise
        except Exception:
            self.skipped[f"llm_error:{step}"] += 1
            return None
        if value is None:
            self.skipped[f"{step}_unparseable"] += 1
            return None
        self._store(key, value, step, time.perf_counter() - started)
        return value


def _invoke(
    chat: BaseChatModel,
    messages: prompts.Messages,
    max_tokens: int,
    stop: Sequence[str] | None = None,
) -> str:
    from ...models.llamacpp import LlamaCppChatModel

    stops = list(stop) if stop else None
    if isinstance(chat, LlamaCppChatModel):
        reply = chat.invoke(messages, max_tokens=max_tokens, temperature=0.0, stop=stops)
    else:
        fields = type(chat).model_fields
        update = {n: max_tokens for n in ("max_tokens", "num_predict") if n in fields}
        reply = (chat.model_copy(update=update) if update else chat).invoke(messages, stop=stops)
    content = reply.content
    if isinstance(content, str):
        return content
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sentence:
    id: str
    doc_id: str
    title: str
    text: str
    chunk_id: str


@dataclass(frozen=True, slots=True)
class Claim:
    id: str
    sentence: Sentence
    text: str


@dataclass(frozen=True, slots=True)
class GradeQuestion:
    """One validated question with its difficulty coordinates and provenance."""

    id: str
    question: str
    answer: str
    aliases: tuple[str, ...]
    hops: int
    path: tuple[str, ...]
    triples: tuple[Triple, ...]
    equivalence_links: tuple[int, ...]
    supporting: tuple[dict[str, str], ...]
    dr: float
    dr_mean: float
    dr_power: float
    validation: float | None

    def to_record(self) -> dict[str, Any]:
        """A JSONL record in the shared dataset schema (``rca eval run --dataset FILE`` reads
        it: ``num_hops``, ``answers`` and the supporting chunks as ``paragraphs``)."""
        return {
            "dataset": "grade",
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "answers": [self.answer, *self.aliases],
            "num_hops": self.hops,
            "type": f"{self.hops}hop",
            "path": list(self.path),
            "triples": [t.to_dict() for t in self.triples],
            "equivalence_links": list(self.equivalence_links),
            "paragraphs": [
                {"title": s["title"], "text": s["text"], "is_supporting": True, "chunk_id": s["id"]}
                for s in self.supporting
            ],
            "dr": round(self.dr, 6),
            "dr_mean": round(self.dr_mean, 6),
            "dr_power": round(self.dr_power, 6),
            "validation": None if self.validation is None else round(self.validation, 4),
        }


@dataclass(slots=True)
class GenerationResult:
    questions: list[GradeQuestion]
    skipped: Counter[str]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def by_hops(self) -> dict[int, int]:
        return dict(sorted(Counter(q.hops for q in self.questions).items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": len(self.questions),
            "by_hops": {str(k): v for k, v in self.by_hops.items()},
            "skipped": dict(sorted(self.skipped.items())),
            **self.stats,
        }


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------


class GradeGenerator:
    """The generation pipeline over one chat model and one embedder (see module docstring)."""

    def __init__(
        self,
        config: Config,
        chat: BaseChatModel,
        embedder: SentenceTransformerEmbedder,
        *,
        cache: LLMCallCache | None = None,
        progress: ProgressFn | None = None,
    ) -> None:
        self.config = config
        self.grade = config.grade
        self.chat = chat
        self.embedder = embedder
        self.cache = cache
        self.progress = progress or (lambda _msg: None)

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        cache: LLMCallCache | None = None,
        progress: ProgressFn | None = None,
    ) -> GradeGenerator:
        from ...components import Components

        components = Components(config)
        return cls(
            config, components.chat, components.local_embedder(), cache=cache, progress=progress
        )

    # ---------------------------------------------------------------- steps

    def sentences(self, documents: Iterable[SourceDocument]) -> tuple[list[Sentence], dict]:
        """Sentences with their evaluation-setting chunk; chunks by id."""
        out: list[Sentence] = []
        chunks: dict[str, dict[str, str]] = {}
        for d_index, doc in enumerate(documents):
            text = doc.text.strip()
            if not text:
                continue
            pieces = chunk_grade_setting(
                doc,
                self.embedder.token_offsets,
                chunk_size=self.grade.chunk_size,
                chunk_overlap=self.grade.chunk_overlap,
            )
            spans: list[tuple[int, int, str]] = []
            cursor = 0
            for piece in pieces:
                begin = text.find(piece.text, cursor)
                begin = begin if begin >= 0 else text.find(piece.text)
                spans.append((begin, begin + len(piece.text), piece.id))
                cursor = max(begin, 0)
                chunks[piece.id] = {"id": piece.id, "title": doc.title, "text": piece.text}
            pos = 0
            for s_index, sentence in enumerate(split_sentences(text)):
                where = text.find(sentence.split()[0], pos)
                pos = max(where, pos)
                end = pos + len(sentence)
                inside = [cid for b, e, cid in spans if b <= pos and end <= e]
                best = inside[0] if inside else min(spans, key=lambda s: abs(s[0] - pos))[2]
                out.append(Sentence(f"{d_index}.{s_index}", doc.id, doc.title, sentence, best))
        return out, chunks

    def claims(
        self, llm: StepLLM, sentences: Sequence[Sentence], contexts: dict[str, str]
    ) -> list[Claim]:
        if self.grade.claims == "rule":
            return [Claim(s.id, s, rule_claim(s.text, s.title)) for s in sentences]
        out: list[Claim] = []
        by_doc: dict[str, list[Sentence]] = {}
        for s in sentences:
            by_doc.setdefault(s.doc_id, []).append(s)
        size = self.grade.sentences_per_prompt
        for doc_id, group in by_doc.items():
            for start in range(0, len(group), size):
                batch = group[start : start + size]
                messages = prompts.claims_messages(
                    batch[0].title, contexts[doc_id][:1200], [s.text for s in batch]
                )
                reply = llm.generate("claims", messages, max_tokens=self.grade.max_tokens)
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

    def consistent(self, llm: StepLLM, claims: Sequence[Claim]) -> list[Claim]:
        """LLM claims that the model judges inconsistent with their sentence are dropped (rule
        claims only substitute a pronoun and are consistent by construction)."""
        if self.grade.consistency == "none" or self.grade.claims == "rule":
            return list(claims)
        kept = []
        for claim in claims:
            p = llm.yes(
                "consistency", prompts.consistency_messages(claim.sentence.text, claim.text)
            )
            if p is None:
                continue
            if p < self.grade.consistency_threshold:
                llm.skipped["claim_inconsistent"] += 1
                continue
            kept.append(claim)
        return kept

    def triples(self, llm: StepLLM, claims: Sequence[Claim]) -> list[Triple]:
        out: list[Triple] = []
        size = self.grade.triples_per_prompt
        for start in range(0, len(claims), size):
            batch = claims[start : start + size]
            texts = [c.text for c in batch]
            reply = llm.generate(
                "triples",
                prompts.triples_messages(texts),
                max_tokens=min(self.grade.max_tokens, 60 * len(batch)),
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

    def clusters(self, claims: Sequence[Claim]) -> list[list[Claim]]:
        """Soft clusters of claims: a GaussianMixture over PCA-reduced claim embeddings; each
        claim joins every cluster whose posterior is at least ``grade.cluster_membership``."""
        n = len(claims)
        k = max(1, math.ceil(n / self.grade.claims_per_cluster))
        if n < 2 or k == 1:
            return [list(claims)] if claims else []
        from sklearn.decomposition import PCA
        from sklearn.mixture import GaussianMixture

        vectors = self.embedder.encode([c.text for c in claims])
        dims = max(1, min(16, n - 1, vectors.shape[1]))
        reduced = PCA(n_components=dims, random_state=self.grade.seed).fit_transform(vectors)
        gmm = GaussianMixture(
            n_components=k, covariance_type="diag", reg_covar=1e-3, random_state=self.grade.seed
        ).fit(reduced)
        posterior = gmm.predict_proba(reduced)
        groups: list[list[Claim]] = []
        for j in range(k):
            members = [
                c
                for c, row in zip(claims, posterior, strict=True)
                if row[j] >= self.grade.cluster_membership
            ]
            if members:
                groups.append(members)
        return groups

    def equivalence(
        self,
        llm: StepLLM,
        kg: KnowledgeGraph,
        clusters: Sequence[Sequence[Claim]],
        triples: Sequence[Triple],
    ) -> dict[str, int]:
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
            entities = [name for name, _ in counts.most_common(self.grade.max_entities_per_cluster)]
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
                valid = self._similar_names(valid, llm.skipped)
                if len({kg.key(v) for v in valid}) < 2:
                    continue
                within = {c.id for c in members}
                if kg.apply_equivalence(valid, kind, within=within):  # type: ignore[arg-type]
                    applied[kind] += 1
        return dict(applied)

    def _similar_names(self, names: list[str], skipped: Counter[str]) -> list[str]:
        if len(names) < 2:
            return names
        vectors = self.embedder.encode(names)
        sims = cosine_similarities(vectors[0], vectors[1:])
        kept = [names[0]]
        first = content_words(names[0])
        for name, sim in zip(names[1:], sims, strict=True):
            if first & content_words(name) or sim >= self.grade.equivalence_min_cosine:
                kept.append(name)
            else:
                skipped["equivalence_rejected_dissimilar"] += 1
        return kept

    def write_question(
        self, llm: StepLLM, kg: KnowledgeGraph, path: Path
    ) -> tuple[str, str] | None:
        chain = [
            (kg.name(link.source), link.triple.relation, kg.name(link.target))
            for link in path.links
        ]
        answer = self._answer_of(kg, path)
        reply = llm.generate(
            "question",
            prompts.question_messages(chain, answer),
            max_tokens=self.grade.question_max_tokens,
            stop=["\n"],
        )
        if reply is None:
            return None
        question = parse_question(reply)
        if question is None:
            llm.skipped["question_unparseable"] += 1
            return None
        if not self._check_question(llm, kg, path, question, answer):
            return None
        return question, answer

    def _answer_of(self, kg: KnowledgeGraph, path: Path) -> str:
        last = path.links[-1]
        return last.triple.object.strip() if not last.mirrored else kg.name(path.end)

    def _check_question(
        self, llm: StepLLM, kg: KnowledgeGraph, path: Path, question: str, answer: str
    ) -> bool:
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

    def _hop_question(
        self,
        llm: StepLLM,
        fact: tuple[str, str, str],
        answer: str,
        memo: dict[tuple[str, ...], str | None],
    ) -> str | None:
        key = ("q", *fact, answer)
        if key not in memo:
            reply = llm.generate(
                "hop_question",
                prompts.hop_question_messages(fact, answer),
                max_tokens=self.grade.question_max_tokens,
                stop=["\n"],
            )
            memo[key] = parse_question(reply) if reply is not None else None
            if reply is not None and memo[key] is None:
                llm.skipped["question_unparseable"] += 1
        return memo[key]

    def _description(
        self, llm: StepLLM, fact: tuple[str, str, str], memo: dict[tuple[str, ...], str | None]
    ) -> str | None:
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
        self,
        llm: StepLLM,
        kg: KnowledgeGraph,
        paths: Sequence[Path],
        memo: dict[tuple[str, ...], str | None],
    ) -> None:
        """Run all one-hop questions, then all descriptions, so consecutive prompts share
        their (system + exemplars) prefix and llama.cpp reuses its KV cache."""
        chains = [
            [(kg.name(lk.source), lk.triple.relation, kg.name(lk.target)) for lk in p.links]
            for p in paths
        ]
        for path, chain in zip(paths, chains, strict=True):
            self._hop_question(llm, chain[-1], self._answer_of(kg, path), memo)
        for path, chain in zip(paths, chains, strict=True):
            if memo.get(("q", *chain[-1], self._answer_of(kg, path))) is None:
                continue  # the path cannot be composed; its descriptions are not needed
            for fact in chain[:-1]:
                self._description(llm, fact, memo)

    def compose_question(
        self,
        llm: StepLLM,
        kg: KnowledgeGraph,
        path: Path,
        memo: dict[tuple[str, ...], str | None],
    ) -> tuple[str, str] | None:
        """MuSiQue-style composition: a one-hop question about the last fact whose subject is
        replaced by a nested description of the bridge entities (one LLM call per distinct
        fact, shared across paths through ``memo``)."""
        chain = [
            (kg.name(link.source), link.triple.relation, kg.name(link.target))
            for link in path.links
        ]
        answer = self._answer_of(kg, path)
        *bridges, last = chain
        question = self._hop_question(llm, last, answer, memo)
        if question is None:
            return None
        description: str | None = None
        for s, r, o in bridges:
            current = self._description(llm, (s, r, o), memo)
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
        if not self._check_question(llm, kg, path, composed, answer):
            return None
        return composed, answer

    # ---------------------------------------------------------------- the run

    def run(self, documents: Iterable[SourceDocument]) -> GenerationResult:
        skipped: Counter[str] = Counter()
        llm = StepLLM(self.chat, self.cache, skipped)
        seconds: dict[str, float] = {}
        stats: dict[str, Any] = {}

        def timed(step: str, started: float) -> None:
            seconds[step] = round(time.perf_counter() - started, 2)
            self.progress(f"grade: {step} done in {seconds[step]} s")

        docs = [d for d in documents if d.text.strip()]
        if not docs:
            raise InputError("no non-empty documents to generate questions from")
        contexts = {d.id: " ".join(d.text.split()) for d in docs}

        t = time.perf_counter()
        sentences, chunks = self.sentences(docs)
        factual = [s for s in sentences if is_factual(s.text)]
        skipped["sentence_not_factual"] += len(sentences) - len(factual)
        stats.update(documents=len(docs), sentences=len(sentences), factual=len(factual))
        timed("sentences", t)

        t = time.perf_counter()
        claims = self.claims(llm, factual, contexts)
        stats["claims"] = len(claims)
        claims = self.consistent(llm, claims)
        stats["consistent_claims"] = len(claims)
        timed("claims", t)

        t = time.perf_counter()
        triples = self.triples(llm, claims)
        kg = KnowledgeGraph.from_triples(triples)
        stats["triples"] = len(triples)
        timed("triples", t)

        t = time.perf_counter()
        clusters = self.clusters(claims)
        stats["clusters"] = len(clusters)
        stats["equivalence_groups"] = self.equivalence(llm, kg, clusters, triples)
        stats["graph"] = kg.stats()
        timed("equivalence", t)

        t = time.perf_counter()
        paths = kg.shortest_paths(min_hops=self.grade.min_hops, max_hops=self.grade.max_hops)
        stats["paths"] = dict(sorted(Counter(p.hops for p in paths).items()))
        sampled = sample_paths(
            paths,
            self.grade.paths_per_hop,
            seed=self.grade.seed,
            hop_range=(self.grade.min_hops, self.grade.max_hops),
        )
        stats["sampled_paths"] = len(sampled)
        timed("paths", t)

        t = time.perf_counter()
        claim_text = {c.id: c for c in claims}
        sentence_chunk = {s.id: s.chunk_id for s in sentences}
        questions: list[GradeQuestion] = []
        seen: set[str] = set()
        memo: dict[tuple[str, ...], str | None] = {}
        if self.grade.question_mode == "compose":
            self.prefetch(llm, kg, sampled, memo)
        for path in sampled:
            written = (
                self.compose_question(llm, kg, path, memo)
                if self.grade.question_mode == "compose"
                else self.write_question(llm, kg, path)
            )
            if written is None:
                continue
            question, answer = written
            norm = normalize_answer(question)
            if norm in seen:
                skipped["duplicate_question"] += 1
                continue
            validation = None
            if self.grade.validation:
                validation = llm.yes("validation", prompts.validation_messages(question, answer))
                if validation is None:
                    continue
                if validation < self.grade.validation_threshold:
                    skipped["validation_ambiguous"] += 1
                    continue
            seen.add(norm)
            questions.append(
                self._record(
                    path, kg, question, answer, validation, claim_text, sentence_chunk, chunks
                )
            )
        timed("questions", t)
        stats["seconds"] = seconds
        stats["llm_calls"] = dict(llm.calls)
        stats["llm_cache_hits"] = dict(llm.hits)
        return GenerationResult(questions=questions, skipped=skipped, stats=stats)

    def _record(
        self,
        path: Path,
        kg: KnowledgeGraph,
        question: str,
        answer: str,
        validation: float | None,
        claims: dict[str, Claim],
        sentence_chunk: dict[str, str],
        chunks: dict[str, dict[str, str]],
    ) -> GradeQuestion:
        chunk_ids = list(dict.fromkeys(sentence_chunk[lk.triple.sentence_id] for lk in path.links))
        supporting = tuple(chunks[c] for c in chunk_ids)
        vectors = self.embedder.encode([question, *(s["text"] for s in supporting)])
        sims = cosine_similarities(vectors[0], vectors[1:])
        aliases = tuple(
            sorted(
                a
                for a in kg.aliases.get(path.end, set())
                if normalize_answer(a) != normalize_answer(answer)
            )
        )
        digest = hashlib.sha256(f"{question}\x00{answer}".encode()).hexdigest()[:12]
        return GradeQuestion(
            id=f"grade-{path.hops}hop-{digest}",
            question=question,
            answer=answer,
            aliases=aliases,
            hops=path.hops,
            path=tuple(kg.name(n) for n in path.nodes),
            triples=tuple(lk.triple for lk in path.links),
            equivalence_links=tuple(i for i, lk in enumerate(path.links) if lk.via_equivalence),
            supporting=supporting,
            dr=retrieval_difficulty(sims, "min"),
            dr_mean=retrieval_difficulty(sims, "mean"),
            dr_power=retrieval_difficulty(sims, "power", p=self.grade.p),
            validation=validation,
        )


def write_jsonl(questions: Sequence[GradeQuestion], out: str | Any) -> None:
    """Write the questions as JSONL records (see :meth:`GradeQuestion.to_record`)."""
    from pathlib import Path as FsPath

    target = FsPath(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8") as handle:
        for q in questions:
            handle.write(json.dumps(q.to_record(), ensure_ascii=False) + "\n")


__all__ = [
    "GenerationResult",
    "GradeGenerator",
    "GradeQuestion",
    "StepLLM",
    "is_factual",
    "parse_description",
    "parse_groups",
    "parse_numbered",
    "parse_question",
    "parse_triples",
    "parse_yes_no",
    "replace_name",
    "rule_claim",
    "split_sentences",
    "write_jsonl",
]


def generate_file(
    docs: str | Any,
    out: str | Any,
    config: Config,
    *,
    limit_docs: int | None = None,
    cache: bool = True,
    progress: ProgressFn | None = None,
) -> GenerationResult:
    """``rca grade generate``: read documents, run the pipeline, write ``out`` (JSONL).

    LLM steps are cached in the harness's LLM cache (``eval.llm_cache_path``) unless
    ``cache`` is False, so an interrupted run resumes.
    """
    from ...corpus.documents import iter_documents
    from ...eval.harness import open_llm_cache

    documents = list(iter_documents(docs))
    if limit_docs is not None:
        documents = documents[:limit_docs]
    llm_cache = open_llm_cache(config) if cache else None
    try:
        generator = GradeGenerator.from_config(config, cache=llm_cache, progress=progress)
        result = generator.run(documents)
    finally:
        if llm_cache is not None:
            llm_cache.close()
    write_jsonl(result.questions, out)
    return result
