"""Tool calling and JSON-schema decoding for the llama.cpp model.

* :func:`grammar_text`: a llama.cpp GBNF grammar from a JSON schema (llama-cpp-python's
  converter, with control characters kept out of strings so that every reply is strict JSON).
* Tool calls are one JSON object, decoded under a grammar: ``{"name": <tool>, "arguments":
  {…}}`` (the Hermes / Qwen convention small instruct models are trained on) to call a tool,
  or ``{"answer": "…"}`` to reply without one. :func:`tool_choice_schema` builds that schema
  from the bound tools and ``tool_choice``; :func:`tools_instruction` tells the model about
  them; :func:`read_tool_reply` turns the reply into an ``AIMessage``'s content and tool calls;
  :func:`tool_call_text` renders an earlier call in the same format for the chat template.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
import uuid
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from langchain_core.messages import ToolCall

_STRING_CHAR = '[^"\\\\]'
_STRICT_CHAR = '[^"\\\\\\x7F\\x00-\\x1F]'
_ANSWER = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)', re.DOTALL)


@lru_cache(maxsize=64)
def _grammar(schema_json: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    grammar = json_schema_to_gbnf(schema_json)
    return str(grammar).replace(f"char ::= {_STRING_CHAR}", f"char ::= {_STRICT_CHAR}", 1)


def grammar_text(schema: Mapping[str, Any]) -> str:
    """The GBNF grammar of JSON texts that match ``schema`` (cached per schema)."""
    return _grammar(json.dumps(schema))  # key order matters: fields are written in order


def tool_specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """``{"name", "description", "parameters"}`` of each tool (LangChain tools, functions,
    pydantic models or OpenAI tool dicts)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    specs = []
    for tool in tools:
        function = convert_to_openai_tool(tool)["function"]
        specs.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "parameters": function.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return specs


def chosen_tools(specs: list[dict[str, Any]], tool_choice: Any) -> tuple[list[str], bool]:
    """(names of the tools the model may call, whether it may answer without a tool).

    ``tool_choice``: None / "auto" = any tool or an answer; "any" / "required" / True = any
    tool; a tool name (or ``{"function": {"name": …}}``) = that tool; "none" = no tool."""
    names = [s["name"] for s in specs]
    if tool_choice in (None, "auto"):
        return names, True
    if tool_choice in ("any", "required", True):
        return names, False
    if tool_choice == "none":
        return [], True
    if isinstance(tool_choice, Mapping):
        tool_choice = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
    if tool_choice in names:
        return [str(tool_choice)], False
    raise ValueError(f"tool_choice {tool_choice!r} names none of the bound tools {names}")


def tool_choice_schema(specs: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any] | None:
    """The JSON schema of a reply: a call of one of the chosen tools with its arguments, or
    (when allowed) a plain answer. None when no tool may be called (plain text)."""
    names, may_answer = chosen_tools(specs, tool_choice)
    if not names:
        return None
    options: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"name": {"const": s["name"]}, "arguments": s["parameters"]},
            "required": ["name", "arguments"],
        }
        for s in specs
        if s["name"] in names
    ]
    if may_answer:
        options.append(
            {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            }
        )
    return options[0] if len(options) == 1 else {"anyOf": options}


def tools_instruction(specs: list[dict[str, Any]], tool_choice: Any) -> str:
    """The system-prompt paragraph that lists the tools and the reply format."""
    names, may_answer = chosen_tools(specs, tool_choice)
    lines = ["You can call these tools:"]
    for spec in specs:
        if spec["name"] not in names:
            continue
        args = ", ".join(
            f"{arg} ({node.get('type', 'value')}"
            + (f": {node['description']}" if node.get("description") else "")
            + ")"
            for arg, node in (spec["parameters"].get("properties") or {}).items()
        )
        description = f" {spec['description']}" if spec["description"] else ""
        lines.append(f"- {spec['name']}:{description} Arguments: {args or 'none'}.")
    lines.append(
        "Call a tool for any fact you were not given. To call a tool, reply with "
        '{"name": <tool name>, "arguments": {<argument>: <value>}}.'
    )
    if may_answer:
        lines.append(
            'Once the tool results answer the question, reply with {"answer": <short answer>}.'
        )
    return "\n".join(lines)


def tool_call_text(call: Mapping[str, Any]) -> str:
    """An earlier tool call in the reply format (for the chat template)."""
    return json.dumps({"name": call.get("name", ""), "arguments": call.get("args") or {}})


MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects read as JSON (json.loads recurses per level)."""
MAX_INT_DIGITS = 640
"""Longest JSON integer read as an ``int`` (longer ones become floats: ``int`` raises on
thousands of digits and is quadratic below that)."""
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEPS = bytes.maketrans(b"[]{}", b"\x02\x00\x02\x00")  # opening: +1, closing: -1 (minus 1)


def _too_deep(text: str) -> bool:
    """Whether the arrays and objects of a JSON-like text nest deeper than
    :data:`MAX_JSON_DEPTH` (brackets inside strings do not count). Linear time."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False
    brackets = _NOT_BRACKETS.sub("", _JSON_STRING.sub("", text)).encode().translate(_STEPS)
    steps = map(operator.sub, brackets, itertools.repeat(1))
    return max(itertools.accumulate(steps), default=0) > MAX_JSON_DEPTH


def _json_int(digits: str) -> int | float:
    return int(digits) if len(digits) <= MAX_INT_DIGITS else float(digits)


def read_tool_reply(text: str) -> tuple[str, list[ToolCall]]:
    """(content, tool calls) of a reply decoded under :func:`tool_choice_schema`'s grammar.
    A reply cut off by the token limit keeps the answer text written so far. Total: any
    string is read in linear time (too deep nesting is not parsed as JSON, see
    :func:`_too_deep`); a non-string gives no content and no call."""
    if not isinstance(text, str):
        return "", []
    try:
        if _too_deep(text):
            raise json.JSONDecodeError("nested too deeply", text, 0)
        data = json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError:
        match = _ANSWER.search(text)
        if match is None:
            return text, []
        try:
            return json.loads(f'"{match.group(1).rstrip(chr(92))}"'), []
        except json.JSONDecodeError:
            return match.group(1), []
    if isinstance(data, dict) and "name" in data:
        args = data.get("arguments")
        call = ToolCall(
            name=str(data["name"]),
            args=args if isinstance(args, dict) else {},
            id=f"call_{uuid.uuid4().hex[:16]}",
        )
        return "", [call]
    if isinstance(data, dict) and "answer" in data:
        return str(data["answer"]), []
    return text, []
