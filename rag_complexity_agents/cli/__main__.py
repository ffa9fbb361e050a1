"""``python -m rag_complexity_agents.cli``: the same as ``rca``."""

from . import app

app()
