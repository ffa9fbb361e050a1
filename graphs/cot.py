"""LangGraph Studio entry: few-shot CoT over first-stage passages.

Defaults: demo collection, packaged chat model, CPU profile (RCA_* variables apply).
"""

from rag_complexity_agents.agents.registry import studio_graph

graph = studio_graph("cot")
