"""Evaluators for RRCP (our stand-ins for the paper's GenEval) and the prompted-LLM baseline.

The paper's GenEval (a fine-tuned T5-XXL with two heads) is not available offline, so its two
heads are split into two pluggable parts:

**Answer correctness s_i** (:class:`~.rrcp.AnswerEvaluator`), by spec (``rrcp.evaluator``):

* ``llm`` — :class:`LLMAnswerEvaluator`: the local chat model is asked whether the passage by
  itself gives a correct answer to the question, given the reference answers; s_i = P("yes")
  from the next-token distribution (llama.cpp: exact log-probabilities; Ollama: its
  ``top_logprobs``; any other chat model: the parsed one-word reply, 1 / 0 / 0.5). Works
  without references too (reference-free judgement).
* ``cross-encoder:<local dir>`` — :class:`CrossEncoderAnswerEvaluator`: a sentence-transformers
  CrossEncoder (e.g. an answer-sentence-selection or NLI model) you have on disk, scoring the
  pair ("question  answer: references", passage); logits are squashed by a sigmoid.
* ``lexical`` — :class:`LexicalAnswerEvaluator`: normalised reference containment (cheap
  baseline; needs references).

**Token relevance Rel(d_i, t_j)** (:class:`~.rrcp.TokenRelevance`): :class:`MaxSimTokenRelevance`
— for every content word t_j of the question, the maximum cosine similarity between its
contextual token embedding and any token embedding of the passage (ColBERT's MaxSim late
interaction), computed with the packaged all-MiniLM-L6-v2 encoder, then turned into a
distribution over the question's words by a softmax with temperature τ. Why this method: the
paper's hybrid retriever uses ColBERT, whose relevance *is* a sum of per-query-token MaxSim
scores, so MaxSim is the closest cheap reading of "how relevant is d_i to token t_j"; it needs
one encoder pass per passage (no LLM calls, unlike leave-one-token-out scoring, which costs
|Q| evaluations per document) and uses only the packaged encoder. A document that matches
every part of the question about equally gives a flat distribution (entropy near 1); one that
matches only some parts (say, one of two entities) concentrates its mass there (lower entropy).
The raw cosines are kept in the trace (``extra``).

**Baseline** :class:`LLMComplexityClassifier`: the chat model is asked directly whether a
question is complex (the paper's Appendix A.5 idea, our own wording), P("yes") ≥ 0.5.
"""

from __future__ import annotations

import math
import os
import string
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError, InputError, ModelNotAvailable
from ..models.calls import parse_yes_no
from ..models.llamacpp import LlamaCppChatModel, to_messages
from ..models.llamacpp.messages import reply_text
from ..models.structured import StructuredOutput, ask_yes_no
from ..optional import require
from ..text import STOPWORDS, normalize_answer

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ..models.embeddings import SentenceTransformerEmbedder


# --------------------------------------------------------------------------------------------
# P("yes") from any chat model
# --------------------------------------------------------------------------------------------


def _yes_score(text: str) -> float:
    """1.0 for a Yes reply, 0.0 for No, 0.5 when neither word is readable."""
    verdict = parse_yes_no(text)
    return 0.5 if verdict is None else float(verdict)


def _ollama_yes_probability(chat: Any, messages: list[Any]) -> float | None:
    """P(yes) from Ollama's top log-probabilities of the first generated token, if given."""
    update = {"logprobs": True, "top_logprobs": 10, "num_predict": 1, "temperature": 0.0}
    reply = chat.model_copy(update=update).invoke(messages)
    entries = (getattr(reply, "response_metadata", {}) or {}).get("logprobs") or []
    if not entries:
        return _yes_score(reply_text(reply))
    top = entries[0].get("top_logprobs") or [entries[0]]
    p_yes = p_no = 0.0
    for item in top:
        word = str(item.get("token", "")).strip().lower()
        prob = math.exp(float(item.get("logprob", -math.inf)))
        if word == "yes":
            p_yes += prob
        elif word == "no":
            p_no += prob
    if p_yes + p_no <= 0.0:
        return _yes_score(reply_text(reply))
    return p_yes / (p_yes + p_no)


