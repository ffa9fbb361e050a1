"""LangGraph Studio entry: the Adaptive-RAG router (classify → no retrieval | single-step |
multi-step loop).

Defaults: demo collection, packaged chat model, CPU profile; the trained classifier in
``adaptive.model_dir`` if one exists, else the zero-shot LLM classifier (RCA_* variables apply).
The loops it routes to are built on the first question and inherit the run's ``configurable``:
:func:`serve_clients` makes every graph of this server accept only the answer-shaping knobs.
"""

from rag_complexity_agents.agents.context import serve_clients
from rag_complexity_agents.complexity.adaptive.strategy import studio_router

serve_clients()  # runs of API clients may change only the answer-shaping knobs
graph = studio_router()
