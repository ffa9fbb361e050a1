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

This module runs the stages in order; each stage is a module: :mod:`.sentences`,
:mod:`.claims`, :mod:`.triples`, :mod:`.clustering`, :mod:`.equivalence`, :mod:`.questions`
(with :mod:`.llm` for the cached LLM calls and :mod:`.records` for the results and JSONL).

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
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

from ...components import Components
from ...config import Config
from ...corpus.documents import Document, iter_documents
from ...errors import InputError
from ...models.cache import LLMCallCache, open_llm_cache
from ...text import normalize_answer
from . import prompts
from .claims import consistent_claims, write_claims
from .clustering import cluster_claims
from .difficulty import cosine_similarities, retrieval_difficulty
from .equivalence import apply_equivalences
from .kg import KnowledgeGraph, Path, sample_paths
from .llm import StepLLM
from .questions import QuestionMemo, compose_question, prefetch, write_question
from .records import GenerationResult, GradeQuestion, write_jsonl
from .sentences import document_sentences, is_factual
from .triples import extract_triples

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ...models.embeddings import SentenceTransformerEmbedder

ProgressFn = Callable[[str], None]


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
        """The pipeline over the configured chat model and embedder."""
        components = Components(config)
        return cls(
            config, components.chat, components.local_embedder(), cache=cache, progress=progress
        )

    def compose_question(
        self, llm: StepLLM, kg: KnowledgeGraph, path: Path, memo: QuestionMemo
    ) -> tuple[str, str] | None:
        """(question, answer) of one path in compose mode (:func:`.questions.compose_question`)."""
        return compose_question(llm, kg, path, memo, self.grade)

    def run(self, documents: Iterable[Document]) -> GenerationResult:
        """Run every stage over ``documents`` (InputError if none has text)."""
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
        sentences, chunks = document_sentences(
            docs,
            self.embedder.token_offsets,
            chunk_size=self.grade.chunk_size,
            chunk_overlap=self.grade.chunk_overlap,
        )
        factual = [s for s in sentences if is_factual(s.text)]
        skipped["sentence_not_factual"] += len(sentences) - len(factual)
        stats.update(documents=len(docs), sentences=len(sentences), factual=len(factual))
        timed("sentences", t)

        t = time.perf_counter()
        claims = write_claims(llm, factual, contexts, self.grade)
        stats["claims"] = len(claims)
        claims = consistent_claims(llm, claims, self.grade)
        stats["consistent_claims"] = len(claims)
        timed("claims", t)

        t = time.perf_counter()
        triples = extract_triples(llm, claims, self.grade)
        kg = KnowledgeGraph.from_triples(triples)
        stats["triples"] = len(triples)
        timed("triples", t)

        t = time.perf_counter()
        clusters = cluster_claims(claims, self.embedder, self.grade)
        stats["clusters"] = len(clusters)
        stats["equivalence_groups"] = apply_equivalences(
            llm, kg, clusters, triples, self.embedder, self.grade
        )
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
        sentence_chunk = {s.id: s.chunk_id for s in sentences}
        questions: list[GradeQuestion] = []
        seen: set[str] = set()
        memo: QuestionMemo = {}
        if self.grade.question_mode == "compose":
            prefetch(llm, kg, sampled, memo, self.grade)
        for path in sampled:
            written = (
                self.compose_question(llm, kg, path, memo)
                if self.grade.question_mode == "compose"
                else write_question(llm, kg, path, self.grade)
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
                self._record(path, kg, question, answer, validation, sentence_chunk, chunks)
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
        sentence_chunk: dict[str, str],
        chunks: dict[str, dict[str, str]],
    ) -> GradeQuestion:
        """The record of a validated question: supporting chunks, aliases, D_r."""
        chunk_ids = list(dict.fromkeys(sentence_chunk[lk.triple.sentence_id] for lk in path.links))
        supporting = tuple(chunks[c] for c in chunk_ids)
        vectors = self.embedder.encode([question, *(s["text"] for s in supporting)])
        sims = cosine_similarities(vectors[0], vectors[1:]).tolist()
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


def generate_file(
    docs: str | FsPath,
    out: str | FsPath,
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
