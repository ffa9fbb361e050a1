"""Framework-neutral plumbing shared by the LangChain and LlamaIndex adapters.

* :class:`RetrievalAdapter` turns a query into ``(docs, trace)`` with one of three strategies
  (``sunar`` = first stage + NAR + ASU, ``nar`` = first stage + NAR, ``first_stage``), thread
  safe, with the ``k`` rules every adapter follows:

  - ``k < 1`` (including ``k = 0``) raises :class:`~rag_complexity_agents.errors.InputError`
    (a retriever asked for nothing is almost always a bug in the caller);
  - ``k`` larger than what the strategy can rank returns everything it ranked
    (``trace["k_capped"]`` is true);
  - a first stage that finds nothing returns ``[]`` with ``trace["note"]`` saying so.

* :func:`doc_metadata` is the metadata every adapter attaches to a retrieved document:
  provenance (``first_stage`` / ``neighbour`` / ``backfill``), the chunk's ``doc_id`` and
  title, score, rank, NAR batch, the document whose neighbours brought it in, and the ASU
  clusters of its batch when ASU ran.
* :func:`resolve_graph` builds a preset or loop graph by name (or passes a compiled graph);
  :data:`DEFAULT_GRAPH` is the one the adapters build when none is named.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal

from ..components import Components
from ..config import Config
from ..errors import ConfigError, InputError
from ..types import ScoredDoc

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from ..retrieval.sunar import SunarRetriever

Strategy = Literal["sunar", "nar", "first_stage"]
STRATEGIES: tuple[str, ...] = ("sunar", "nar", "first_stage")


def check_k(k: Any) -> int:
    """``k`` as an int >= 1, else InputError (``k = 0`` is rejected, see the module doc)."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise InputError(f"k must be a positive integer, got {k!r}")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}; ask for one document or more")
    return k


def check_query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query is empty; pass the question to retrieve for")
    return query.strip()


def make_components(
    config: Config | None = None,
    *,
    collection: str | None = None,
    components: Components | None = None,
    profile: str | None = "cpu",
    **objects: Any,
) -> Components:
    """Components for ``config`` (default ``Config()``) with ``collection`` set and the
    ``cpu`` profile applied to knobs still at their paper defaults (``profile="paper"``
    keeps them). Given ``components`` are used as they are. ``objects`` are the user's
    objects and knobs of :func:`~rag_complexity_agents.api.rag_components` (``llm``,
    ``embeddings``, ``vectorstore``, ``retriever``, ``index``, ``documents``, ``scorer``,
    ``equivalence``, ``b``, ``c``, ``m``, …); None values are ignored."""
    if components is not None:
        return components
    objects = {name: value for name, value in objects.items() if value is not None}
    if objects:
        from ..api import rag_components

        return rag_components(config=config, collection=collection, profile=profile, **objects)
    from ..profiles import apply_profile

    cfg = config or Config()
    if collection is not None:
        cfg = cfg.with_overrides({"collection": collection})
    return Components(apply_profile(cfg, profile))