def yes_probability(chat: BaseChatModel, messages: Sequence[Any]) -> float:
    """P(the reply is "yes") normalised against "no", from the best source the model offers.

    llama.cpp models: next-token probabilities (one forward pass). Ollama models: the first
    token's ``top_logprobs``. Anything else: a Yes/No reply, structured when the model has
    structured output (1 / 0, 0.5 if unreadable).
    Malformed replies never raise.
    """
    msgs = to_messages(list(messages))
    if isinstance(chat, LlamaCppChatModel):
        return float(chat.yes_probability(msgs))
    fields = type(chat).model_fields
    if "top_logprobs" in fields and "num_predict" in fields:
        value = _ollama_yes_probability(chat, msgs)
        if value is not None:
            return value
    verdict = ask_yes_no(StructuredOutput(chat), msgs, kind="rrcp_judge")
    return 0.5 if verdict is None else float(verdict)


# --------------------------------------------------------------------------------------------
# Answer correctness s_i
# --------------------------------------------------------------------------------------------

ANSWER_INSTRUCTION = "Reply Yes or No."


def answer_messages(question: str, references: Sequence[str], passage: str) -> list[Any]:
    """The judge prompt: the passage, the question, the reference answers, a yes/no check.

    Short on purpose: with the packaged 0.5B model, a long instruction block made P(yes)
    nearly constant (~0.4) for relevant and irrelevant passages alike; this concrete check
    ("does the passage say the answer is R?") separated them best of the wordings tried.
    """
    from langchain_core.messages import HumanMessage

    if references:
        refs = " or ".join(f'"{r}"' for r in references[:3])
        body = (
            f"Passage: {passage.strip()}\n\nQuestion: {question}\nCorrect answer: {refs}\n\n"
            f"Does the passage itself say that the answer to the question is {refs}? "
            f"{ANSWER_INSTRUCTION}"
        )
    else:
        body = (
            f"Passage: {passage.strip()}\n\nQuestion: {question}\n\n"
            f"Does the passage itself state the answer to the question? {ANSWER_INSTRUCTION}"
        )
    return [HumanMessage(content=body)]


class LLMAnswerEvaluator:
    """s_i = P("yes") of the chat model asked whether passage i answers the question."""

    name = "llm"

    def __init__(self, chat: BaseChatModel, *, passage_chars: int = 600) -> None:
        self.chat = chat
        self.passage_chars = passage_chars

    def answer_scores(
        self, question: str, references: Sequence[str], passages: Sequence[str]
    ) -> np.ndarray:
        return np.array(
            [
                yes_probability(
                    self.chat, answer_messages(question, references, p[: self.passage_chars])
                )
                for p in passages
            ],
            dtype=np.float64,
        )


def _informative_references(question: str, references: Sequence[str]) -> list[list[str]]:
    """Normalised reference token lists that can be checked lexically.

    Yes/no answers and references that already occur in the question (e.g. the two options of
    a comparison question) say nothing about a passage and are dropped.
    """
    q = f" {normalize_answer(question)} "
    kept = []
    for ref in references:
        norm = normalize_answer(ref)
        if not norm or norm in {"yes", "no"} or f" {norm} " in q:
            continue
        kept.append(norm.split())
    return kept


