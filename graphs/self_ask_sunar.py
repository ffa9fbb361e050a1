"""LangGraph Studio entry: Self-Ask + NAR + ASU (SUNAR without MER).

Defaults: demo collection, packaged chat model, CPU profile (RCA_* variables apply).
"""

from rag_complexity_agents.agents.registry import studio_graph

graph = studio_graph("self_ask_sunar")
