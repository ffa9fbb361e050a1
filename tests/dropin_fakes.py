"""Shared by the drop-in tests: a small corpus in a LangChain ``InMemoryVectorStore`` with a
bag-of-words embedding (:class:`WordsEmbedding`, no model), and one scripted conversation per
loop (for the fake chat model of tests/agent_fakes.py)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable

from agent_fakes import Script
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

TEXTS = [
    "Spirited Away is a 2001 Japanese animated film written and directed by Hayao Miyazaki, "
    "who was born in Tokyo, Japan.",
    "Hayao Miyazaki was born in Tokyo, Japan, on 5 January 1941.",
    "Tokyo is the capital of Japan and its largest city.",
    "Studio Ghibli was founded in 1985 by Hayao Miyazaki and Isao Takahata.",
    "Amazon was founded by Jeff Bezos in Bellevue, Washington, in 1994.",
    "Jeff Bezos graduated from Princeton University in 1986.",
    "Princeton University is a private research university in New Jersey.",
    "The Godfather was directed by Francis Ford Coppola.",
]

MER = "[Reasoning]: The evidence says Miyazaki was born in Tokyo.\n[Final Answer]: Japan"


def documents() -> list[Document]:
    return [Document(page_content=text, id=f"doc{i}") for i, text in enumerate(TEXTS)]


class WordsEmbedding(Embeddings):
    """Each lower-cased word of a text hashed into one of ``size`` dimensions, normalised: texts
    that share words are close, so a question finds the passages about it (the scripted answers
    are then supported by what the run read), with no model."""

    def __init__(self, size: int = 256) -> None:
        self.size = size

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.size
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.size] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def lean_store(size: int = 256) -> tuple[WordsEmbedding, InMemoryVectorStore]:
    """(embeddings, a vector store holding :data:`TEXTS`)."""
    embeddings = WordsEmbedding(size=size)
    store = InMemoryVectorStore(embeddings)
    store.add_documents(documents())
    return embeddings, store


#: SUNAR's three parts (NAR, ASU, MER) in our Self-Ask loop, for ``create_rag_agent``.
SUNAR = {"pipeline": "self_ask_sunar_mer"}

LOOP_SCRIPTS: dict[str, Callable[[], Script]] = {
    "plan_execute": lambda: Script(
        plan="1. Who directed Spirited Away?\n2. In which country was #1 born?",
        answer=["Hayao Miyazaki", "Japan"],
        asu="Hayao Miyazaki",
        mer=MER,
    ),
    "self_ask": lambda: Script(
        self_ask=["Follow up: Who directed Spirited Away?", "So the final answer is: Japan"],
        answer="Hayao Miyazaki",
        asu="Hayao Miyazaki",
        mer=MER,
    ),
    "react": lambda: Script(
        react=[
            "Thought 1: I need the director.\nAction 1: Search[Spirited Away director]",
            "Thought 2: He was born in Tokyo.\nAction 2: Finish[Japan]",
        ],
        asu="Hayao Miyazaki",
        mer=MER,
    ),
    "searchain": lambda: Script(
        searchain=[
            "[Query 1]: Who directed Spirited Away?\n[Answer 1]: Hayao Miyazaki\n"
            "[Final Answer]: Japan",
            "[Final Answer]: Japan",
        ],
        answer="Hayao Miyazaki",
        asu="Hayao Miyazaki",
        mer=MER,
    ),
    "ircot": lambda: Script(
        ircot=[
            "Spirited Away was directed by Hayao Miyazaki.",
            "Miyazaki was born in Tokyo, Japan. So the answer is: Japan",
        ],
        asu="Hayao Miyazaki",
        mer=MER,
    ),
    "cot": lambda: Script(cot="Miyazaki was born in Tokyo. So the answer is: Japan", mer=MER),
    "single_step": lambda: Script(answer="Japan", asu="Japan", mer=MER),
    "no_retrieval": lambda: Script(no_retrieval="Japan", mer=MER),
}
