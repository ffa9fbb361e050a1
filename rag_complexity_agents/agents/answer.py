"""Answers: a sub-question's answer from its evidence, the Meta Evidence Reasoner, and the
choice of the run's final answer."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config.pipelines import NAR_STRATEGIES
from ..models.calls import ChatReply
from ..models.schemas import QuotedAnswer, ShortAnswer
from ..models.structured import record_format_failure
from ..retrieval.mer import DEFAULT_EXEMPLARS, MetaEvidenceReasoner, collect_evidence
from ..text import as_text, cover_em, normalize_answer
from ..types import ScoredDoc
from .abstain import (
    NOT_FOUND,
    SUPPORT_SHARE,
    AbstainMode,
    abstention,
    on_topic,
    passage,
    support,
)
from .context import AgentContext
from .kinds import KIND_NAMES, Kind, asks_for, not_of_kind
from .parsers import names_passage
from .prompts import no_retrieval
from .prompts import single_step as single_step_prompt
from .retrieve import UNANSWERED
from .single_step import extract_short_answer, quoted_answer
from .state import (
    AgentState,
    DocRecord,
    doc_from_record,
    doc_record,
    merge_steps,
    without_text,
)
from .steps import Update, copied_exemplar, costs, reasoning_path, step_docs, steps_of, sub_question
from .structured import ask_step

UNKNOWN_ANSWER = "unknown"
YES_NO = frozenset({"yes", "no"})
MER_SHORT_WORDS = 8
QUOTE_TOKENS = 64
"""Tokens added to ``agents.answer_max_tokens`` for an answer that quotes its evidence."""
_COPULA = re.compile(r"\b(?:is|was|are|were)\s+", re.IGNORECASE)
_IDENTITY = frozenset({"who", "what", "is", "was", "are", "were"})
"""The words of an identity question ("Who is X?") besides the name it asks about."""


def add_note(update: Update, state: Mapping[str, Any], note: str) -> None:
    """Append ``note`` to the run's notes in ``update`` (those of ``state`` when ``update``
    has none yet)."""
    update["notes"] = [*(update.get("notes") or state.get("notes") or []), note]


def _step_query(state: AgentState, step: int) -> str:
    """The query ``step`` retrieved and is answered for when it differs from its sub-question
    (e.g. with the bridge entity added); '' otherwise."""
    return next((s.get("query", "") for s in steps_of(state) if s.get("index") == step), "")


def shown_docs(ctx: AgentContext, state: AgentState, step: int) -> list[DocRecord]:
    """The passages the step's question is answered from: a sub-question's top-l
    (:attr:`AgentContext.sub_passages`, the paper's l); the question itself (single-step, or
    a loop that looks up the whole question) gets the top-k (``answer.passages``). With
    ``agents.fresh_evidence`` a later step's passages that no earlier step was answered from
    come first."""
    whole = sub_question(state, step).strip() == state["question"].strip()
    top = ctx.config.answer.passages if whole else ctx.sub_passages
    docs = step_docs(state, step)
    if ctx.agents.fresh_evidence and step > 0:
        read = {d.get("id") for earlier in range(step) for d in shown_docs(ctx, state, earlier)}
        docs = sorted(docs, key=lambda d: d.get("id") in read)  # stable: ranks kept
    return docs[:top]


def echoes_question(answer: str, query: str) -> bool:
    """Whether ``answer`` only repeats what ``query`` names (it occurs in it as a whole run of
    tokens), for a query that offers no choice ("A or B") and asks about more than the name
    itself ("Who is Avery Brundage?" is answered by the name); never for yes / no /
    unknown."""
    norm = normalize_answer(answer)
    if _says_nothing(norm):
        return False
    asked = normalize_answer(query).split()
    if "or" in asked or set(asked) - _IDENTITY <= set(norm.split()):
        return False
    return bool(cover_em(query, answer))


def echoes_last_query(answer: str, state: AgentState) -> bool:
    """Whether ``answer`` only repeats what the query of the last answered step names (e.g.
    the bridge entity: "Henry Baring" for "Who is the father of Henry Baring?") while that
    step's own answer does not: MER then answered the chain's middle, not its end."""
    steps = [s for s in steps_of(state) if s.get("answer")]
    if not steps:
        return False
    last = max(steps, key=lambda s: int(s.get("index", 0)))
    query = step_query(state, int(last.get("index", 0)))
    own = str(last.get("answer") or "")
    return (
        echoes_question(answer, query)
        and normalize_answer(own) not in UNANSWERED
        and not echoes_question(own, query)
    )


def repeats_the_chain(answer: str, state: AgentState) -> bool:
    """Whether ``answer``, the last step's, only repeats what that step's query names
    (:func:`echoes_question`: "What recognition did Philip Seymour Hoffman receive?" →
    "Philip Seymour Hoffman") or an earlier step's answer: the chain did not get past its
    bridge."""
    steps = sorted(steps_of(state), key=lambda s: int(s.get("index", 0)))
    if not steps:
        return False
    last = int(steps[-1].get("index", 0))
    norm = normalize_answer(answer)
    earlier = {normalize_answer(str(s.get("answer") or "")) for s in steps[:-1]}
    return echoes_question(answer, step_query(state, last)) or (bool(norm) and norm in earlier)


def supported(answer: str, state: AgentState, ctx: AgentContext) -> bool:
    """Whether the evidence supports ``answer``: it occurs as a whole run of tokens in the
    title or text of a passage some step was answered from (:func:`shown_docs`). A yes/no
    answer cannot be found in a passage and counts as supported; an empty one does not."""
    norm = normalize_answer(answer)
    if not norm:
        return False
    if norm in YES_NO:
        return True
    return any(
        held_by(answer, shown_docs(ctx, state, int(step.get("index", 0))))
        for step in steps_of(state)
    )


def held_by(answer: str, docs: Sequence[DocRecord]) -> bool:
    """Whether ``answer`` occurs as a whole run of tokens in the title or text of a passage."""
    return any(cover_em(f"{d.get('title') or ''} {d.get('text') or ''}", answer) for d in docs)


def step_query(state: AgentState, step: int) -> str:
    """What ``step`` is answered for: its ``query`` when it has one (e.g. with the bridge
    entity added), else its sub-question, else the pending query or the question."""
    return (
        _step_query(state, step)
        or sub_question(state, step)
        or state.get("pending_query", state["question"])
    )


def answer_messages(
    ctx: AgentContext,
    query: str,
    docs: Sequence[ScoredDoc],
    *,
    ruled_out: str = "",
    why: str = single_step_prompt.ECHO,
    quote: bool = False,
) -> list[tuple[str, str]]:
    """The prompt that answers ``query`` from ``docs`` (the single-step prompt; with
    ``quote``, the one that copies its evidence first; ``ruled_out``: an earlier answer to
    avoid, for the reason ``why``), or from the model alone when there are none (the
    no-retrieval prompt)."""
    if not docs:
        return [("system", no_retrieval.SYSTEM), ("human", no_retrieval.user_message(query))]
    message = single_step_prompt.user_message(
        query, docs, max_chars=ctx.config.answer.passage_chars, ruled_out=ruled_out, why=why
    )
    system = single_step_prompt.QUOTE_SYSTEM if quote else single_step_prompt.SYSTEM
    return [("system", system), ("human", message)]


def answer_from_evidence(
    ctx: AgentContext, state: AgentState, step: int, *, quote: bool = False, reread: bool = False
) -> tuple[ChatReply, str, Update]:
    """(reply, short answer, state update with the calls' costs) for the sub-question of
    ``step`` (its ``query`` when it has one, e.g. with the bridge entity added) from the
    passages of :func:`shown_docs`: the single-step prompt, or the no-retrieval prompt without
    evidence; a :class:`~.structured.ShortAnswer` when the model gives structured output.
    With ``quote`` (and passages) the model copies the words that answer first
    (:data:`QUOTE_TOKENS` more tokens; a :class:`~.structured.QuotedAnswer`); a quoting reply
    that ends before its answer (a long quote cut at the token budget) is asked again with
    the plain prompt. With ``agents.reject_echo``, an answer that only repeats what the
    sub-question names (:func:`echoes_question`) is asked for once more, quoting the evidence
    first and with that answer ruled out; an echo again becomes 'unknown'. With
    ``agents.check_kind``, so is an answer that plainly is not of the kind the sub-question
    asks for (:func:`~.kinds.not_of_kind`: a date for "Where ...?"). With ``reread``
    (plan-and-execute's ``agents.reread_unsupported``), an answer that no passage about the
    sub-question holds (:func:`~.abstain.support` at most :data:`~.abstain.SUPPORT_SHARE`,
    e.g. a name copied from the one off-topic passage) is asked for again from the passages
    on the sub-question only (:func:`~.abstain.on_topic`), and that answer is kept when one
    of them holds it."""
    sub = step_query(state, step)
    records = shown_docs(ctx, state, step)
    docs = [doc_from_record(d) for d in records]
    quote = quote and bool(docs)

    def ask(
        counted: AgentState,
        ruled_out: str = "",
        why: str = single_step_prompt.ECHO,
        quoting: bool = quote,
        shown: Sequence[ScoredDoc] = docs,
    ) -> tuple[ChatReply, str, Update]:
        obj, reply, update = ask_step(
            ctx,
            counted,
            answer_messages(ctx, sub, shown, ruled_out=ruled_out, why=why, quote=quoting),
            kind="sub_answer",
            max_tokens=ctx.agents.answer_max_tokens + (QUOTE_TOKENS if quoting else 0),
            stop=["\n\n"],
            schema=QuotedAnswer if quoting else ShortAnswer,
        )
        if obj is not None:
            answer = extract_short_answer(str(getattr(obj, "answer", "")))
        else:
            answer = (quoted_answer if quoting else extract_short_answer)(reply.text)
        if not answer and quoting:  # the quote used up its tokens (or stopped) before 'Answer:'
            after: Any = {**counted, **update}
            reply, answer, again = ask(after, ruled_out, why, quoting=False, shown=shown)
            update.update(again)
            add_note(
                update,
                counted,
                f"step {step}: the quoting reply gave no answer; asked without quoting",
            )
            return reply, answer, update
        if not answer:
            record_format_failure("sub_answer")
        return reply, answer, update

    reply, answer, update = ask(state)
    if names_passage(answer):
        add_note(
            update,
            state,
            f"step {step}: the sub-answer {answer!r} names a passage, not an answer; "
            f"taken as {UNKNOWN_ANSWER!r}",
        )
        answer = UNKNOWN_ANSWER
    kind = asks_for(sub)
    checks: list[tuple[bool, Callable[[str], bool], str, str]] = [
        (
            ctx.agents.reject_echo,
            lambda a: echoes_question(a, sub),
            single_step_prompt.ECHO,
            "repeats its query",
        ),
        (
            ctx.agents.check_kind,
            lambda a: _off_kind(a, kind),
            f"the question asks for {KIND_NAMES[kind]}." if kind else "",
            f"is not {KIND_NAMES[kind]}" if kind else "",
        ),
    ]
    for on, wrong, why, what in checks:
        if on and docs and wrong(answer):
            first = answer
            counted: Any = {**state, **update}  # the state after the earlier calls' costs
            reply, answer, again = ask(counted, ruled_out=first, why=why, quoting=True)
            update.update(again)
            if wrong(answer):
                answer = UNKNOWN_ANSWER
            add_note(
                update,
                state,
                f"step {step}: the sub-answer {first!r} {what}; asked again, quoting: {answer!r}",
            )
            break
    if reread and not _says_nothing(normalize_answer(answer)):
        read = [passage(d) for d in records]
        topical = [i for i, p in enumerate(read) if on_topic(sub, p)]
        if 0 < len(topical) < len(read) and support(answer, [sub], read) <= SUPPORT_SHARE:
            first = answer
            counted = {**state, **update}
            reply, second, more = ask(counted, shown=[docs[i] for i in topical])
            update.update(more)
            kept = support(second, [sub], [read[i] for i in topical]) > SUPPORT_SHARE
            answer = second if kept else first
            add_note(
                update,
                state,
                f"step {step}: no passage on its query holds the sub-answer {first!r}; read "
                f"again from passages {[i + 1 for i in topical]}: {second!r}, "
                + ("kept" if kept else "not held either, the first kept"),
            )
    return reply, answer, update


def _says_nothing(norm: str) -> bool:
    """Whether a normalised answer is empty, 'unknown' or yes / no: no echo, no kind."""
    return not norm or norm in YES_NO or norm in UNANSWERED


def _off_kind(answer: str, kind: Kind | None) -> bool:
    """:func:`~.kinds.not_of_kind`, never for 'unknown' or yes / no."""
    return not _says_nothing(normalize_answer(answer)) and not_of_kind(answer, kind)


def answer_sub(
    state: AgentState, ctx: AgentContext, *, quote: bool = False, reread: bool = False
) -> Update:
    """Answer the pending step's sub-question from its accepted evidence (Self-Ask); with
    ``quote``, quoting the evidence first, and with ``reread``, reading an answer no passage
    on the question holds again (:func:`answer_from_evidence`)."""
    step = int(state.get("pending_step", 0))
    _, answer, update = answer_from_evidence(ctx, state, step, quote=quote, reread=reread)
    steps = merge_steps(steps_of(state), [{"index": step, "answer": answer}])
    return {"steps": steps, **update}


def mer_node(state: AgentState, ctx: AgentContext) -> Update:
    """Meta Evidence Reasoner: reasoning path + top-l evidence across steps → answer."""
    question = state["question"]
    indices = sorted({int(r.get("step", 0)) for r in state.get("retrievals") or []})
    rankings = [[doc_from_record(d) for d in step_docs(state, i)] for i in indices]
    rankings = [r for r in rankings if r]
    score = ctx.parts.scorer.score if rankings and ctx.strategy in NAR_STRATEGIES else None
    evidence = (
        collect_evidence(question, rankings, l=ctx.config.mer.l, score=score) if rankings else []
    )
    path = reasoning_path(state)
    reasoner = MetaEvidenceReasoner(
        ctx.chat,
        exemplars=DEFAULT_EXEMPLARS[: ctx.agents.mer_exemplars],
        max_tokens=ctx.config.mer.max_tokens,
        max_evidence_chars=ctx.config.mer.max_evidence_chars,
        structured=ctx.structured,
    )
    extracted, output, replies = reasoner.reply(question, path, evidence)
    answer, method = extracted.answer, str(extracted.method)
    if copied_exemplar(answer, {e.answer for e in DEFAULT_EXEMPLARS}, state):
        answer, method = "", "copied_exemplar"
    return {
        "mer": {
            "answer": answer,
            "extraction": method,
            "echo": ctx.agents.reject_echo and echoes_last_query(answer, state),
            "off_kind": ctx.agents.check_kind and _off_kind(answer, asks_for(question)),
            "output": output,
            "reasoning_path": [list(p) for p in path],
            "evidence": without_text([doc_record(d, max_chars=ctx.keep_chars) for d in evidence]),
            "l": ctx.config.mer.l,
        },
        **costs(
            state,
            ChatReply(
                output,
                sum(r.input_tokens for r in replies),
                sum(r.output_tokens for r in replies),
            ),
            llm_calls=len(replies) - 1,
        ),
    }


def shorten_answer(text: str) -> str:
    """The short answer at the end of a sentence such as 'Based on the evidence, the
    country where X was born is Japan.': what follows the sentence's last is / was / are /
    were, when it holds no ',', ';' or ':' ('' when there is no such closing clause). Reads
    the first :data:`~.parsers.MAX_CHARS` characters, in linear time."""
    text = as_text(text).strip()
    last = re.split(r"(?<=[.!?])\s+", text)[-1][-2000:] if text else ""
    copulas = list(_COPULA.finditer(last))
    if not copulas:
        return ""
    rest = last[copulas[-1].end() :].rstrip()
    if any(mark in rest for mark in ",;:"):
        return ""
    rest = rest[:-1] if rest.endswith((".", "!")) else rest
    answer = rest.strip().strip("\"'*").strip()
    return answer if 0 < len(answer.split()) <= MER_SHORT_WORDS else ""


def final_answer(state: Mapping[str, Any], abstain: AbstainMode = "exemplar") -> tuple[str, str]:
    """(answer, where it came from): :func:`chosen_answer`, or "not found" when
    :func:`.abstain.abstention` (with ``abstain``, the run's ``agents.abstain``) rejects it."""
    answer, source = chosen_answer(state)
    why = abstention(answer, state, abstain)
    if why is not None:
        return NOT_FOUND, f"abstained: {source} gave {why}"
    return answer, source


def chosen_answer(state: Mapping[str, Any]) -> tuple[str, str]:
    """(answer, where it came from), in this order: the loop's answer when MER's is a
    sentence that contains it (the two agree, and MER was asked for a short answer) or, with
    ``agents.reject_echo``, only repeats what the last step's query names
    (:func:`echoes_last_query`) or, with ``agents.check_kind``, is not of the kind the question
    asks for while the loop's is (:func:`~.kinds.not_of_kind`); MER's answer when it followed
    the format or is short; the closing clause of a long unformatted MER reply; the loop's
    answer; the long MER reply; the last intermediate answer; 'unknown'."""
    mer = state.get("mer") or {}
    mer_answer = str(mer.get("answer") or "")
    loop_answer = str(state.get("loop_answer") or "")
    loop_answered = loop_answer not in ("", UNKNOWN_ANSWER, NOT_FOUND)
    if (
        loop_answered
        and len(mer_answer.split()) > MER_SHORT_WORDS
        and cover_em(mer_answer, [loop_answer])
    ):
        return loop_answer, "loop (MER's sentence agrees)"
    if loop_answered and mer.get("echo"):
        return loop_answer, "loop (MER's answer repeats the last step's query)"
    if (
        loop_answered
        and mer.get("off_kind")
        and not _off_kind(loop_answer, asks_for(str(state.get("question") or "")))
    ):
        return loop_answer, "loop (MER's answer is not of the kind the question asks for)"
    if mer_answer:
        if mer.get("extraction") in ("structured", "marker", "answer_is", "answer_line") or (
            len(mer_answer.split()) <= MER_SHORT_WORDS
        ):
            return mer_answer, "mer"
        short = shorten_answer(mer_answer)
        if short:
            return short, "mer (closing clause of an unformatted reply)"
    if loop_answer:
        return loop_answer, str(state.get("loop_source") or "loop")
    if mer_answer:
        return mer_answer, "mer (unformatted)"
    for step in reversed(state.get("steps") or []):
        if step.get("answer"):
            return str(step["answer"]), "last_intermediate"
    return UNKNOWN_ANSWER, "none"
