"""LangGraph Studio entry: single-step RAG as a graph.

Defaults: demo collection, packaged chat model, CPU profile (RCA_* variables apply).
"""

from rag_complexity_agents.agents.registry import studio_graph

graph = studio_graph("single_step_graph")
