"""LangGraph Studio entry: the chat model alone, as a graph.

Defaults: demo collection, packaged chat model, CPU profile (RCA_* variables apply).
"""

from rag_complexity_agents.agents.registry import studio_graph

graph = studio_graph("no_retrieval_graph")
