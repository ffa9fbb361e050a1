"""One typed configuration object holding every knob.

Precedence (highest first): explicit overrides (CLI flags, ``configurable`` in graphs) →
environment variables (``RCA_`` prefix, ``__`` between nesting levels, e.g.
``RCA_CORPUS__CHUNK_SIZE=256``) → a TOML file (``RCA_CONFIG`` or ``./rca.toml``) → the
profile (``agents.profile``, see :mod:`.profiles`) → defaults. Paper symbols keep the paper's
names and defaults; the ``cpu`` profile (the default) gives the paper-sized knobs that nobody
set smaller values (:func:`is_set` tells which were set).

Fields that cannot change an answer (paths, endpoints, threads, batch sizes, measurement
sections) say so with :data:`NEUTRAL`; :func:`answer_neutral_keys` lists them (a
run's fingerprint leaves them out).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .errors import ConfigError

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
        "bi-encoder", description="'bi-encoder', 'splade' or 'cross-encoder:<local path>'."
    )
    equivalence: str = Field(
        "lexical", description="'lexical', 'embedding', 'llm' or 'nli:<local path>'."
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
        None, description="llama.cpp threads; None = all cores (cpu profile: 1).", **NEUTRAL
    )
    max_tokens: int = Field(256, ge=1, description="Default generation length.")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int = 0
    embed_batch_size: int = Field(64, ge=1, **NEUTRAL)
    embedding_cosine_threshold: float = Field(
        0.85, ge=-1.0, le=1.0, description="Cosine at which the 'embedding' equivalence says yes."
    )


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


class GraphConfig(BaseModel):
    """Neighbourhood graph G (SUNAR §3.1.1): top-k most similar chunks per chunk."""

    k: int = Field(100, ge=1, description="Neighbours stored per chunk (paper: 100).")
    block_size: int = Field(
        4096,
        ge=64,
        description="Rows per block of the exact top-k build.",
        **NEUTRAL,
    )


class RetrievalConfig(BaseModel):
    """First-stage retrieval."""

    mode: Literal["bm25", "dense", "hybrid"] = "hybrid"
    k: int = Field(10, ge=1, description="Documents returned to the caller.")
    first_stage_k: int = Field(
        100, ge=1, description="R: first-stage list size (paper: 100; cpu profile: 20)."
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal-rank-fusion constant.")


class AnswerConfig(BaseModel):
    """How evidence is shown to the answering model: the main cost/fidelity trade-off on CPU
    (prompt reading is ~60 tokens/s for the packaged 0.5B model)."""

    passages: int = Field(3, ge=1, description="Evidence passages per answering prompt.")
    passage_chars: int = Field(
        700, ge=50, description="Each passage is cut to this length (cpu profile: 400)."
    )


class NARParams(BaseModel):
    """SUNAR Algorithm 1's knobs (the one source of their defaults and checks): batch size b,
    budget c, neighbours looked up per scored document."""

    b: int = Field(
        16,
        description="Batch size b: documents scored per iteration (paper: 16; the cpu "
        "profile's default: 2).",
    )
    c: int = Field(
        100,
        ge=0,
        description="Re-ranking budget c: documents scored in total per query (paper: 100; the "
        "cpu profile's default: 8); 0 scores nothing and keeps the first-stage order.",
    )
    neighbours_per_doc: int = Field(
        10,
        ge=0,
        description="Graph neighbours of each scored document added to the neighbour pool N "
        "(paper: 10 of the 100 stored); 0 turns NAR into plain re-ranking.",
    )

    @field_validator("b")
    @classmethod
    def _positive_batch(cls, b: int) -> int:
        if b < 1:
            raise ValueError(f"NAR batch size b must be at least 1, got {b}")
        return b


class NARConfig(NARParams):
    """Neighbourhood-Aware Retrieval, SUNAR Algorithm 1 (the first-stage size R is
    ``retrieval.first_stage_k``), and how :class:`SunarRetriever` feeds it."""

    pool: Literal["own", "original", "union"] = Field(
        "union",
        description="Initial ranking R of a sub-question: 'own' = its own first-stage list, "
        "'original' = the original question's list (what the official code does), 'union' = "
        "both fused by reciprocal rank.",
    )
    missing_graph: Literal["error", "rerank"] = Field(
        "error",
        description="When the collection has no usable neighbourhood graph: 'error' raises "
        "CorpusError, 'rerank' falls back to re-ranking R only (recorded in the trace).",
    )


class ASUConfig(BaseModel):
    """Answer Semantic Uncertainty (SUNAR §3.2): per NAR batch, sample m answers, cluster
    them, divide the batch's scores by the number of clusters s (sign-safely)."""

    enabled: bool = Field(
        False, description="Re-score NAR batches by answer uncertainty (costs m LLM samples each)."
    )
    m: int = Field(
        10, ge=1, description="Answers sampled per batch (official code: 10; cpu profile: 3)."
    )
    temperature: float = Field(0.3, ge=0.0, le=2.0, description="Sampling temperature (0.3).")
    rule: Literal["strict", "lenient"] = Field(
        "strict",
        description="'strict' = entailment both ways (the paper, Kuhn et al.); 'lenient' = no "
        "contradiction either way (the official code). Applies to NLI / LLM-judge equivalences.",
    )
    max_tokens: int = Field(24, ge=1, description="Tokens per sampled answer (cpu profile: 12).")
    max_passage_chars: int = Field(
        600,
        ge=50,
        description="Each batch passage is cut to this many characters in the prompt (the cpu "
        "profile's default: 300).",
    )
    rescore: Literal["log", "multiplicative"] = Field(
        "log",
        description="Sign-safe 1/s: 'log' divides exp(score) by s (score - ln s); "
        "'multiplicative' divides positive scores by s and multiplies negative ones by s.",
    )


