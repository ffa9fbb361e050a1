"""Config sections of the measuring tools: evaluation harness, GRADE, RRCP, Adaptive-RAG."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from .pipelines import DEFAULT_PIPELINE


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
    n_dr_bins: int = Field(
        4,
        ge=1,
        le=10,
        description="D_r quantile bins (paper: quartiles).",
    )
    binning: Literal["global", "per_hop"] = Field(
        "global",
        description="Where the D_r bin edges come from: 'per_hop' (the paper's way: the "
        "quantiles within each hop level) or 'global' (the quantiles over all questions, so "
        "every hop level shares the bins). Not in the paper: the default 'global'.",
    )
    metric: str = Field(
        "acc",
        description="Run-file metric counted as correct ('acc': gold is a substring of the "
        "prediction); the paper uses an LLM judge, not used here.",
    )
    min_hops: int = Field(2, ge=1, description="Shortest generated path, in edges (paper: 2).")
    max_hops: int = Field(5, ge=1, le=8, description="Longest generated path (paper: 5).")
    paths_per_hop: int = Field(
        10, ge=1, description="Paths per hop count; multi-sentence paths first (ours, not paper's)."
    )
    seed: int = 0
    chunk_size: int = Field(
        256,
        ge=128,
        le=256,
        description="Generated sets' chunk length (paper: 128-256); "
        "`rca grade matrix` on dataset runs uses the datasets' paragraphs as they are.",
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
    equivalence: Literal["groups", "pairs"] = Field(
        "groups",
        description="How equivalent entity names are found inside a cluster: 'groups' (the "
        "paper): the LLM groups the cluster's names as 'always' or 'context'; 'pairs' (not in "
        "the paper): names that look like one name written two ways (with a qualifier: 'Ann "
        "Arbor' / 'Ann Arbor, Michigan'; a surname and the cluster's one full name ending with "
        "it: 'Pepys' / 'Samuel Pepys') are each put to the LLM as a Yes/No question and merged "
        "('always') on Yes. The packaged models mostly answer the group prompt with one name as "
        "its own group, and say Yes to most pairs of names where one contains the other.",
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
        "'cross-encoder:<local dir>'. Not in the paper: every one of them (the paper's "
        "GenEval, a T5-XXL reference-based evaluator, is not available offline).",
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
        description="'auto' (the trained model in model_dir if it exists, else 'head', else "
        "the zero-shot LLM), 'head' (the shipped logistic head on the embedder's vectors; not "
        "in the paper: trained on dataset-bias labels, never predicts A), 'llm' (zero-shot "
        "chat model), 'heuristic' (no model), or a path to a directory written by "
        "`rca adaptive train`.",
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
    a_strategy: str = Field("no_retrieval", description="Pipeline of A (no retrieval).")
    b_strategy: str = Field("single_step", description="Pipeline of B (single-step).")
    c_strategy: str = Field(
        DEFAULT_PIPELINE,
        description="Pipeline of C (multi-step): the default pipeline; the paper's C is IRCoT "
        "(pipeline ircot).",
    )
    correct_metric: Literal["cover_em", "em", "f1", "acc"] = Field(
        "cover_em",
        description="Metric that counts as correct for labels: 'cover_em' (gold is a "
        "token run of the prediction), 'acc' (Adaptive-RAG's Acc: a substring), 'em' or 'f1'.",
    )
    min_score: float = Field(1.0, ge=0.0, le=1.0, description="Threshold on correct_metric.")
    epochs: int = Field(3, ge=1, le=100, description="Fine-tuning epochs.")
    learning_rate: float = Field(5e-5, gt=0.0, description="AdamW learning rate (paper: 3e-5).")
    batch_size: int = Field(16, ge=1, description="Training batch size (paper: 32).")
    max_length: int = Field(64, ge=8, le=512, description="Tokens per question (paper: 384).")
    seed: int = 0
    torch_threads: int = Field(1, ge=1, le=64, description="torch CPU threads for training.")
