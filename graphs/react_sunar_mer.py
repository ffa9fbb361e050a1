"""LangGraph Studio entry: ReAct + NAR + ASU + MER (full SUNAR).

Defaults: demo collection, packaged chat model, CPU profile (RCA_* variables apply).
"""

from rag_complexity_agents.agents.registry import studio_graph

graph = studio_graph("react_sunar_mer")