class MERConfig(BaseModel):
    """Meta Evidence Reasoner (SUNAR §3.2, Fig. 4)."""

    l: int = Field(  # noqa: E741 - the paper's symbol
        10,
        ge=1,
        description="Top-l evidences across sub-questions given to the reasoner (paper: 10; the "
        "cpu profile's default: 4).",
    )
    max_tokens: int = Field(
        256, ge=1, description="Tokens for the reasoned final answer (cpu profile: 96)."
    )
    max_evidence_chars: int = Field(
        700,
        ge=50,
        description="Each evidence passage is cut to this many characters (the cpu profile's "
        "default: 350).",
    )


class AgentsConfig(BaseModel):
    """Decomposition loops (``rag_complexity_agents.agents``): bounds, retrieval strategy, ASU
    edges and the CPU profile. Every knob can also be changed per run (``configurable``)."""

    retrieval: Literal["none", "first_stage", "rerank", "nar", "sunar"] = Field(
        "sunar",
        description="Retrieval node strategy: none, first_stage, rerank (scorer over R, no "
        "neighbours), nar (NAR, Algorithm 1) or sunar (NAR + ASU re-scoring).",
    )
    mer: bool = Field(True, description="Finish with the Meta Evidence Reasoner (SUNAR §3.2).")
    max_steps: int = Field(
        4, ge=1, le=50, description="Loop steps (sub-questions, actions, CoT sentences) per run."
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
        description="ASU edges: a batch counts as uncertain when its s > 1 and s >= this "
        "fraction of m.",
    )
    max_explore: int = Field(
        1, ge=0, le=10, description="ASU edges: extra NAR rounds when every batch is uncertain."
    )
    explore_budget: int | None = Field(
        None, ge=1, description="Documents added to c per exploration round (None: nar.b)."
    )
    max_requery: int = Field(
        1, ge=0, le=5, description="ASU edges: re-queries once exploring cannot help."
    )
    requery: Literal["expand", "llm"] = Field(
        "expand",
        description="How to re-query: 'expand' adds the original question's words, 'llm' asks "
        "the chat model for a new search query.",
    )
    profile: Literal["cpu", "paper"] = Field(
        "cpu",
        description="'cpu' gives the paper-sized knobs nobody set (TOML, environment, flags) "
        "smaller defaults (profiles.CPU_PROFILE); 'paper' keeps the paper's defaults.",
    )


