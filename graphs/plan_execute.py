"""LangGraph Studio entry: plan-and-execute (the sub-question chain planned first, each
question answered over first-stage retrieval).

Defaults: demo collection, packaged chat model, CPU profile (RCA_* variables apply).
"""

from rag_complexity_agents.agents.registry import studio_graph

graph = studio_graph("plan_execute")
