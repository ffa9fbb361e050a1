"""LangGraph Studio entry: retrieval complexity (RRCP) of a question (input: question,
optional references; output: retrieval_complexity with every intermediate score).

Defaults: demo collection, packaged chat model as the s_i judge (RCA_* variables apply).
"""

from rag_complexity_agents.agents.context import serve_clients
from rag_complexity_agents.complexity.rrcp_graph import build_rc_graph

serve_clients()  # runs of API clients may change only the answer-shaping knobs
graph = build_rc_graph()