class EvalConfig(BaseModel):
    """Evaluation harness (``rca eval``, ``rag_complexity_agents.eval``)."""

    data_dir: Path | None = Field(
        None,
        description="Directory of the dataset JSONL files (None: $RCA_DATA_DIR, else "
        "../shared/data beside the repository).",
    )
    runs_dir: Path | None = Field(
        None, description="Where run files go when --out is not given (None: <corpus.home>/runs)."
    )
    llm_cache: bool = Field(True, description="Cache LLM calls on disk across runs.")
    llm_cache_path: Path | None = Field(
        None, description="SQLite file of the LLM call cache (None: <models.home>/llm_cache.sqlite)"
    )
    concurrency: int = Field(1, ge=1, le=64, description="Questions answered in parallel.")
    recall_ks: list[int] = Field(
        default_factory=lambda: [2, 5, 10], description="k of the evidence recall@k metrics."
    )
    fsync: bool = Field(True, description="fsync the run file after every finished question.")


class GradeConfig(BaseModel):
    """GRADE (``rag_complexity_agents.complexity.grade``): difficulty matrix and the
    knowledge-graph generation of difficulty-controlled multi-hop questions."""

    aggregation: Literal["min", "mean", "power"] = Field(
        "min",
        description="D_r = 1 - agg_i sim(q, c_i) over supporting chunks: 'min' (paper default), "
        "'mean', or 'power' (power mean with exponent p).",
    )
    p: float = Field(-2.0, description="Exponent of the power-mean aggregation (paper: -2).")
    n_dr_bins: int = Field(4, ge=1, le=10, description="D_r quantile bins (paper: quartiles).")
    metric: str = Field("acc", description="Answer metric of a run file counted as correctness.")
    min_hops: int = Field(2, ge=1, description="Shortest generated path, in edges (paper: 2).")
    max_hops: int = Field(5, ge=1, le=8, description="Longest generated path (paper: 5).")
    paths_per_hop: int = Field(10, ge=1, description="Paths sampled per hop count.")
    seed: int = 0
    chunk_size: int = Field(
        256, ge=128, le=256, description="Evaluation-setting chunk length (paper: 128-256)."
    )
    chunk_overlap: int = Field(50, ge=0, description="Evaluation-setting overlap (paper: 50).")
    sentences_per_prompt: int = Field(
        6, ge=1, le=20, description="Sentences per claim / triple extraction prompt."
    )
    claims: Literal["llm", "rule"] = Field(
        "llm",
        description="Decontextualised claims written by the LLM (paper), or by a rule that "
        "replaces a sentence's leading pronoun with the document title (fast; for small models "
        "that copy sentences anyway).",
    )
    triples_per_prompt: int = Field(
        1, ge=1, le=20, description="Claims per triple-extraction prompt (0.5B models: 1)."
    )
    consistency: Literal["llm", "none"] = Field(
        "llm", description="Claim-sentence consistency check by the LLM (Yes/No), or none."
    )
    consistency_threshold: float = Field(0.5, ge=0.0, le=1.0)
    claims_per_cluster: int = Field(
        8, ge=1, description="GMM components = ceil(claims / claims_per_cluster)."
    )
    cluster_membership: float = Field(
        0.2,
        gt=0.0,
        le=1.0,
        description="Soft clustering: a claim joins every cluster whose "
        "posterior reaches this value.",
    )
    max_entities_per_cluster: int = Field(
        24, ge=2, description="Entities shown to the equivalence prompt per cluster."
    )
    equivalence_min_cosine: float = Field(
        0.85,
        ge=-1.0,
        le=1.0,
        description="Guard against small-LLM over-grouping: a proposed equivalent name is kept "
        "if it shares a content word with the group's first name or their embedding cosine "
        "reaches this.",
    )
    validation: bool = Field(True, description="LLM validation drops ambiguous QA pairs.")
    validation_threshold: float = Field(0.5, ge=0.0, le=1.0)
    max_tokens: int = Field(200, ge=16, description="Tokens per extraction generation.")
    question_max_tokens: int = Field(48, ge=8, description="Tokens per written question.")
    question_mode: Literal["compose", "direct"] = Field(
        "compose",
        description="'direct': one LLM call writes the whole question from the path (the "
        "paper); 'compose': the LLM writes a one-hop question about the last fact and a "
        "description of each bridge entity, which are nested into the question (reliable with "
        "small models).",
    )

    @model_validator(mode="after")
    def _ranges(self) -> GradeConfig:
        if self.max_hops < self.min_hops:
            raise ValueError(f"grade.max_hops ({self.max_hops}) < min_hops ({self.min_hops})")
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("grade.chunk_overlap must be smaller than grade.chunk_size")
        return self


