"""LangGraph Studio entry: the Adaptive-RAG router (classify → no retrieval | single-step |
the default pipeline), the registry's ``adaptive`` pipeline.

The classifier is the trained one in ``adaptive.model_dir`` if it exists, else the head the
package ships (a logistic layer on the retrieval embedder); ``Config.from_env()`` supplies the
rest. A run may change only the knobs of the
knob table, within their bounds.
"""

from rag_complexity_agents.complexity.adaptive.pipeline import studio_router

graph = studio_router()
