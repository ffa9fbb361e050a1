"""Defects of the loops' decision logic: IRCoT's passage pool, SearChain's
consistency check."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rag_complexity_agents.agents.ircot import update_pool
from rag_complexity_agents.agents.searchain import consistent
from rag_complexity_agents.agents.state import DocRecord
from rag_complexity_agents.models.equivalence import LexicalEquivalence


def records(*ids: str) -> list[DocRecord]:
    return [{"id": i} for i in ids]  # type: ignore[typeddict-item]


def ids(pool: list[DocRecord]) -> list[str]:
    return [str(d.get("id")) for d in pool]


def test_ircot_pool_drops_the_oldest_passages_and_step_0_fills_it() -> None:
    # step 0: an empty pool takes the whole cap, not cap // 2
    assert ids(update_pool([], records("a", "b", "c", "d", "e", "f"), 5)) == list("abcde")
    # later steps: the newest retrieval gets half the places, the oldest passages go first
    pool = records("a", "b", "c", "d", "e")
    assert ids(update_pool(pool, records("f", "g", "h"), 5)) == list("cdefg")
    # passages already shown are not added twice; nothing new keeps the pool
    assert ids(update_pool(pool, records("a", "e"), 5)) == list("abcde")
    # a half-full pool: the newest retrieval fills every free place
    assert ids(update_pool(records("a", "b"), records("c", "d", "e", "f"), 5)) == list("abcde")
    assert ids(update_pool(records("a"), records("b", "c"), 1)) == ["b"]


def _ctx() -> Any:
    return SimpleNamespace(parts=SimpleNamespace(equivalence=LexicalEquivalence()))


def test_searchain_consistency_matches_whole_tokens() -> None:
    ctx = _ctx()
    assert not consistent(ctx, "no", "Norway", "Is it in Europe?")
    assert not consistent(ctx, "Norway", "no", "Is it in Europe?")
    assert not consistent(ctx, "1", "1999", "When?")
    assert consistent(ctx, "Miyazaki", "Hayao Miyazaki", "Who directed it?")
    assert consistent(ctx, "the United Kingdom", "United Kingdom.", "Where?")
    assert not consistent(ctx, "", "Japan", "Where?")