class RRCPConfig(BaseModel):
    """Retrieval complexity with RRCP (``rag_complexity_agents.complexity.rrcp``; Gabburo et
    al.): complex iff max_i s_i < T_ans and S_D >= T_com."""

    T_ans: float = Field(
        0.15, ge=0.0, le=1.0, description="Answerability threshold on max s_i (paper: 0.15)."
    )
    T_com: float = Field(
        0.80, ge=0.0, le=1.0, description="Completeness threshold on S_D (paper: 0.80)."
    )
    k: int = Field(5, ge=1, description="Documents retrieved per question (|D|).")
    evaluator: str = Field(
        "llm",
        description="s_i evaluator: 'llm' (P(yes) of the chat model), 'lexical' or "
        "'cross-encoder:<local dir>'.",
    )
    relevance_temperature: float = Field(
        0.05, gt=0.0, description="Softmax temperature τ of the MaxSim token relevance."
    )
    passage_chars: int = Field(600, ge=50, description="Each passage is cut to this length.")


class AdaptiveConfig(BaseModel):
    """Adaptive-RAG (``rag_complexity_agents.complexity.adaptive``): labels, classifier, router.

    Paper defaults where they apply (Jeong et al. 2024): strategies A/B/C, labels "simplest
    correct strategy, else dataset bias". The paper fine-tunes t5-large (lr 3e-5, batch 32,
    max length 384); offline we fine-tune the packaged MiniLM instead (see ``classifier``).
    """

    classifier: str = Field(
        "auto",
        description="'auto' (the trained model in model_dir if it exists, else the zero-shot "
        "LLM), 'llm' (zero-shot chat model), 'heuristic' (no model), or a path to a directory "
        "written by `rca adaptive train`.",
    )
    model_dir: Path | None = Field(
        None, description="Trained classifier directory (None: <models.home>/adaptive/classifier)."
    )
    backbone: str = Field(
        "all-minilm-l6-v2",
        description="Encoder to fine-tune: a packaged embedding name or a local HF model path.",
    )
    threshold: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Escalate to the next more complex strategy while the chosen class's "
        "probability is below this (0: never escalate).",
    )
    a_strategy: str = Field("no_retrieval", description="Harness strategy of A (no retrieval).")
    b_strategy: str = Field("single_step", description="Harness strategy of B (single-step).")
    c_strategy: str = Field(
        "self_ask_sunar_mer", description="Harness strategy / preset of C (multi-step loop)."
    )
    correct_metric: Literal["cover_em", "em", "f1", "acc"] = Field(
        "cover_em", description="Answer metric that counts as 'answered correctly' for labels."
    )
    min_score: float = Field(1.0, ge=0.0, le=1.0, description="Threshold on correct_metric.")
    epochs: int = Field(3, ge=1, le=100, description="Fine-tuning epochs.")
    learning_rate: float = Field(5e-5, gt=0.0, description="AdamW learning rate (paper: 3e-5).")
    batch_size: int = Field(16, ge=1, description="Training batch size (paper: 32).")
    max_length: int = Field(64, ge=8, le=512, description="Tokens per question (paper: 384).")
    seed: int = 0
    torch_threads: int = Field(1, ge=1, le=64, description="torch CPU threads for training.")


