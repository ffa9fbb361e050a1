"""LangGraph Studio entry: the Adaptive-RAG router (classify → no retrieval | single-step |
multi-step loop).

Defaults: demo collection, packaged chat model, CPU profile; the trained classifier in
``adaptive.model_dir`` if one exists, else the zero-shot LLM classifier (RCA_* variables apply).
"""

from rag_complexity_agents.complexity.adaptive.strategy import studio_router

graph = studio_router()