class LexicalAnswerEvaluator:
    """s_i = 1 if a normalised reference occurs in the normalised passage (as a token run);
    otherwise the largest share of a reference's tokens found in the passage (partial credit,
    so that T_ans can be calibrated). Uninformative references (yes/no, contained in the
    question) are ignored; if none is left, every s_i is 0."""

    name = "lexical"

    def answer_scores(
        self, question: str, references: Sequence[str], passages: Sequence[str]
    ) -> np.ndarray:
        if not references:
            raise InputError(
                "the lexical RRCP evaluator needs reference answers; pass at least one, or use "
                "rrcp.evaluator = 'llm' to judge without references"
            )
        refs = _informative_references(question, references)
        scores = np.zeros(len(passages), dtype=np.float64)
        for i, passage in enumerate(passages):
            tokens = normalize_answer(passage).split()
            text = f" {' '.join(tokens)} "
            vocab = set(tokens)
            best = 0.0
            for ref in refs:
                if f" {' '.join(ref)} " in text:
                    best = 1.0
                    break
                best = max(best, sum(t in vocab for t in ref) / len(ref))
            scores[i] = best
        return scores


class CrossEncoderAnswerEvaluator:
    """A local sentence-transformers CrossEncoder scores (question + references, passage)."""

    name = "cross-encoder"

    def __init__(self, path: str | Path, *, batch_size: int = 16) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise ModelNotAvailable(
                f"cross-encoder {str(path)!r} is not a local directory; models are never "
                "downloaded (use rrcp.evaluator = 'llm' or 'lexical')"
            )
        self.batch_size = batch_size

    @cached_property
    def model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        st = require("sentence_transformers", "the cross-encoder evaluator")
        try:
            return st.CrossEncoder(str(self.path), device="cpu", local_files_only=True)
        except Exception as exc:  # the library raises many types for a bad directory
            raise ModelNotAvailable(
                f"could not load the cross-encoder at {self.path}: {exc}"
            ) from exc

    def answer_scores(
        self, question: str, references: Sequence[str], passages: Sequence[str]
    ) -> np.ndarray:
        if not passages:
            return np.zeros(0)
        query = f"{question} answer: {' | '.join(references)}" if references else question
        raw = np.asarray(
            self.model.predict([(query, p) for p in passages], batch_size=self.batch_size),
            dtype=np.float64,
        )
        if raw.ndim == 2:  # several labels (e.g. NLI): softmax, take the entailment-like last
            raw = raw - raw.max(axis=1, keepdims=True)
            probs = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True)
            labels = {int(k): str(v).lower() for k, v in self.model.config.id2label.items()}
            index = next((k for k, v in labels.items() if v.startswith("entail")), -1)
            column: np.ndarray = probs[:, index]
            return column
        if raw.min() < 0.0 or raw.max() > 1.0:
            raw = 1.0 / (1.0 + np.exp(-raw))
        return raw


def load_answer_evaluator(spec: str, *, components: Any = None, passage_chars: int = 600) -> Any:
    """``llm`` | ``lexical`` | ``cross-encoder:<local dir>``."""
    spec = spec.strip()
    if spec == "lexical":
        return LexicalAnswerEvaluator()
    if spec == "llm":
        if components is None:
            raise ConfigError("the 'llm' RRCP evaluator needs a chat model (components)")
        return LLMAnswerEvaluator(components.chat, passage_chars=passage_chars)
    if spec.startswith("cross-encoder:"):
        return CrossEncoderAnswerEvaluator(spec.split(":", 1)[1])
    raise ConfigError(
        f"unknown RRCP evaluator {spec!r}; use 'llm', 'lexical' or 'cross-encoder:<local dir>'"
    )


# --------------------------------------------------------------------------------------------
# Token relevance Rel(d_i, t_j)
# --------------------------------------------------------------------------------------------