class Config(BaseSettings):
    """Every knob of rag_complexity_agents in one object."""

    model_config = SettingsConfigDict(
        env_prefix="RCA_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    models: ModelsConfig = Field(default_factory=ModelsConfig)
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    nar: NARConfig = Field(default_factory=NARConfig)
    asu: ASUConfig = Field(default_factory=ASUConfig)
    mer: MERConfig = Field(default_factory=MERConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    # the harness's own knobs and the measurement-only sections: they never change an answer
    eval: EvalConfig = Field(default_factory=EvalConfig, **NEUTRAL)
    grade: GradeConfig = Field(default_factory=GradeConfig, **NEUTRAL)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    rrcp: RRCPConfig = Field(default_factory=RRCPConfig, **NEUTRAL)
    collection: str = Field("demo", min_length=3, max_length=512)
    max_question_chars: int = Field(4000, ge=16, **NEUTRAL)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = os.environ.get("RCA_CONFIG") or "rca.toml"
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml_path),
        )

    def with_overrides(self, overrides: dict[str, Any]) -> Config:
        """A copy with dotted-key overrides applied, e.g. ``{"graph.k": 16}``; validated.

        What was set before stays set and the overridden keys become set; everything else
        keeps its default (so a profile still applies to it)."""
        data = self.model_dump(exclude_unset=True)
        for dotted, value in overrides.items():
            if value is None:
                continue
            model: type[BaseModel] = Config
            node = data
            *parents, leaf = dotted.split(".")
            for part in parents:
                section = _section_model(model, part)
                if section is None:
                    raise ConfigError(f"unknown config section {dotted!r}")
                model, node = section, node.setdefault(part, {})
            if leaf not in model.model_fields:
                raise ConfigError(f"unknown config key {dotted!r}")
            node[leaf] = value
        try:
            return Config.model_validate(data)
        except ValueError as exc:
            raise ConfigError(f"invalid config override: {exc}") from exc


def _section_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    field = model.model_fields.get(name)
    annotation = field.annotation if field is not None else None
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def is_set(config: BaseModel, dotted: str) -> bool:
    """Whether ``dotted`` was given a value (constructor, TOML, environment, override)
    instead of keeping its default."""
    node = config
    *parents, leaf = dotted.split(".")
    for part in parents:
        if part not in node.model_fields_set:
            return False
        node = getattr(node, part)
    return leaf in node.model_fields_set


def answer_neutral_keys(model: type[BaseModel] | None = None, prefix: str = "") -> set[str]:
    """Dotted keys whose fields say they cannot change an answer (:data:`NEUTRAL`);
    a section marked so stands for everything in it."""
    keys: set[str] = set()
    for name, field in (model or Config).model_fields.items():
        dotted = f"{prefix}{name}"
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("affects_answers") is False:
            keys.add(dotted)
            continue
        section = _section_model(model or Config, name)
        if section is not None:
            keys |= answer_neutral_keys(section, dotted + ".")
    return keys


def load_config(path: str | Path | None = None, **overrides: Any) -> Config:
    """Load the config from ``path`` (TOML), the environment and dotted ``overrides``."""
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        previous = os.environ.get("RCA_CONFIG")
        os.environ["RCA_CONFIG"] = str(path)
        try:
            cfg = Config()
        finally:
            if previous is None:
                os.environ.pop("RCA_CONFIG", None)
            else:
                os.environ["RCA_CONFIG"] = previous
    else:
        cfg = Config()
    return cfg.with_overrides({k.replace("__", "."): v for k, v in overrides.items()})
