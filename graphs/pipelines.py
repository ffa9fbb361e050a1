"""LangGraph Studio entries: the registered pipelines (``langgraph.json`` names each one).

``agent`` is the default pipeline, the one ``rca ask`` and ``create_rag_agent()`` run. Every
graph uses ``Config.from_env()`` (demo collection and packaged models unless ``rca.toml`` or
``RCA_*`` variables say otherwise); a run may change only the knobs of the knob table, within
their bounds. Nothing loads until the first run.
"""

from rag_complexity_agents.agents.registry import studio_graph

agent = studio_graph()
single_step = studio_graph("single_step")
no_retrieval = studio_graph("no_retrieval")
cot = studio_graph("cot")
self_ask = studio_graph("self_ask")
self_ask_sunar = studio_graph("self_ask_sunar")
self_ask_sunar_mer = studio_graph("self_ask_sunar_mer")
plan_execute_sunar_mer = studio_graph("plan_execute_sunar_mer")
react_sunar_mer = studio_graph("react_sunar_mer")
searchain_sunar_mer = studio_graph("searchain_sunar_mer")
ircot_sunar_mer = studio_graph("ircot_sunar_mer")
