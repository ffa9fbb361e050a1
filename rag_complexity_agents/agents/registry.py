"""Build the graph of a registered pipeline (:mod:`rag_complexity_agents.config.pipelines`).

Loops: ``plan_execute``, ``self_ask``, ``react``, ``searchain``, ``ircot`` and the one-pass
``single_step``, ``cot``, ``no_retrieval``. A pipeline fixes a loop's retrieval strategy and
MER; runs can still change every knob of :mod:`~rag_complexity_agents.config.knobs`.
The router pipeline (``adaptive``) lives a layer up, in
:mod:`rag_complexity_agents.complexity.adaptive`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..components import Components
from ..config import Config
from ..config.knobs import canonical
from ..config.pipelines import DEFAULT_PIPELINE, Pipeline, get_pipeline
from ..errors import ConfigError
from .baselines import COT, NO_RETRIEVAL, SINGLE_STEP
from .context import serve_clients
from .ircot import IRCOT
from .plan_execute import PLAN_EXECUTE
from .react import REACT
from .searchain import SEARCHAIN
from .self_ask import SELF_ASK
from .wiring import Graph, Loop, build_loop

LOOPS: dict[str, Loop] = {
    loop.name: loop
    for loop in (PLAN_EXECUTE, SELF_ASK, REACT, SEARCHAIN, IRCOT, COT, SINGLE_STEP, NO_RETRIEVAL)
}
"""Loop name → its :class:`~.wiring.Loop`."""


def build_pipeline(
    name: str | Pipeline = DEFAULT_PIPELINE,
    config: Config | None = None,
    *,
    components: Components | None = None,
    checkpointer: Any = None,
    knobs: Mapping[str, Any] | None = None,
    graph_name: str | None = None,
) -> Graph:
    """The compiled graph of the pipeline ``name``; ``knobs`` (names or paper symbols of
    :mod:`~rag_complexity_agents.config.knobs`) become this graph's run defaults;
    ``graph_name`` names the compiled graph (default: the pipeline's name)."""
    pipeline = name if isinstance(name, Pipeline) else get_pipeline(name)
    if pipeline.router:
        raise ConfigError(
            f"the pipeline {pipeline.name!r} has a router: build it with "
            "rag_complexity_agents.create_rag_agent"
        )
    return build_loop(
        LOOPS[pipeline.loop],
        pipeline,
        config,
        components=components,
        checkpointer=checkpointer,
        knobs=canonical(knobs or {}),
        name=graph_name,
    )


def studio_graph(name: str = DEFAULT_PIPELINE) -> Graph:
    """A pipeline's graph for the LangGraph server: the config of :meth:`Config.from_env`
    (demo collection and packaged models unless ``rca.toml`` or ``RCA_*`` say otherwise);
    runs may change only the knobs of the knob table (:func:`~.context.serve_clients`).
    Nothing loads until a run."""
    serve_clients()
    return build_pipeline(name, Config.from_env())