class RetrievalAdapter:
    """One retrieval strategy over :class:`Components`, safe to call from several threads."""

    def __init__(self, components: Components, strategy: Strategy | str = "sunar") -> None:
        if strategy not in STRATEGIES:
            raise ConfigError(
                f"unknown retrieval strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
            )
        self.components = components
        self.strategy = str(strategy)
        self._retriever: SunarRetriever | None = None
        self._lock = threading.Lock()

    @property
    def config(self) -> Config:
        return self.components.config

    def sunar(self) -> SunarRetriever:
        """The underlying :class:`~rag_complexity_agents.retrieval.sunar.SunarRetriever`."""
        if self._retriever is None:
            self._retriever = self.components.sunar_retriever(with_asu=self.strategy == "sunar")
        return self._retriever

    def retrieve(self, query: str, k: int) -> tuple[list[ScoredDoc], dict[str, Any]]:
        """The top ``k`` documents for ``query`` and a JSON-serialisable trace."""
        query = check_query(query)
        k = check_k(k)
        with self._lock:
            if self.strategy == "first_stage":
                first = self.components.first_stage
                docs = list(first.search(query, k))[:k]
                trace: dict[str, Any] = {
                    "retriever": "first_stage",
                    "first_stage": getattr(first, "name", type(first).__name__),
                    "query": query,
                }
            else:
                retriever = self.sunar()
                docs = retriever.retrieve(query, k)
                trace = dict(retriever.trace)
                trace["retriever"] = self.strategy
        trace["k"] = k
        trace["k_capped"] = len(docs) < k
        trace.setdefault("returned", [d.to_trace() for d in docs])
        if not docs:
            trace["note"] = "the first stage returned no documents for this query"
        return docs, trace


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def asu_of(doc: ScoredDoc, trace: dict[str, Any]) -> dict[str, Any]:
    """The ASU outcome of the NAR batch that scored ``doc`` ({} when ASU did not run)."""
    if doc.batch is None:
        return {}
    for batch in (trace.get("nar") or {}).get("batches") or []:
        if batch.get("index") == doc.batch:
            hook = batch.get("hook") or {}
            if hook.get("s") is None:
                return {}
            return {
                "asu_s": hook["s"],
                "asu_semantic_entropy": hook.get("semantic_entropy"),
                "asu_cluster_answers": list(hook.get("cluster_answers") or []),
                "asu_clusters": [list(c) for c in hook.get("clusters") or []],
            }
    return {}


def doc_metadata(
    doc: ScoredDoc, trace: dict[str, Any] | None = None, *, rank: int | None = None
) -> dict[str, Any]:
    """Metadata for a retrieved document: the chunk's own plain metadata, then ours
    (``rank`` is its 1-based position in the returned list)."""
    meta = {k: v for k, v in doc.chunk.metadata.items() if _plain(v)}
    meta.update(
        {
            "chunk_id": doc.id,
            "doc_id": doc.chunk.metadata.get("doc_id", doc.id),
            "title": doc.chunk.title,
            "provenance": doc.source,
            "score": float(doc.score),
            "rank": rank if rank is not None else doc.rank,
            "nar_batch": doc.batch,
            "via": doc.via,
        }
    )
    if trace:
        meta.update(asu_of(doc, trace))
    return meta


#: The graph the adapters build when none is named: the best loop of the end-to-end benchmark
#: (``benchmarks/results/end_to_end.md``). Plan-and-execute with first-stage retrieval and no
#: MER beat single-step on 2Wiki compositional with the packaged 1.5B model at about 3 LLM
#: calls a question; Self-Ask + SUNAR scored below single-step on MuSiQue with the 0.5B at
#: about 9, and MER broke its format on most dev questions.
DEFAULT_GRAPH = "plan_execute"


def resolve_graph(
    graph: str | CompiledStateGraph[Any, Any, Any, Any],
    config: Config | None = None,
    *,
    components: Components | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A compiled loop graph: a preset name (``self_ask_sunar_mer``), a loop name
    (``single_step``) or an already compiled graph (returned as is)."""
    if not isinstance(graph, str):
        return graph
    from ..agents.registry import LOOPS, PRESETS, build_graph, build_preset

    cfg = config or (components.config if components is not None else Config())
    if graph in PRESETS:
        return build_preset(graph, cfg, components=components)
    if graph in LOOPS:
        return build_graph(graph, cfg, components=components)
    raise ConfigError(
        f"unknown graph {graph!r}; use a preset or loop name ({', '.join(sorted(PRESETS))}) "
        "or pass a compiled graph"
    )


__all__ = [
    "STRATEGIES",
    "RetrievalAdapter",
    "Strategy",
    "asu_of",
    "check_k",
    "check_query",
    "doc_metadata",
    "make_components",
    "resolve_graph",
]
