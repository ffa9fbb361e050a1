"""The llama.cpp chat model: a LangChain ``BaseChatModel`` over a shared :class:`.Runtime`.

* Prompts are rendered with the GGUF's own chat template (the same ``Jinja2ChatFormatter``
  that ``Llama.create_chat_completion`` uses) so that the token ids are known here: that gives
  exact usage counts, next-token probabilities (:meth:`LlamaCppChatModel.yes_probability`) and
  prefix reuse (:mod:`.prefix_cache`).
* :meth:`LlamaCppChatModel.sample` draws m answers to one prompt with the prompt evaluated
  once (each later sample re-evaluates a single token) and a distinct seed per sample.
* :meth:`LlamaCppChatModel.with_structured_output` decodes under a grammar made from the JSON
  schema, so the reply always parses; :meth:`LlamaCppChatModel.bind_tools` decodes a tool
  call (or a plain answer) the same way (:mod:`.tools`), which is what LangGraph's
  ``create_react_agent`` needs. Both go through the same prompt rendering and prefix cache.
  A greedy reply under a grammar asks the grammar about the picked token first and filters the
  whole vocabulary only when it is refused (:mod:`.grammar`): the same reply, 19 instead of
  44 ms a token on MER prompts.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InputError
from ..schemas import json_schema_of
from .grammar import GrammarCheckedGreedy
from .messages import MessagesInput, template_dicts, to_messages
from .runtime import Runtime, RuntimeKey, get_runtime, is_loaded, runtime_key
from .tools import grammar_text, read_tool_reply, tool_choice_schema, tool_specs, tools_instruction


class LlamaCppChatModel(BaseChatModel):
    """A local GGUF chat model run in-process by llama.cpp (lazy, shared, lock-guarded).

    Per-call overrides (``invoke(..., temperature=0.7, seed=3)``, or ``.bind(...)``):
    ``temperature``, ``top_p``, ``seed``, ``stop``, ``max_tokens``; ``json_schema`` (a JSON
    schema dict: decode under its grammar), ``grammar`` (a GBNF text: a plain-text reply
    decoded under it) and ``tools`` / ``tool_choice`` (set by :meth:`bind_tools`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str
    n_ctx: int = Field(4096, ge=64)
    n_threads: int | None = Field(
        None,
        description="None = follow the free cores: before each call the runtime uses the "
        "available cores minus those other processes kept busy since its previous call (no "
        "reload). llama.cpp threads spin-wait, so a thread on a busy core slows all of them.",
    )
    temperature: float = Field(0.0, ge=0.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    seed: int = 0
    max_tokens: int = Field(256, ge=1)
    stop: list[str] | None = None
    prefix_cache_mb: int = Field(
        256, ge=0, description="RAM for saved KV states of alternating prefixes; 0 disables."
    )
    prefix_cache_min_tokens: int = Field(
        256, ge=1, description="Only prompts at least this long are worth saving."
    )

    # ---------------------------------------------------------------- LangChain plumbing

    @property
    def _llm_type(self) -> str:
        return "llamacpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }

    @property
    def model_name(self) -> str:
        return Path(self.model_path).name

    @property
    def _key(self) -> RuntimeKey:
        return runtime_key(self.model_path, self.n_ctx, self.n_threads)

    @property
    def is_loaded(self) -> bool:
        """Whether this model's weights are loaded in this process (shared across instances)."""
        return is_loaded(self._key)

    def _runtime(self) -> Runtime:
        runtime = get_runtime(self._key)
        runtime.states.capacity_bytes = self.prefix_cache_mb * 1024 * 1024
        return runtime

    def _options(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        stops = [*(self.stop or []), *(stop or [])]
        extra = kwargs.get("stop")
        if extra:
            stops.extend([extra] if isinstance(extra, str) else extra)
        seed = kwargs.get("seed")
        temperature = kwargs.get("temperature")
        top_p = kwargs.get("top_p")
        max_tokens = kwargs.get("max_tokens")
        return {
            "temperature": float(self.temperature if temperature is None else temperature),
            "top_p": float(self.top_p if top_p is None else top_p),
            "seed": int(self.seed if seed is None else seed),
            "max_tokens": int(self.max_tokens if max_tokens is None else max_tokens),
            "stop": stops,
        }

    # ---------------------------------------------------------------- prompt handling

    def _render(self, runtime: Runtime, messages: Sequence[BaseMessage]) -> tuple[list[int], Any]:
        # Roles are plain strings (a ChatMessage may carry any role), not the literal roles of
        # llama-cpp-python's request TypedDicts; the template only reads role and content.
        result = runtime.formatter(messages=template_dicts(messages))  # type: ignore[arg-type]
        tokens = runtime.llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
        if len(tokens) >= self.n_ctx:
            raise InputError(
                f"the prompt has {len(tokens)} tokens but the context window (models.n_ctx) "
                f"is {self.n_ctx}; shorten the prompt or raise models.n_ctx"
            )
        return tokens, result

    def _completion(
        self,
        runtime: Runtime,
        tokens: list[int],
        formatted: Any,
        opts: dict[str, Any],
        *,
        stream: bool,
        grammar: str | None = None,
    ) -> tuple[Any, int]:
        """Prime the KV cache, then run llama.cpp (under ``grammar``, a GBNF text, when given);
        returns (result or chunk iterator, reused)."""
        stops = [*opts["stop"]]
        if formatted.stop:
            stops.extend([formatted.stop] if isinstance(formatted.stop, str) else formatted.stop)
        max_tokens = min(opts["max_tokens"], self.n_ctx - len(tokens))
        reused = runtime.prime(tokens)
        constraint: dict[str, Any] = {}
        if grammar is not None and opts["temperature"] == 0.0:
            from llama_cpp import LogitsProcessorList

            check = GrammarCheckedGreedy(runtime.llama, grammar, len(tokens))
            constraint["logits_processor"] = LogitsProcessorList([check])
        elif grammar is not None:
            from llama_cpp.llama_grammar import LlamaGrammar

            constraint["grammar"] = LlamaGrammar.from_string(grammar, verbose=False)
        result = runtime.llama.create_completion(
            prompt=tokens,
            max_tokens=max_tokens,
            temperature=opts["temperature"],
            top_p=opts["top_p"],
            seed=opts["seed"],
            stop=stops,
            stopping_criteria=formatted.stopping_criteria,
            repeat_penalty=1.0,
            stream=stream,
            **constraint,
        )
        return result, reused

    @staticmethod
    def _decoding(
        messages: list[BaseMessage], kwargs: dict[str, Any]
    ) -> tuple[list[BaseMessage], dict[str, Any] | None, bool]:
        """(messages, JSON schema to decode under or None, whether the reply is a tool
        choice) for a call's ``json_schema`` / ``tools`` / ``tool_choice`` arguments. With
        tools, the system prompt lists them (:func:`.tools.tools_instruction`)."""
        tools = kwargs.get("tools")
        if tools:
            specs = tool_specs(tools)
            choice = kwargs.get("tool_choice")
            schema = tool_choice_schema(specs, choice)
            if schema is None:
                return messages, None, False
            instruction = tools_instruction(specs, choice)
            if messages and isinstance(messages[0], SystemMessage):
                first = messages[0]
                system = SystemMessage(content=f"{first.text}\n\n{instruction}")
                return [system, *messages[1:]], schema, True
            return [SystemMessage(content=instruction), *messages], schema, True
        schema = kwargs.get("json_schema")
        return messages, (dict(schema) if schema else None), False

    # ---------------------------------------------------------------- generation

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        opts = self._options(stop, kwargs)
        messages, schema, tool_reply = self._decoding(messages, kwargs)
        grammar = grammar_text(schema) if schema is not None else kwargs.get("grammar")
        runtime = self._runtime()
        with runtime.lock:
            tokens, formatted = self._render(runtime, messages)
            result, reused = self._completion(
                runtime, tokens, formatted, opts, stream=False, grammar=grammar
            )
            runtime.maybe_save(len(tokens), reused, self.prefix_cache_min_tokens)
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        n_in = int(usage.get("prompt_tokens", len(tokens)))
        n_out = int(usage.get("completion_tokens", 0))
        content, calls = read_tool_reply(choice["text"]) if tool_reply else (choice["text"], [])
        message = AIMessage(
            content=content,
            tool_calls=calls,
            usage_metadata=UsageMetadata(
                input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out
            ),
            response_metadata={
                "model_name": self.model_name,
                "finish_reason": choice.get("finish_reason"),
            },
        )
        return ChatResult(
            generations=[
                ChatGeneration(
                    message=message, generation_info={"finish_reason": choice.get("finish_reason")}
                )
            ]
        )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        if kwargs.get("tools") or kwargs.get("json_schema"):
            yield from self._stream_whole(messages, stop, run_manager, **kwargs)
            return
        opts = self._options(stop, kwargs)
        grammar = kwargs.get("grammar")
        runtime = self._runtime()
        # A plain Lock (not RLock): LangChain's default astream advances this generator from
        # different executor threads, and a Lock may be released by another thread.
        with runtime.lock:
            tokens, formatted = self._render(runtime, messages)
            finish_reason = None
            pieces: list[str] = []
            chunks, reused = self._completion(
                runtime, tokens, formatted, opts, stream=True, grammar=grammar
            )
            with contextlib.closing(chunks):
                for part in chunks:
                    choice = part["choices"][0]
                    finish_reason = choice.get("finish_reason") or finish_reason
                    text = choice.get("text") or ""
                    if not text:
                        continue
                    pieces.append(text)
                    chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
                    if run_manager is not None:
                        run_manager.on_llm_new_token(text, chunk=chunk)
                    yield chunk
            runtime.maybe_save(len(tokens), reused, self.prefix_cache_min_tokens)
            text = "".join(pieces)
            n_out = len(runtime.llama.tokenize(text.encode("utf-8"), add_bos=False)) if text else 0
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                usage_metadata=UsageMetadata(
                    input_tokens=len(tokens), output_tokens=n_out, total_tokens=len(tokens) + n_out
                ),
                response_metadata={"model_name": self.model_name, "finish_reason": finish_reason},
                chunk_position="last",
            ),
            generation_info={"finish_reason": finish_reason},
        )

    def _stream_whole(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: CallbackManagerForLLMRun | None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """A decoded reply (JSON schema, tool choice) streamed as one chunk: its text is only
        meaningful once the whole object is there."""
        message = self._generate(messages, stop, run_manager, **kwargs).generations[0].message
        assert isinstance(message, AIMessage)
        tool_chunks = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c.get("id"), "index": i}
            for i, c in enumerate(message.tool_calls)
        ]
        chunk = ChatGenerationChunk(
            message=AIMessageChunk(
                content=message.content,
                tool_call_chunks=tool_chunks,
                usage_metadata=message.usage_metadata,
                response_metadata=message.response_metadata,
                chunk_position="last",
            )
        )
        if run_manager is not None and message.text:
            run_manager.on_llm_new_token(message.text, chunk=chunk)
        yield chunk

    # ---------------------------------------------------------------- structured output, tools

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """A runnable that answers as ``schema`` (a pydantic model class, a JSON schema dict,
        a TypedDict or a function), decoded under the schema's grammar: the reply is always
        valid JSON of the schema's shape (a pydantic class's own validators still apply).
        ``method`` may be given ("json_schema", the only one) and is otherwise ignored."""
        method = kwargs.pop("method", "json_schema")
        kwargs.pop("strict", None)
        if kwargs:
            raise ValueError(f"unsupported arguments {sorted(kwargs)}")
        if method not in ("json_schema", "json_mode", "function_calling"):
            raise ValueError(f"unknown method {method!r}")
        json_schema = json_schema_of(schema)
        llm = self.bind(
            json_schema=json_schema,
            ls_structured_output_format={"kwargs": {"method": "json_schema"}, "schema": schema},
        )
        parser: Runnable[Any, Any]
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            parser = PydanticOutputParser(pydantic_object=schema)
        else:
            parser = JsonOutputParser()
        if not include_raw:
            return llm | parser
        parse: Callable[[Any], Any] = itemgetter("raw")
        with_parsed = RunnablePassthrough.assign(
            parsed=parse | parser, parsing_error=lambda _: None
        ).with_fallbacks(
            [RunnablePassthrough.assign(parsed=lambda _: None)], exception_key="parsing_error"
        )
        return RunnableMap(raw=llm) | with_parsed

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """This model with ``tools`` (LangChain tools, functions, pydantic models or OpenAI
        tool dicts): each reply is decoded under a grammar as either a call of one tool with
        arguments matching its schema (``AIMessage.tool_calls``) or, when ``tool_choice``
        allows (None / "auto"), a plain answer. ``tool_choice``: "any" / "required" = some
        tool, a tool name = that tool, "none" = no tool."""
        tool_specs(tools)  # fail here on a tool that cannot be converted
        return self.bind(tools=list(tools), tool_choice=tool_choice, **kwargs)

    # ---------------------------------------------------------------- m samples

    def sample(
        self,
        messages: MessagesInput,
        m: int,
        *,
        temperature: float,
        top_p: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> list[str]:
        """m sampled answers to one prompt; the prompt is evaluated once.

        Sample i uses seed ``seed + i`` (``seed`` defaults to the model's), so the result is
        reproducible and the samples differ. Each later sample re-evaluates one prompt token
        (llama.cpp reuses the KV cache of the shared prompt).
        """
        if m < 1:
            raise ValueError("m must be at least 1")
        msgs = to_messages(messages)
        opts = self._options(
            stop,
            {"temperature": temperature, "top_p": top_p, "seed": seed, "max_tokens": max_tokens},
        )
        runtime = self._runtime()
        answers: list[str] = []
        with runtime.lock:
            tokens, formatted = self._render(runtime, msgs)
            first_reused = 0
            for i in range(m):
                result, reused = self._completion(
                    runtime, tokens, formatted, {**opts, "seed": opts["seed"] + i}, stream=False
                )
                first_reused = reused if i == 0 else first_reused
                answers.append(result["choices"][0]["text"])
            runtime.maybe_save(len(tokens), first_reused, self.prefix_cache_min_tokens)
        return answers

    # ---------------------------------------------------------------- next-token probabilities

    def _next_token_logprobs(self, messages: MessagesInput) -> np.ndarray:
        """log P(next token) over the vocabulary after the rendered prompt (float64)."""
        msgs = to_messages(messages)
        runtime = self._runtime()
        with runtime.lock:
            tokens, _ = self._render(runtime, msgs)
            logits, reused = runtime.last_logits(tokens)
            runtime.maybe_save(len(tokens), reused, self.prefix_cache_min_tokens)
        logits -= logits.max()
        return logits - math.log(float(np.exp(logits).sum()))

    def _single_token_ids(self, words: Sequence[str]) -> set[int]:
        llama = self._runtime().llama
        ids: set[int] = set()
        for word in words:
            for variant in {word, word.lower(), word.capitalize(), word.upper()}:
                for text in (variant, " " + variant):
                    toks = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
                    if len(toks) == 1:
                        ids.add(toks[0])
        return ids

    def top_next_tokens(self, messages: MessagesInput, k: int = 10) -> list[tuple[str, float]]:
        """The k most likely first tokens of the answer with their log-probabilities."""
        logprobs = self._next_token_logprobs(messages)
        llama = self._runtime().llama
        top = np.argsort(-logprobs)[:k]
        return [
            (
                llama.detokenize([int(t)], special=True).decode("utf-8", errors="replace"),
                float(logprobs[t]),
            )
            for t in top
        ]

    def yes_probability(
        self,
        messages: MessagesInput,
        *,
        yes: Sequence[str] = ("yes",),
        no: Sequence[str] = ("no",),
        normalize: bool = True,
    ) -> float:
        """P(the answer starts with "yes"), from one forward pass over the prompt.

        Case variants and leading-space variants of each word count (single-token spellings
        only). With ``normalize`` the result is P(yes) / (P(yes) + P(no)) (0.5 when the model
        puts no mass on either); otherwise the raw probability mass of the "yes" tokens.
        """
        logprobs = self._next_token_logprobs(messages)
        probs = np.exp(logprobs)
        yes_ids = sorted(self._single_token_ids(yes))
        p_yes = float(probs[yes_ids].sum()) if yes_ids else 0.0
        if not normalize:
            return p_yes
        no_ids = sorted(self._single_token_ids(no) - set(yes_ids))
        p_no = float(probs[no_ids].sum()) if no_ids else 0.0
        total = p_yes + p_no
        return p_yes / total if total > 0.0 else 0.5

    def prefix_cache_stats(self) -> dict[str, int]:
        """Counters of this runtime: calls, KV-state saves and restores, cached bytes."""
        runtime = self._runtime()
        with runtime.lock:
            return {
                **runtime.stats,
                "entries": len(runtime.states.entries),
                "bytes": runtime.states.size_bytes,
            }
