"""Config sections of the answering pipeline: models, corpus, graph, retrieval, answer, NAR,
ASU, MER and the loops; :data:`NEUTRAL` marks knobs that cannot change an answer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from .pipelines import RetrievalName

NEUTRAL: dict[str, Any] = {"json_schema_extra": {"affects_answers": False}}
"""``Field(..., **NEUTRAL)``: field metadata saying the knob cannot change any answer."""


def default_home() -> Path:
    """Where collections and assembled model files live (``RCA_HOME`` or the user cache)."""
    env = os.environ.get("RCA_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rag_complexity_agents"


class ModelsConfig(BaseModel):
    """Model specs. See ``rag_complexity_agents.models`` for the accepted spec strings."""

    chat: str = Field(
        "auto",
        description="'auto' (best packaged model installed), 'llamacpp:<path.gguf|packaged name>' "
        "or 'ollama:<model>'.",
    )
    embedding: str = Field(
        "packaged:all-minilm-l6-v2", description="'packaged:all-minilm-l6-v2' or a local path."
    )
    scorer: str = Field(
        "bi-encoder",
        description="'bi-encoder', 'splade' or 'cross-encoder:<local path>'. The bi-encoder shares "
        "MiniLM with the dense first stage and the graph, so with the hybrid first stage and pool "
        "'own'/'union' NAR returns the same top 10 as re-ranking; the paper scores with a "
        "cross-encoder over a graph from the complementary retriever: use 'splade' or one. "
        "Not in the paper: the default 'bi-encoder'.",
    )
    equivalence: str = Field(
        "lexical",
        description="'lexical' (normalised equality or token subset), 'embedding', 'llm' or "
        "'nli:<local path>'. Not in the paper: the default 'lexical' (the paper clusters by "
        "two-way NLI entailment).",
    )
    home: Path = Field(
        default_factory=default_home,
        description="Packaged models assembled from several wheels are written to <home>/models.",
        **NEUTRAL,
    )
    ollama_host: str = Field("http://127.0.0.1:11434", **NEUTRAL)
    ollama_timeout_s: float = Field(120.0, gt=0, **NEUTRAL)
    n_ctx: int = Field(4096, ge=256, description="llama.cpp context window in tokens.")
    n_threads: int | None = Field(
        None,
        description="llama.cpp threads; None = follow the free cores: before each call, the "
        "available cores minus those other processes kept busy since the previous call.",
        **NEUTRAL,
    )
    max_tokens: int = Field(256, ge=1, description="Default generation length.")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int = 0
    embed_batch_size: int = Field(64, ge=1, **NEUTRAL)
    embedding_cosine_threshold: float = Field(
        0.85, ge=-1.0, le=1.0, description="Cosine at which the 'embedding' equivalence says yes."
    )


#: Characters per token of the default chunk cap: about twice English prose's (~4-5), so only
#: text without whitespace (a run the tokenizer keeps as one token) reaches it.
CHUNK_CHARS_PER_TOKEN = 8


class CorpusConfig(BaseModel):
    """Where collections live and how documents become chunks."""

    home: Path = Field(default_factory=default_home, **NEUTRAL)
    chroma_host: str | None = Field(
        None,
        description="Use a Chroma server (HttpClient) instead of on-disk PersistentClient.",
        **NEUTRAL,
    )
    chroma_port: int = Field(8000, **NEUTRAL)
    chunk_size: int = Field(200, ge=16, description="Chunk length in embedding-tokenizer tokens.")
    chunk_overlap: int = Field(40, ge=0)
    chunk_max_chars: int | None = Field(
        None,
        ge=16,
        description="Hard cap on a chunk's characters, so text without whitespace (one huge "
        f"token) is cut by characters; None = {CHUNK_CHARS_PER_TOKEN} × chunk_size.",
    )
    ingest_batch_size: int = Field(
        256,
        ge=1,
        description="Chunks embedded and written per step.",
        **NEUTRAL,
    )

    @model_validator(mode="after")
    def _overlap_smaller_than_chunk(self) -> CorpusConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size "
                f"({self.chunk_size})"
            )
        return self

    @property
    def collections_dir(self) -> Path:
        return self.home / "collections"

    @property
    def max_chunk_chars(self) -> int:
        """The characters a chunk may hold (``chunk_max_chars`` or its default)."""
        return self.chunk_max_chars or CHUNK_CHARS_PER_TOKEN * self.chunk_size


class GraphConfig(BaseModel):
    """Neighbourhood graph G (SUNAR §3.1.1): top-k most similar chunks per chunk."""

    k: int = Field(100, ge=1, description="Neighbours stored per chunk (paper: 100).")
    block_size: int = Field(
        4096,
        ge=64,
        description="Rows per block of the exact top-k build.",
        **NEUTRAL,
    )
    method: Literal["auto", "exact", "cluster", "faiss"] = Field(
        "auto",
        description="'exact' blocked top-k (cost n^2), 'cluster' approximate (exact products "
        "within k-means cluster neighbourhoods), 'faiss' approximate HNSW (extra 'ann'), "
        "'auto' = exact up to exact_max_rows chunks, else cluster.",
    )
    exact_max_rows: int = Field(
        200_000,
        ge=1,
        description="Largest collection 'auto' builds exactly: 200,000, near where the exact "
        "build's n^2 CPU cost meets the cluster-block build's linear one (measured at 100k "
        "chunks on 2 cores: docs/scaling.md).",
    )


class RetrievalConfig(BaseModel):
    """First-stage retrieval."""

    mode: Literal["bm25", "dense", "hybrid"] = "hybrid"
    k: int = Field(10, ge=1, description="Documents returned to the caller.")
    first_stage_k: int = Field(
        20, ge=1, le=1000, description="R: first-stage list NAR starts from (paper: 100)."
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal-rank-fusion constant.")


class AnswerConfig(BaseModel):
    """How evidence is shown to the answering model: the main cost/fidelity trade-off on CPU
    (prompt reading is ~60 tokens/s for the packaged 0.5B model)."""

    passages: int = Field(
        3,
        ge=1,
        le=50,
        description="k: evidence passages a question answered in one step is given "
        "(single-step RAG, the loops' final forced answer without MER).",
    )
    sub_passages: int | None = Field(
        3,
        ge=1,
        le=50,
        description="Passages each sub-question of a loop is answered from. None = mer.l "
        "(the paper answers sub-questions from the same top-l MER reads; paper preset: 10). "
        "Not in the paper: a count of its own (default 3, while mer.l is 4).",
    )
    passage_chars: int = Field(
        700, ge=50, description="Each passage is cut to this length (characters)."
    )
    passage_cut: Literal["start", "question"] = Field(
        "start",
        description="Where a passage longer than passage_chars is cut. 'start': its first "
        "passage_chars characters. 'question': the run of whole sentences that fits and holds "
        "the most of the words of the (sub-)question it was retrieved for, the page title's "
        "words aside, when that is more than the start holds (text.cut_passage); MER reads "
        "the start of that cut. Off: on MuSiQue's own sub-questions with the 1.5B model it "
        "answered 3 more questions with gold bridges and as many as the start with the "
        "reader's own bridges (benchmarks/results/end_to_end.md). Not in the papers.",
    )


class NARParams(BaseModel):
    """SUNAR Algorithm 1's knobs (the one source of their defaults and checks): batch size b,
    budget c, neighbours looked up per scored document."""

    b: int = Field(
        2,
        ge=1,
        le=64,
        description="Batch size b: documents scored per iteration (paper: 16).",
    )
    c: int = Field(
        8,
        ge=0,
        le=500,
        description="Re-ranking budget c: documents scored in total per query (paper: 100); 0 "
        "scores nothing and keeps the first-stage order.",
    )
    neighbours_per_doc: int = Field(
        10,
        ge=0,
        description="Graph neighbours of each scored document added to the neighbour pool N "
        "(paper: 10 of the 100 stored); 0 turns NAR into plain re-ranking.",
    )


class NARConfig(NARParams):
    """Neighbourhood-Aware Retrieval, SUNAR Algorithm 1 (the first-stage size R is
    ``retrieval.first_stage_k``), and how :class:`SunarRetriever` feeds it."""

    pool: Literal["own", "original", "union"] = Field(
        "union",
        description="Initial ranking R of a sub-question: 'own' = its own first-stage list, "
        "'original' = the original question's list (what the official code does), 'union' = "
        "both fused by reciprocal rank. Not in the paper: the default 'union'.",
    )
    missing_graph: Literal["error", "rerank"] = Field(
        "error",
        description="When the collection has no usable neighbourhood graph: 'error' raises "
        "CorpusError, 'rerank' falls back to re-ranking R only (recorded in the trace).",
    )


class ASUConfig(BaseModel):
    """Answer Semantic Uncertainty (SUNAR §3.2): per NAR batch, sample m answers, cluster
    them, penalise the batch by the number of clusters s (by default: its min-max normalised
    scores divided by s, our deviation from the paper's division of each score by s)."""

    enabled: bool = Field(
        False, description="Re-score NAR batches by answer uncertainty (costs m LLM samples each)."
    )
    m: int = Field(
        3, ge=1, le=20, description="Answers sampled per batch (paper's official code: 10)."
    )
    temperature: float = Field(0.3, ge=0.0, le=2.0, description="Sampling temperature (0.3).")
    rule: Literal["strict", "lenient"] = Field(
        "strict",
        description="'strict' = entailment both ways (the paper, Kuhn et al.); 'lenient' = no "
        "contradiction either way (the official code). Applies to NLI / LLM-judge equivalences.",
    )
    max_tokens: int = Field(12, ge=1, description="Tokens per sampled answer (paper preset: 24).")
    max_passage_chars: int = Field(
        300,
        ge=50,
        description="Each batch passage is cut to this many characters in the prompt (paper "
        "preset: 600).",
    )
    rescore: Literal["batch", "multiplicative", "paper"] = Field(
        "batch",
        description="How s penalises a batch. 'batch' divides the batch's min-max normalised "
        "scores by s (lo + (score - lo) / s, lo = the batch's lowest score: the same ranking "
        "for any scorer scale); 'multiplicative' divides positive scores by s and multiplies "
        "negative ones by s; 'paper' divides each score by s, the paper's rule (it depends on "
        "the scorer's scale, and it raises a negative score). Not in the paper: the default "
        "'batch', our deviation, not the paper's rule; it never lowers a batch's lowest "
        "document, and with b = 2 it can at most pull the top document down to its "
        "partner's score.",
    )


class MERConfig(BaseModel):
    """Meta Evidence Reasoner (SUNAR §3.2, Fig. 4)."""

    l: int = Field(  # noqa: E741 - the paper's symbol
        4,
        ge=1,
        le=50,
        description="Top-l evidences across sub-questions given to the reasoner (paper: 10).",
    )
    max_tokens: int = Field(
        96, ge=1, description="Tokens for the reasoned final answer (paper preset: 256)."
    )
    max_evidence_chars: int = Field(
        350,
        ge=50,
        description="Each evidence passage is cut to this many characters (paper preset: 700).",
    )
    after_one_step_plan: bool = Field(
        False,
        description="Run MER after a plan-and-execute plan of one answered step too (paper: "
        "always). Off, that step's answer is the answer: MER has no hops to combine and only "
        "reads the same question again. An answer that only repeats the question still goes "
        "to MER.",
    )
    after_chain: bool = Field(
        True,
        description="Run MER after a plan-and-execute chain (every step but the last feeds a "
        "later one) whose last step answered (paper: always). Off, the chain's last answer is "
        "the answer, and MER concludes only plans that are not chains (a comparison of two "
        "things, a question about several) and chains whose last answer is missing or only "
        "repeats the question, its own query or an earlier step's answer (with the 1.5B model "
        "and agents.quote_evidence='final', pooled over MuSiQue and 2Wiki: +1.1 [-3.0, +5.6] "
        "cover-EM points at 10-19% fewer LLM calls; benchmarks/results/end_to_end.md). "
        "Not in the paper.",
    )


class AgentsConfig(BaseModel):
    """Decomposition loops (``rag_complexity_agents.agents``): bounds, retrieval strategy, ASU
    edges. The knobs of :mod:`.knobs` can also be changed per run (``configurable``)."""

    retrieval: RetrievalName | None = Field(
        None,
        description="Retrieval node strategy: none, first_stage, rerank (scorer over R, no "
        "neighbours), nar (NAR, Algorithm 1) or sunar (NAR + ASU re-scoring). None: the "
        "pipeline's own.",
    )
    mer: bool | None = Field(
        None,
        description="Finish with the Meta Evidence Reasoner (SUNAR §3.2). None: the "
        "pipeline's own.",
    )
    max_steps: int = Field(
        4, ge=1, le=50, description="Loop steps (sub-questions, actions, CoT sentences) per run."
    )
    max_llm_calls: int | None = Field(
        None,
        ge=1,
        description="Run budget: chat-model calls (ASU prompts included). Once spent the loop "
        "takes no new step, ASU stops sampling and no concluding or MER call is made; the "
        "run ends with stop_reason 'budget' and the best answer so far. None: no limit.",
    )
    max_output_tokens: int | None = Field(
        None,
        ge=1,
        description="Run budget: tokens the chat model generated for the loop's steps and "
        "answers (as the trace's output_tokens counts them). None: no limit.",
    )
    max_seconds: float | None = Field(
        None,
        gt=0,
        description="Run budget: seconds since the run started, checked between steps and "
        "before each ASU batch (a model call under way is not interrupted). None: no limit.",
    )
    max_format_errors: int = Field(
        1, ge=0, le=10, description="Replies that break the format before the loop gives up."
    )
    exemplars: int = Field(2, ge=0, le=4, description="Few-shot exemplars per loop prompt.")
    mer_exemplars: int = Field(1, ge=0, le=3, description="Exemplars in the MER prompt.")
    step_max_tokens: int = Field(64, ge=8, description="Tokens per loop-step generation.")
    answer_max_tokens: int = Field(32, ge=4, description="Tokens per (sub-)answer.")
    observation_chars: int = Field(
        300, ge=50, description="Characters of each passage shown as a ReAct observation."
    )
    observation_passages: int = Field(
        1, ge=1, description="Passages shown as a ReAct observation (ReAct: the first one)."
    )
    ircot_passages: int = Field(
        5, ge=1, description="Passages kept in the IRCoT prompt (best first, across steps)."
    )
    uncertain_fraction: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="ASU edges (not in the paper): a batch counts as uncertain when its "
        "s > 1 and s >= this fraction of m.",
    )
    max_explore: int = Field(
        1,
        ge=0,
        le=10,
        description="ASU edges: extra NAR rounds when every batch is uncertain. Not in the "
        "paper: the explore / requery edges (on by default; 0 turns this one off).",
    )
    explore_budget: int | None = Field(
        None,
        ge=1,
        description="ASU edges (not in the paper): documents added to c per exploration round "
        "(None: nar.b).",
    )
    max_requery: int = Field(
        1,
        ge=0,
        le=5,
        description="ASU edges: re-queries once exploring cannot help. Not in the paper: the "
        "explore / requery edges (on by default; 0 turns this one off).",
    )
    requery: Literal["expand", "llm"] = Field(
        "expand",
        description="ASU edges (not in the paper): how to re-query: 'expand' adds the "
        "original question's words, 'llm' asks the chat model for a new search query.",
    )
    hop_pool: bool = Field(
        True,
        description="NAR strategies: each hop's pool R also holds the documents retrieved for "
        "the earlier hops (fused by reciprocal rank with its own fresh search and the "
        "question's), so a hop re-ranks the union of its evidence so far. Not in the paper "
        "(on by default).",
    )
    bridge: bool = Field(
        True,
        description="Self-Ask: a follow-up that does not mention the previous intermediate "
        "answer (the bridge entity) is retrieved for and answered with it added. Not in the "
        "paper (on by default).",
    )
    quote_evidence: Literal["none", "final", "all"] = Field(
        "none",
        description="Plan-and-execute: which steps are answered by a prompt that first copies "
        "the passage words that answer, then gives the answer ('final': the plan's last "
        "step, whose answer is the loop's; 'all': every step; 'none'). Costs up to 64 more "
        "output tokens a step. Not in the paper.",
    )
    one_step_exemplar: bool = Field(
        False,
        description="Plan-and-execute: the planning prompt shows a one-fact question planned "
        "as one step before its chain exemplars, so a one-fact question is not given an "
        "invented second step (off: it also plans some multi-hop questions as one step, and "
        "its answers are not yet measured). Not in the paper.",
    )
    plan_samples: int = Field(
        0,
        ge=0,
        le=8,
        description="Plan-and-execute: a plan with a visible flaw (a step restating the "
        "whole question beside other steps, a step asking the name of a thing it does not "
        "name, or a name or number of the question that no step gives) is set against k "
        "plans sampled from the same prompt (one prompt evaluation on llama.cpp), and the "
        "plan with the fewest flaws runs, the model's own plan on a tie. 0: off (k = 4 with "
        "the 1.5B model, pooled over MuSiQue, 2Wiki and HotpotQA: +1.2 [-0.5, +3.0] cover-EM "
        "points at 0.1-0.65 more LLM calls a question; benchmarks/results/hotpotqa_check.md). "
        "Not in the paper (self-consistency over plans, judged by their flaws).",
    )
    plan_checks: bool = Field(
        True,
        description="Plan-and-execute: checks of a plan, with no LLM call. A plan that has "
        "lost what the question is about (a step asks 'What is the name of the airport?', or "
        "no step gives a name the question gives) or that copies words of a planning "
        "exemplar's own question ('In which city did #1 go public?') becomes the question "
        "itself; a step that "
        "asks who a named thing is ('Who is Emily Davenport?') while the question wants a "
        "relative of it asks for that relative ('Who is the husband of Emily Davenport?'). "
        "On: measured on the plans they change (benchmarks/results/plan_checks.md). Not in "
        "the paper.",
    )
    tidy_plans: bool = Field(
        False,
        description="Plan-and-execute: before a plan runs, a step that only asks who or what "
        "a thing the question names is ('Which university is Harvard?') is dropped and later "
        "steps use the name, a plan with a step that restates the question runs that step "
        "alone, and steps after the last one that asks for the kind of answer "
        "the question asks for (a date after 'Which city ...?') are cut; the trace's notes "
        "keep the plan as written. No LLM call. Off: on the 34 of 388 plans it changes "
        "(1.5B) it halves the LLM calls but answers 9 right against 11. Not in the paper.",
    )
    split_steps: bool = Field(
        False,
        description="Plan-and-execute: a planned step that uses no earlier answer and still "
        "names a thing by a relative clause ('the state where X was born') is planned once "
        "more as a question of its own, and the chain it splits into takes its place (one "
        "more LLM call; one split a run, within agents.max_steps). Not in the paper.",
    )
    plan_rules: bool = Field(
        False,
        description="Plan-and-execute: the planning prompt also states a rule against each "
        "way small models' plans were seen to fail: keep every detail of the question in "
        "the step that needs it, never ask who or what a named thing is, never repeat the "
        "whole question as a step, and plan a one-fact question as one step (off: with the "
        "1.5B model, pooled over MuSiQue and 2Wiki, +0.8 [-1, +3] cover-EM points; "
        "benchmarks/results/end_to_end.md). Not in the paper.",
    )
    bridge_votes: int = Field(
        1,
        ge=1,
        le=20,
        description="Plan-and-execute: a step whose answer a later step uses (the bridge) "
        "keeps the answer most of m answers agree on: its greedy answer and m - 1 samples of "
        "the same prompt, clustered as ASU clusters them, preferring answers a passage it "
        "read holds (agents/votes.py). 1: the greedy answer alone. Not in the paper "
        "(self-consistency voting with ASU's clusters).",
    )
    fresh_evidence: bool = Field(
        False,
        description="Later steps are answered from the passages no earlier step was answered "
        "from first, then the others: with agents.hop_pool the earlier hops' documents "
        "otherwise fill the few passages a later hop reads (opt-in: on 20 MuSiQue dev "
        "questions with the 1.5B model it did not raise cover-EM or evidence recall; "
        "benchmarks/results/decomposition_dev.md). Not in the paper.",
    )
    reject_echo: bool = Field(
        False,
        description="A sub-answer that only repeats what its own query names (e.g. 'Who "
        "married Frederick Douglass?' → 'Frederick Douglass', the previous hop's answer) is "
        "asked for once more, quoting its evidence first, with that answer ruled out, then "
        "becomes 'unknown'; and a MER answer that only repeats what the last step's query "
        "names gives way to the loop's answer. Not for questions offering a choice ('A or "
        "B') nor for identity questions ('Who is Avery Brundage?'). Opt-in: on the first 75 "
        "questions of MuSiQue and 2Wiki with the 1.5B model, pooled, 0.0 [-2, +2] cover-EM "
        "points (benchmarks/results/end_to_end.md). Not in the paper.",
    )
    reread_unsupported: bool = Field(
        True,
        description="Plan-and-execute: a step's answer that no passage about its query "
        "holds (a passage holding it shares at most a third of the query's content words, "
        "e.g. a name read from the one off-topic passage of three) is asked for once more "
        "from the passages about the query only, and that answer is kept when one of them "
        "holds it (agents/answer.py). With the 1.5B model: +1.5 [+0.4, +3.0] cover-EM points "
        "pooled over MuSiQue and 2Wiki, +1.2 [+0.2, +2.5] with HotpotQA too, no question lost, "
        "at 0.1-0.3 more LLM calls a question (benchmarks/results/hotpotqa_check.md). Not in "
        "the paper.",
    )
    check_kind: bool = Field(
        False,
        description="A sub-answer that plainly is not of the kind its query's opening asks "
        "for (a date or a number for 'Where ...?' or 'Who ...?'; no date, number or time "
        "word for 'When ...?' or 'How many ...?') is asked for once more, quoting its "
        "evidence first, with that answer ruled out, then becomes 'unknown'; and a MER answer "
        "not of the question's kind gives way to the loop's answer when that one is "
        "(agents/kinds.py). Opt-in: on the first 75 questions of MuSiQue and 2Wiki with the "
        "1.5B model it asked 4 steps again and changed no answer's score "
        "(benchmarks/results/end_to_end.md). Not in the paper.",
    )
    stop: Literal["model", "evidence"] = Field(
        "model",
        description="Self-Ask: when a final answer ends the loop. 'model': the first one the "
        "model writes; 'evidence': only one the evidence supports (it occurs in a passage the "
        "steps were answered from) and that is more than the first sub-question's answer; "
        "otherwise, while steps remain, the loop looks up the question itself with the bridge "
        "entity added (opt-in: on a 20 + 20 question dev sample with the 0.5B model it raised "
        "evidence R@5 but neither variant beat single-step; "
        "benchmarks/results/decomposition_dev.md). 'model' is the paper's; 'evidence' is not "
        "in the paper (the end-to-end benchmark's command sets it).",
    )
    abstain: Literal["exemplar", "ungrounded", "supported"] = Field(
        "supported",
        description="Which final answers become 'not found' (agents/abstain.py), in every "
        "loop that retrieved something: 'exemplar': one that contains a few-shot exemplar's "
        "answer no passage read supports; 'ungrounded': also one that shares no content word "
        "with any passage read; 'supported': also one that no passage read supports (the "
        "passage holds half of the answer's content words and more than a third of those "
        "of the question or of an on-topic sub-question, or is named by a passage read that "
        "does; benchmarks/results/robustness.md). "
        "Not in the paper.",
    )
    structured_output: Literal["auto", "on", "off"] = Field(
        "auto",
        description="'on': every structured step (loop moves, sub-answers, MER) asks the "
        "chat model for a typed object when its class implements with_structured_output / "
        "bind_tools (llama.cpp grammar, JSON schema or tool calling), falling back to text + "
        "parse-and-repair; 'auto': the same, except for the packaged llama.cpp models, whose "
        "grammar-decoded steps lowered answer quality on the 0.5B (they answer in text + "
        "parse-and-repair until the end-to-end benchmark shows the grammar pays; MER's text "
        "reply is still decoded under a grammar of its two marker lines); 'off': always "
        "plain text.",
    )
