"""Adaptive-RAG router: classify the question's complexity, then run strategy A, B or C.

A LangGraph ``StateGraph``: ``classify`` → (conditional edge on the route) → ``A`` | ``B`` |
``C`` → END. ``classify`` asks a :class:`~.classifier.ComplexityClassifier` for P(A), P(B),
P(C); :func:`decide_route` takes the most probable label and, when its probability is below
``threshold``, escalates one step to the next more complex strategy (A → B, B → C).

The final state has ``answer`` and a JSON ``trace`` with the common harness keys
(``llm_calls`` and ``retrieval_calls`` include the classifier's own LLM call, ``evidence``
is the chosen strategy's) plus ``route``, ``predicted``, ``probabilities``, ``threshold``,
``escalated``, ``classifier`` and the chosen strategy's trace under ``strategy_trace``. So
:func:`rag_complexity_agents.agents.run.run_graph` and the LangChain/LlamaIndex adapters run
it like any loop graph, and the harness strategy ``adaptive`` (registered in
:mod:`.strategy`) like any other strategy.

Hook for later complexity measures (e.g. RRCP, ``complexity/rrcp.py``): ``raise_route`` is
called as ``raise_route(question, route, probabilities) -> label | None`` after the decision;
its answer can only *raise* the route (a lower or unknown label is ignored), and the trace
records ``raised_by``. Nothing here depends on RRCP.

**Run options.** A run may set the knobs of the knob table (the chosen pipeline runs with
them); ``classify`` checks them first, like every pipeline's first node: in a process that
serves API clients only the knobs, within their bounds, anything else is refused
(:func:`~...agents.context.served_options`), before the classifier loads. A cancelled run
stops before its next model call (:func:`~...agents.steps.cancellable`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict  # pydantic's JSON schema (Studio) needs it on 3.11

from ...agents.context import ResourceProvider, serving_clients
from ...agents.state import RunOptions
from ...agents.steps import cancellable
from ...errors import ConfigError, InputError
from ...types import RunResult
from .base import ComplexityClassifier, Probabilities, best_label
from .labels import LABELS, Label

StrategyFn = Callable[[str], RunResult]
RouteHook = Callable[[str, Label, Probabilities], Label | None]


def decide_route(probs: Mapping[str, float], threshold: float = 0.0) -> tuple[Label, Label, bool]:
    """(predicted, chosen, escalated): argmax label, then one escalation step if unsure.

    The chosen label is one step more complex than the predicted one when the predicted
    label's probability is below ``threshold`` (C cannot escalate).
    """
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"adaptive.threshold must be in [0, 1], got {threshold}")
    predicted = best_label(probs)
    if float(probs.get(predicted, 0.0)) < threshold and predicted != "C":
        return predicted, LABELS[LABELS.index(predicted) + 1], True
    return predicted, predicted, False


def raise_only(current: Label, proposed: object) -> Label:
    """``proposed`` when it is a label more complex than ``current``, else ``current``."""
    if proposed in LABELS and LABELS.index(proposed) > LABELS.index(current):
        return proposed  # type: ignore[return-value]
    return current


def route_report(
    classifier: ComplexityClassifier, questions: list[str], threshold: float = 0.0
) -> list[dict[str, Any]]:
    """Per question: probabilities, predicted label and the route after escalation."""
    out = []
    for question, probs in zip(questions, classifier.predict_proba(questions), strict=True):
        predicted, route, escalated = decide_route(probs, threshold)
        out.append(
            {
                "question": question,
                "predicted": predicted,
                "route": route,
                "escalated": escalated,
                "probabilities": probs,
                "classifier": getattr(classifier, "name", type(classifier).__name__),
            }
        )
    return out


class RouterInput(TypedDict, total=False):
    """What a run gives the router (Studio's input form): the question."""

    question: str


class RouterState(TypedDict, total=False):
    question: str
    probabilities: dict[str, float]
    predicted: str
    route: str
    escalated: bool
    raised_by: str | None
    classify_seconds: float
    answer: str
    trace: dict[str, Any]
    sources: list[dict[str, Any]]


class RouterOutput(TypedDict, total=False):
    """What the router returns, like every pipeline: answer, sources, trace."""

    answer: str
    sources: list[dict[str, Any]]
    trace: dict[str, Any]


_COST_KEYS = ("llm_calls", "retrieval_calls", "input_tokens", "output_tokens")


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def build_router_graph(
    classifier: ComplexityClassifier | Callable[[], ComplexityClassifier],
    strategies: Mapping[str, StrategyFn | Callable[[], StrategyFn]],
    *,
    threshold: float = 0.0,
    strategy_names: Mapping[str, str] | None = None,
    raise_route: RouteHook | None = None,
    lazy: bool = False,
    name: str = "adaptive_router",
) -> Any:
    """Compile the router graph.

    ``strategies`` maps "A", "B", "C" to strategies (``question -> RunResult``); with
    ``lazy=True`` the values (and ``classifier``) are zero-argument factories called on first
    use, so building the graph loads no model. ``strategy_names`` only labels the trace.
    """
    missing = [label for label in LABELS if label not in strategies]
    if missing:
        raise ConfigError(f"the router needs strategies for {', '.join(missing)}")
    decide_route({}, threshold)  # validates the threshold early
    names = dict(strategy_names or {})
    cache: dict[str, Any] = {}

    def get_classifier() -> ComplexityClassifier:
        if "classifier" not in cache:
            cache["classifier"] = classifier() if lazy else classifier  # type: ignore[operator]
        return cast(ComplexityClassifier, cache["classifier"])

    def get_strategy(label: str) -> StrategyFn:
        if label not in cache:
            cache[label] = strategies[label]() if lazy else strategies[label]  # type: ignore[call-arg]
        return cast(StrategyFn, cache[label])

    def classify(state: RouterState, config: RunnableConfig, runtime: Any = None) -> RouterState:
        context = getattr(runtime, "context", None)
        ResourceProvider.options_of(config, context, served=serving_clients())
        question = str(state.get("question") or "").strip()
        if not question:
            raise InputError("the question is empty")
        started = time.perf_counter()
        clf = get_classifier()
        probs = dict(clf.predict_proba([question])[0])
        predicted, route, escalated = decide_route(probs, threshold)
        raised_by = None
        if raise_route is not None:
            raised = raise_only(route, raise_route(question, route, probs))
            if raised != route:
                route, raised_by = raised, getattr(raise_route, "__name__", "raise_route")
        return {
            "question": question,
            "probabilities": probs,
            "predicted": predicted,
            "route": route,
            "escalated": escalated,
            "raised_by": raised_by,
            "classify_seconds": round(time.perf_counter() - started, 4),
        }

    def make_node(label: Label) -> Callable[[RouterState], RouterState]:
        def run(state: RouterState) -> RouterState:
            result = get_strategy(label)(state["question"])
            sub = dict(result.trace or {})
            clf = get_classifier()
            extra_llm = int(getattr(clf, "llm_calls_per_question", 0))
            trace: dict[str, Any] = {
                "strategy": "adaptive",
                "pipeline": "adaptive",
                "loop": sub.get("loop"),
                "retrieval": sub.get("retrieval"),
                "mer_enabled": sub.get("mer_enabled"),
                "answer_source": f"route {label}: {names.get(label, label)}",
                "steps": sub.get("steps") or [],
                "notes": sub.get("notes") or [],
                "question": state["question"],
                "route": label,
                "route_strategy": names.get(label, label),
                "predicted": state.get("predicted"),
                "probabilities": state.get("probabilities"),
                "threshold": threshold,
                "escalated": bool(state.get("escalated")),
                "raised_by": state.get("raised_by"),
                "classifier": getattr(clf, "name", type(clf).__name__),
                "classifier_llm_calls": extra_llm,
                "classify_seconds": state.get("classify_seconds"),
                "evidence": sub.get("evidence") or [],
                "answer": str(result.answer or ""),
                "strategy_trace": sub,
            }
            for key in _COST_KEYS:
                trace[key] = int(_number(sub.get(key)))
            trace["llm_calls"] += extra_llm
            return {"answer": str(result.answer or ""), "trace": trace, "sources": result.sources}

        return run

    # the context schema is the knobs (classify checks them, the chosen pipeline uses them)
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(
        RouterState,
        context_schema=RunOptions,
        input_schema=RouterInput,
        output_schema=RouterOutput,
    )
    graph.add_node("classify", cancellable(classify, "classify"))
    for label in LABELS:
        graph.add_node(label, cancellable(make_node(label), label))
        graph.add_edge(label, END)
    graph.add_edge(START, "classify")
    graph.add_conditional_edges(
        "classify", lambda state: state["route"], {label: label for label in LABELS}
    )
    return graph.compile(name=name)