class MaxSimTokenRelevance:
    """Per question word, the max cosine to any passage token (MiniLM token embeddings),
    softmax(· / τ) over the question's content words. See the module docstring."""

    name = "maxsim-minilm"

    def __init__(self, embedder: SentenceTransformerEmbedder, *, temperature: float = 0.05):
        if temperature <= 0:
            raise ConfigError("rrcp.relevance_temperature must be positive")
        self.embedder = embedder
        self.temperature = temperature

    def question_words(self, question: str) -> tuple[list[str], list[list[int]]]:
        """Content words of the question and the positions of their word pieces."""
        tokenizer = self.embedder.model.tokenizer
        enc = tokenizer(
            question,
            add_special_tokens=True,
            truncation=True,
            max_length=self.embedder.max_tokens,
            return_offsets_mapping=True,
        )
        groups: dict[int, list[int]] = {}
        spans: dict[int, list[int]] = {}
        for pos, word in enumerate(enc.word_ids()):
            if word is None:
                continue
            groups.setdefault(word, []).append(pos)
            start, end = enc["offset_mapping"][pos]
            span = spans.setdefault(word, [start, end])
            span[1] = end
        words = [(question[s:e], groups[w]) for w, (s, e) in spans.items()]
        content = [
            (w, p) for w, p in words if w.strip(string.punctuation) and w.lower() not in STOPWORDS
        ]
        chosen = content or [(w, p) for w, p in words if w.strip(string.punctuation)] or words
        return [w for w, _ in chosen], [p for _, p in chosen]

    def _token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        model = self.embedder.model
        with self.embedder._lock:
            out = model.encode(
                list(texts),
                output_value="token_embeddings",
                convert_to_numpy=False,
                show_progress_bar=False,
                batch_size=self.embedder.batch_size,
            )
        vectors = []
        for item in out:
            array = item.detach().cpu().numpy().astype(np.float32)
            array /= np.linalg.norm(array, axis=1, keepdims=True) + 1e-12
            vectors.append(array)
        return vectors

    def raw_similarities(
        self, question: str, passages: Sequence[str]
    ) -> tuple[list[str], np.ndarray]:
        """Question content words and the |D| × |Q| matrix of MaxSim cosines."""
        words, positions = self.question_words(question)
        if not passages:
            return words, np.zeros((0, len(words)))
        embedded = self._token_embeddings([question, *passages])
        q = embedded[0]
        word_vectors = np.stack([q[p].mean(axis=0) for p in positions])
        word_vectors /= np.linalg.norm(word_vectors, axis=1, keepdims=True) + 1e-12
        rows = []
        for d in embedded[1:]:
            inner = d[1:-1] if len(d) > 2 else d  # drop [CLS] / [SEP]
            rows.append((word_vectors @ inner.T).max(axis=1))
        return words, np.vstack(rows).astype(np.float64)

    def relevance(self, question: str, passages: Sequence[str]) -> tuple[list[str], np.ndarray]:
        words, sims = self.raw_similarities(question, passages)
        if sims.size == 0:
            return words, sims
        logits = sims / self.temperature
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
        return words, weights / weights.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------------------------
# Baseline: the prompted-LLM complexity classifier (paper Appendix A.5, our wording)
# --------------------------------------------------------------------------------------------

BASELINE_SYSTEM = (
    "You judge how hard questions are for a search-based assistant. A question is complex "
    "when no single document is likely to contain its answer, so that facts from several "
    "documents have to be found and combined: for example comparing two unrelated things "
    "('Is a teacup heavier than a blue whale?') or chaining facts ('What is the capital of "
    "the country where the inventor of the telephone was born?'). A question whose answer one "
    "document is likely to state directly ('How tall is the Eiffel Tower?', 'Are lions bigger "
    "than house cats?') is not complex. Reply with one word: Yes if the question is complex, "
    "No if it is not."
)


class LLMComplexityClassifier:
    """The prompted-LLM baseline: P("yes, complex") from the chat model; complex iff ≥ 0.5."""

    name = "llm_baseline"

    def __init__(self, chat: BaseChatModel, *, threshold: float = 0.5) -> None:
        self.chat = chat
        self.threshold = threshold

    def probability(self, question: str) -> float:
        from langchain_core.messages import HumanMessage, SystemMessage

        messages = [
            SystemMessage(content=BASELINE_SYSTEM),
            HumanMessage(content=f"Question: {question.strip()}\nIs this question complex?"),
        ]
        return yes_probability(self.chat, messages)

    def is_complex(self, question: str) -> bool:
        return self.probability(question) >= self.threshold
