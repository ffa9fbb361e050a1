"""The typed replies of every structured LLM step (loop moves, answers, judges), and two
helpers for a JSON schema: the instruction line that tells a model its fields, and a bound on
the tokens of a JSON text it allows.

String fields carry a ``max_length`` (and a ``min_length`` where an empty string would say
nothing): under a grammar (llama.cpp) or a JSON-schema ``format``
(Ollama) a reply then fits the token budget of :func:`json_token_bound`, so it is not cut off
in the middle of its JSON.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

QUERY_CHARS = 200
ANSWER_CHARS = 100
THOUGHT_CHARS = 300
CHAIN_NODES = 3
PLAN_QUESTIONS = 4


class SelfAskMove(BaseModel):
    """The next line of a Self-Ask scratchpad."""

    kind: Literal["follow_up", "final"] = Field(
        description="'follow_up' to look up one more simple question; 'final' once the "
        "intermediate answers are enough to answer the question"
    )
    text: str = Field(
        min_length=1,
        max_length=QUERY_CHARS,
        description="The follow-up question, or the short final answer",
    )


class ShortAnswer(BaseModel):
    """The answer to a question from the given passages."""

    answer: str = Field(
        min_length=1, max_length=ANSWER_CHARS, description="The answer in a few words, or 'unknown'"
    )


class ReActMove(BaseModel):
    """One ReAct turn: a thought and the action it leads to."""

    thought: str = Field(max_length=THOUGHT_CHARS, description="One short thought")
    action: Literal["search", "lookup", "finish"] = Field(
        description="'search' to retrieve passages for a query, 'lookup' to find the next "
        "sentence with a keyword in the passages so far, 'finish' to give the answer"
    )
    argument: str = Field(
        min_length=1,
        max_length=QUERY_CHARS,
        description="The search query, the lookup keyword, or the short final answer",
    )


class ChainStep(BaseModel):
    """One node of a SearChain chain."""

    query: str = Field(max_length=120, description="A simple question")
    answer: str = Field(max_length=60, description="Its short answer, or '' when it is not known")


class SearChainPlan(BaseModel):
    """The rest of a SearChain chain of queries, and the final answer when it is known."""

    nodes: list[ChainStep] = Field(
        max_length=CHAIN_NODES, description="The next queries with their answers, in order"
    )
    final_answer: str = Field(
        max_length=ANSWER_CHARS,
        description="The short final answer once the chain answers the question, else ''",
    )


class SubQuestionPlan(BaseModel):
    """The chain of simple questions a plan-and-execute run answers in order."""

    questions: list[Annotated[str, Field(min_length=1, max_length=150)]] = Field(
        min_length=1,
        max_length=PLAN_QUESTIONS,
        description="Simple questions in order; #1, #2, ... stand for earlier answers",
    )


class CoTStep(BaseModel):
    """One IRCoT reasoning sentence (the loop reads the answer from its answer pattern, as
    from a text reply)."""

    sentence: str = Field(
        min_length=1,
        max_length=THOUGHT_CHARS,
        description="The next reasoning sentence; once the passages give the answer, end it "
        "with 'So the answer is: <short answer>.'",
    )


class QuotedAnswer(BaseModel):
    """The words of a passage that answer the question, then the answer."""

    evidence: str = Field(max_length=400, description="The words of one passage that answer it")
    answer: str = Field(
        min_length=1, max_length=ANSWER_CHARS, description="The answer in a few words, or 'unknown'"
    )


class MERAnswer(BaseModel):
    """The Meta Evidence Reasoner's reasoning and final answer."""

    reasoning: str = Field(
        max_length=400, description="The evidence sentences that matter and the reasoning"
    )
    answer: str = Field(
        min_length=1, max_length=ANSWER_CHARS, description="The short, precise final answer"
    )


class YesNo(BaseModel):
    """A yes/no judgement."""

    answer: Literal["yes", "no"] = Field(description="'yes' or 'no'")


class Entailment(BaseModel):
    """Whether one statement implies another."""

    answer: Literal["yes", "no", "contradiction"] = Field(
        description="'yes' if statement 1 implies statement 2, 'contradiction' if they cannot "
        "both be true, else 'no'"
    )


def json_schema_of(schema: Any) -> dict[str, Any]:
    """The JSON schema of a pydantic model class, or ``schema`` itself when it is one."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if isinstance(schema, dict):
        return schema
    from langchain_core.utils.function_calling import convert_to_json_schema

    return convert_to_json_schema(schema)


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {})
        return target if isinstance(target, dict) else {}
    return node


def json_token_bound(schema: dict[str, Any]) -> int | None:
    """Tokens that any JSON text ``schema`` allows fits in (as llama.cpp's grammar writes it:
    at most one space around separators), or None when it has no bound (a string without
    ``maxLength``, an array without ``maxItems``, a free-form object).

    A token holds at least one character, except the pieces of a multi-byte character or of
    an escape sequence; the bound allows two tokens per character of a string."""

    def walk(node: dict[str, Any], depth: int) -> int | None:
        node = _resolve(node, schema)
        if depth > 20:
            return None
        for key in ("anyOf", "oneOf"):
            if key in node:
                sizes = [walk(n, depth + 1) for n in node[key]]
                return None if any(s is None for s in sizes) else max(s or 0 for s in sizes)
        if "const" in node:
            return len(json.dumps(node["const"])) + 1
        if "enum" in node:
            return max(len(json.dumps(v)) for v in node["enum"]) + 1
        kind = node.get("type")
        if kind == "string":
            limit = node.get("maxLength")
            return None if limit is None else 2 * int(limit) + 3
        if kind in ("integer", "number"):
            return 24
        if kind == "boolean":
            return 6
        if kind == "null":
            return 5
        if kind == "array":
            items, limit = node.get("items"), node.get("maxItems")
            if limit is None or not isinstance(items, dict):
                return None
            item = walk(items, depth + 1)
            return None if item is None else 3 + int(limit) * (item + 2)
        if kind == "object":
            props = node.get("properties")
            if not isinstance(props, dict) or node.get("additionalProperties", False) not in (
                False,
                None,
            ):
                return None
            total = 3
            for name, sub in props.items():
                size = walk(sub, depth + 1)
                if size is None:
                    return None
                total += len(json.dumps(name)) + 4 + size
            return total
        return None

    return walk(schema, 0)


def _field_line(name: str, node: dict[str, Any], root: dict[str, Any]) -> str:
    node = _resolve(node, root)
    description = str(node.get("description") or "").strip()
    if "enum" in node:
        choices = " or ".join(json.dumps(v) for v in node["enum"])
        return f'"{name}": {choices}' + (f" ({description})" if description else "")
    return f'"{name}": {description or node.get("type", "value")}'


def format_instruction(schema: Any) -> str:
    """One paragraph that tells a model the JSON object to reply with: its fields and what
    each means (from the schema's descriptions)."""
    root = json_schema_of(schema)
    props = root.get("properties") or {}
    lines = [_field_line(name, node, root) for name, node in props.items()]
    return "Reply with a JSON object with these fields only: " + "; ".join(lines) + "."
