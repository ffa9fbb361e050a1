"""LangGraph Studio entry: retrieval complexity (RRCP) of a question (input: question,
optional references; output: retrieval_complexity with every intermediate score).

Settings: ``Config.from_env()`` (demo collection, packaged chat model as the s_i judge unless
``rca.toml`` or ``RCA_*`` variables say otherwise); a run takes no options of its own.
"""

from rag_complexity_agents.agents.context import serve_clients
from rag_complexity_agents.complexity.rrcp_graph import build_rc_graph
from rag_complexity_agents.config import Config

serve_clients()
graph = build_rc_graph(Config.from_env())
