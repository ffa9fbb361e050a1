"""Prompts of the GRADE generation pipeline (our own wording; exemplars are data).

Each builder returns LangChain-style ``(role, content)`` message tuples. The system messages
are fixed per step so that a llama.cpp model can reuse their KV cache across calls; what
changes (sentences, claims, chains) goes into the last user message. Formats are kept simple
for small local models: numbered lines, ``(a | b | c | n)`` triples, ``[a | b] always`` groups,
and Yes/No judgements.
"""

from __future__ import annotations

from collections.abc import Sequence

Messages = list[tuple[str, str]]

CLAIMS_SYSTEM = """\
You turn the sentences of a document into standalone factual claims.
For every numbered sentence write one claim with the same number.
A claim keeps all facts of its sentence and can be read on its own: replace pronouns and \
vague references (he, she, it, they, its, the city, the company) with the full names they \
stand for, using the document title. Do not add facts.
If a sentence states no fact, write its number followed by NONE.

Example
Document title: Marie Curie
Sentences:
1. She was born in Warsaw in 1867.
2. Her husband Pierre shared the 1903 Nobel Prize in Physics with her.
Claims:
1. Marie Curie was born in Warsaw in 1867.
2. Pierre Curie, the husband of Marie Curie, shared the 1903 Nobel Prize in Physics with her."""

TRIPLES_SYSTEM = """\
You extract knowledge-graph triples from numbered claims.
Write one triple per line as (subject | relation | object | claim number).
Subject and object are short names (people, places, organisations, works, dates, things) \
written as in the claim; the relation is a short verb phrase. Never use pronouns.
Cover every fact of every claim, one fact per triple.

Example
Claims:
1. Marie Curie was born in Warsaw in 1867.
2. Warsaw is the capital of Poland.
Triples:
(Marie Curie | was born in | Warsaw | 1)
(Marie Curie | was born in the year | 1867 | 1)
(Warsaw | is the capital of | Poland | 2)"""

TRIPLE_SYSTEM = """\
You extract knowledge-graph triples from one claim.
Write one triple per line as (subject | relation | object).
Subject and object are short names (people, places, organisations, works, dates, things) \
copied from the claim; the relation is a short verb phrase. Never use pronouns.
Cover every fact of the claim, one fact per triple, and nothing else.

Example
Claim: Marie Curie was born in Warsaw in 1867.
Triples:
(Marie Curie | was born in | Warsaw)
(Marie Curie | was born in the year | 1867)"""

CONSISTENCY_SYSTEM = """\
You compare a claim with the sentence it was written from.
Answer Yes if every fact of the claim is stated by the sentence (a pronoun replaced by the \
name it refers to is fine; wording and style do not matter).
Answer No if the claim adds, drops the point of, or changes a fact.
Reply with one word: Yes or No."""

EQUIVALENCE_SYSTEM = """\
Below are claims and the entity names found in them. Some names may refer to the same thing.
Group names that refer to the same thing. Write one group per line as
[name | name] always   if they are the same thing in any context (e.g. USA and United States)
[name | name] context  if they are the same thing only in these claims (e.g. the director \
and Guillermo del Toro)
Copy the names exactly as listed. Never group different things. If no names refer to the \
same thing, write NONE."""

ALIAS_SYSTEM = """\
Below are claims and two names found in them. Answer Yes if both names refer to the same \
person, place, work, organisation or thing (e.g. "Ann Arbor" and "Ann Arbor, Michigan"). \
Answer No if they refer to different things (e.g. a film and its sequel, a person and a \
place named after them).
Reply with one word: Yes or No."""

QUESTION_SYSTEM = """\
You write one multi-hop quiz question from a chain of facts.
The answer to the question is given; it is the last entity of the chain.
Begin from the first entity and mention each middle entity only through its relation, \
without naming it, so that answering needs every fact of the chain. Never write the answer \
in the question.
Reply with the question only, on one line, ending with a question mark.

Example
Answer: Poland
Chain:
(Marie Curie | was born in | Warsaw)
(Warsaw | is the capital of | Poland)
Question: Marie Curie was born in the capital of which country?"""

HOP_QUESTION_SYSTEM = (
    "Write a quiz question whose answer is the given answer, using the fact. Mention the "
    "other entity of the fact by its exact name and never write the answer. Reply with the "
    "question only."
)

#: (fact, answer) → question; shown as earlier chat turns (small models follow turns best).
HOP_QUESTION_EXEMPLARS: tuple[tuple[tuple[str, str, str], str, str], ...] = (
    (
        ("Warsaw", "is the capital of", "Poland"),
        "Poland",
        "Warsaw is the capital of which country?",
    ),
    (
        ("The Hobbit", "was written by", "J. R. R. Tolkien"),
        "J. R. R. Tolkien",
        "Who wrote The Hobbit?",
    ),
    (
        ("Marie Curie", "was born in the year", "1867"),
        "1867",
        "In which year was Marie Curie born?",
    ),
    (
        ("Alan Turing", "studied at", "King's College"),
        "King's College",
        "At which college did Alan Turing study?",
    ),
)

