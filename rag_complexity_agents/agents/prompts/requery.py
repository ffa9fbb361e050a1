"""Re-query prompt for the ASU edges: every batch was uncertain, ask for a better query."""

from __future__ import annotations

SYSTEM = (
    "A search for passages that answer a question found nothing useful. Write one new, "
    "different search query (a few keywords or a short question) that is more likely to find "
    "the answer. Reply with the query only."
)


def messages(question: str, query: str, original: str) -> list[tuple[str, str]]:
    context = f"Overall question: {original}\n" if original and original != question else ""
    return [
        ("system", SYSTEM),
        ("human", f"{context}Question to answer: {question}\nFailed query: {query}\nNew query:"),
    ]