DESCRIPTION_SYSTEM = (
    "Describe the entity without naming it, as a short noun phrase built from the fact that "
    "names the other entity exactly. Reply with the noun phrase only."
)

#: (fact, described entity) → description, shown as earlier chat turns.
DESCRIPTION_EXEMPLARS: tuple[tuple[tuple[str, str, str], str], ...] = (
    (("Marie Curie", "was born in", "Warsaw"), "the city where Marie Curie was born"),
    (("The Hobbit", "was written by", "J. R. R. Tolkien"), "the author of The Hobbit"),
    (("Apple", "was founded by", "Steve Jobs"), "the founder of Apple"),
    (("Warsaw", "is the capital of", "Poland"), "the country whose capital is Warsaw"),
)

VALIDATION_SYSTEM = """\
You review question-answer pairs for a test set.
Answer Yes if the question can be understood on its own (it names what it is about; no \
unexplained he, she, it, they, this or that) and the answer is a specific name, date or term \
that answers it.
Answer No if the question is vague or depends on missing context, or if the answer is vague \
or does not fit the question.
Reply with one word: Yes or No."""


def numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, start=1))


def claims_messages(title: str, context: str, sentences: Sequence[str]) -> Messages:
    user = (
        f"Document title: {title}\nDocument: {context}\nSentences:\n{numbered(sentences)}\nClaims:"
    )
    return [("system", CLAIMS_SYSTEM), ("user", user)]


def triples_messages(claims: Sequence[str]) -> Messages:
    if len(claims) == 1:
        return [("system", TRIPLE_SYSTEM), ("user", f"Claim: {claims[0]}\nTriples:")]
    return [("system", TRIPLES_SYSTEM), ("user", f"Claims:\n{numbered(claims)}\nTriples:")]


def consistency_messages(sentence: str, claim: str) -> Messages:
    user = f"Sentence: {sentence}\nClaim: {claim}\nIs the claim consistent with the sentence?"
    return [("system", CONSISTENCY_SYSTEM), ("user", user)]


def equivalence_messages(claims: Sequence[str], entities: Sequence[str]) -> Messages:
    claim_lines = "\n".join(f"- {c}" for c in claims)
    entity_lines = "\n".join(f"- {e}" for e in entities)
    user = f"Claims:\n{claim_lines}\nEntity names:\n{entity_lines}\nGroups:"
    return [("system", EQUIVALENCE_SYSTEM), ("user", user)]


def alias_messages(claims: Sequence[str], first: str, second: str) -> Messages:
    claim_lines = "\n".join(f"- {c}" for c in claims)
    user = f"Claims:\n{claim_lines}\nName 1: {first}\nName 2: {second}\nSame thing?"
    return [("system", ALIAS_SYSTEM), ("user", user)]


def question_messages(chain: Sequence[tuple[str, str, str]], answer: str) -> Messages:
    lines = "\n".join(f"({s} | {r} | {o})" for s, r, o in chain)
    user = f"Answer: {answer}\nChain:\n{lines}\nQuestion:"
    return [("system", QUESTION_SYSTEM), ("user", user)]


def _fact(fact: tuple[str, str, str]) -> str:
    return f"Fact: ({fact[0]} | {fact[1]} | {fact[2]})"


def hop_question_messages(fact: tuple[str, str, str], answer: str) -> Messages:
    messages: Messages = [("system", HOP_QUESTION_SYSTEM)]
    for shot, shot_answer, question in HOP_QUESTION_EXEMPLARS:
        messages += [("user", f"{_fact(shot)}\nAnswer: {shot_answer}"), ("assistant", question)]
    return [*messages, ("user", f"{_fact(fact)}\nAnswer: {answer}")]


def description_messages(fact: tuple[str, str, str]) -> Messages:
    messages: Messages = [("system", DESCRIPTION_SYSTEM)]
    for shot, description in DESCRIPTION_EXEMPLARS:
        messages += [("user", f"{_fact(shot)}\nDescribe: {shot[2]}"), ("assistant", description)]
    return [*messages, ("user", f"{_fact(fact)}\nDescribe: {fact[2]}")]


def validation_messages(question: str, answer: str) -> Messages:
    user = f"Question: {question}\nAnswer: {answer}\nIs this pair clear and self-contained?"
    return [("system", VALIDATION_SYSTEM), ("user", user)]
