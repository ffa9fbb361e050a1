"""Plan-and-execute as a LangGraph loop: the chain of simple questions is written first, then
each is retrieved for and answered in order.

::

    start → plan ──► [split] ──► retrieve ⇄ explore / requery ──► answer_sub ──► next ──► …
             ▲ │                                                                   │ plan done
             └─┘ format break (retried once)                                       ▼ / limit
                                                              conclude ──► [mer] ──► finish

``plan`` asks the chat model once for the whole decomposition, in MuSiQue's form: a
numbered list of at most ``agents.max_steps`` simple questions where ``#k`` stands for the
answer of question k ("Who directed Jaws?", "Who is the father of #1?"). ``next`` puts the
answers found so far in place of the ``#k`` (:func:`substitute_answers`) and hands the
question to the retrieval node (plain, NAR or SUNAR, as for every loop); ``answer_sub``
answers it from its top-l passages. When the plan is a chain (every question but the last
is used, as ``#k``, by a later one) the last question's answer is the loop's answer; otherwise
the last question need not be the one that answers the user's (the 1.5B model often asks the
whole question first and its bridge questions after it), so ``conclude`` answers the question
from all the (simple question, answer) pairs found. ``conclude`` also runs when the last
answer is empty or "unknown". A plan whose questions use later answers is run in the order
the uses need (:func:`in_order`). A plan that cannot be read, that cannot be run in any order
because a question refers to its own answer or a missing one ("1. Where did #1 study?"; the
0.5B model writes such plans for about one 2Wiki question in six, and none of them was
answered right), or that copies an exemplar's question the user's does not call for
(:func:`called_for`) is asked for once more with a format reminder, then the question itself
becomes the plan (single-step through the loop). Three checks with no model call follow
(the first two are ``agents.plan_checks``, on; ``benchmarks/plan_checks.py`` measures them). A
plan that has lost what the question is about (a step asks "What is the name of the
airport?", or no step gives any name the question gives) is replaced by the question itself
(:func:`loses_the_subject`), and so is a plan with a step that copies words of a planning
exemplar's own question ("In which city did #1 go public?", :func:`leaks_an_exemplar`). A
step that asks who a named thing is while the question asks
for its husband, father, director ... asks for that relative (:func:`with_relations`). A
plan is cut before a step that builds on a step restating the whole question
(:func:`beyond_the_question`): a one-fact question is then answered in one step, not given
an invented second one.

Two ways of reading a step, both variant rows of the end-to-end benchmark's plan and off by
default: ``agents.bridge_votes`` (a step a later step builds on keeps the answer most of m
answers agree on, :mod:`.votes`) and ``agents.quote_evidence`` (the last or every step copies
the passage words that answer before its answer). ``agents.plan_rules`` (off, a variant row
too) ends the planning prompt with rules against the plan failures seen in traces;
``agents.split_steps`` (off, a variant row) plans once more a step that still chains two hops
(:func:`chained_step`) and puts its chain in the step's place (:func:`splice`).
``agents.tidy_plans`` (off, a variant row) checks a plan before it runs, with no model call
(:func:`named_steps`, :func:`the_question_alone`, :func:`ends_on_the_answer`);
``agents.plan_samples`` (off, a variant row) sets a plan with a visible flaw
(:func:`plan_flaws`) against plans sampled from the same prompt and runs the least flawed;
``agents.one_step_exemplar`` (off, a variant row) shows a one-fact question planned as one
line before the chain exemplars.

Why this loop (not in the SUNAR paper, whose loops decide the next sub-question after each
answer): the small packaged models ask one follow-up and stop, or repeat it, in Self-Ask
(``benchmarks/results/decomposition_dev.md``), while the dataset's own sub-questions answered
this way pay (the ``gold_decomposition`` ceiling of ``benchmarks/results/end_to_end.md``).
Writing the plan up front is one call, and the 1.5B model's plans read like the gold ones.
``agents.stop``, ``agents.bridge`` and the follow-up hint do not apply: the plan fixes the
steps, and the ``#k`` substitution carries the bridge entity.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..models.calls import ChatReply, sample_answers, sampling_calls
from ..models.schemas import ShortAnswer, SubQuestionPlan
from ..text import STOPWORDS, cover_em, normalize_answer
from .answer import QUOTE_TOKENS, answer_messages, answer_sub, held_by, shown_docs, step_query
from .context import AgentContext
from .kinds import asks_for
from .parsers import clean_answer, clean_query, parse_plan
from .prompts import plan_execute as prompt
from .retrieve import UNANSWERED
from .single_step import extract_short_answer, quoted_answer
from .state import AgentState, doc_from_record, merge_steps
from .steps import Update, ask, costs, reasoning_path, same_query, step_limit, steps_of
from .votes import VOTE_TEMPERATURE, vote
from .wiring import Loop, Think, has_answer

LOOP = "plan_execute"
EXAMPLE_QUESTIONS = prompt.exemplar_questions()
_BACKREF = re.compile(r"#(\d+)")


def substitute_answers(question: str, answers: Sequence[str]) -> str:
    """``question`` with every ``#k`` replaced by ``answers[k-1]`` (1-based, as in MuSiQue).

    A reference beyond the answers given is left as it is; ``#12`` is step 12, not step 1
    followed by "2".
    """

    def replace(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return answers[index - 1] if 1 <= index <= len(answers) else match.group(0)

    return _BACKREF.sub(replace, question)


def _known(answer: str) -> bool:
    norm = normalize_answer(answer)
    return bool(norm) and norm not in UNANSWERED


def _copied(questions: Sequence[str], question: str) -> bool:
    """A plan that repeats an exemplar's simple question the user's question does not call
    for (:func:`called_for`)."""
    return any(
        same_query(q, shown) and not called_for(shown, question)
        for q in questions
        for shown in EXAMPLE_QUESTIONS
    )


def called_for(shown: str, question: str) -> bool:
    """Whether the user's ``question`` calls for an exemplar's simple question ``shown``: it
    names every thing ``shown`` names (its capitalised words after the first) and holds at
    least half of its other content words. "In which city was #1 born?" is a right step for
    "Where was the father of X born?"; "Who is the director of the film Jaws?" or "In what
    year did #1 go public?" is a copy in a plan for "Who founded Studio Ghibli?"."""
    asked = set(normalize_answer(question).split())
    first, *rest = shown.split()
    names = {w for word in rest if word[:1].isupper() for w in normalize_answer(word).split()}
    words = set(normalize_answer(f"{first} {' '.join(rest)}").split()) - STOPWORDS - names
    words = {w for w in words if not w.isdigit()}  # "#1" is a reference, not a word
    return names <= asked and 2 * len(words & asked) >= len(words)


def in_order(questions: Sequence[str]) -> list[str] | None:
    """The plan with every question after the questions whose answers it uses, ``#k``
    renumbered ("1. Which county borders the county where #2 was born?", "2. Who sang Hungry
    Eyes?" is run as "Who sang Hungry Eyes?", then "... where #1 was born?"); a plan already
    in order is returned as it is. None when a question uses its own answer, the answer of a
    question the plan does not have, or the uses form a cycle: :func:`substitute_answers`
    could never fill such a ``#k``."""
    needs = [{int(k) for k in _BACKREF.findall(q)} for q in questions]
    numbers = set(range(1, len(questions) + 1))
    if any(number in used or not used <= numbers for number, used in enumerate(needs, 1)):
        return None
    order: list[int] = []
    while len(order) < len(questions):
        ready = [n for n in sorted(numbers - set(order)) if needs[n - 1] <= set(order)]
        if not ready:
            return None
        order.append(ready[0])
    renumber = {old: new for new, old in enumerate(order, start=1)}
    return [
        _BACKREF.sub(lambda m: f"#{renumber[int(m.group(1))]}", questions[old - 1]) for old in order
    ]


def beyond_the_question(questions: Sequence[str], question: str) -> list[str]:
    """The plan cut before its first step that builds on the whole question's answer: when
    step k restates the user's question, a later step that uses ``#k`` ("Who designed the
    Statue of Liberty?" then "In which year was #1 designed?") asks something the user did
    not, and so may every step after it."""
    whole = {n for n, q in enumerate(questions, start=1) if same_query(q, question)}
    for number, planned in enumerate(questions, start=1):
        if whole & {int(k) for k in _BACKREF.findall(planned)}:
            return list(questions[: number - 1])
    return list(questions)


def restates(questions: Sequence[str], question: str) -> bool:
    """Whether a plan of more than one step has a step that is the user's question itself."""
    return len(questions) > 1 and any(same_query(q, question) for q in questions)


def the_question_alone(questions: Sequence[str], question: str) -> list[str]:
    """The step that restates the user's question, alone, for a plan that has one beside
    other steps (:func:`restates`): the model wrote the question as a lookup of its own and
    then steps the user did not ask for ("Which NFL team represented the AFC at Super Bowl
    50?" then "What was the name of the AFC team?"; "Who did the Broncos beat in the Super
    Bowl?" after "Which team did the Broncos play in the Super Bowl?"), or a chain out of
    order after it."""
    if not restates(questions, question):
        return list(questions)
    return [next(q for q in questions if same_query(q, question))]


_NAME = r"(?:the\s+)?[A-Z][\w'.&-]*(?:\s+(?:[A-Z0-9][\w'.&-]*|of|de|la|the|and|upon|on))*"
_PROPERTY = (
    r"(?:nationality|citizenship|ethnicity|age|gender|sex|height|weight|size|length|area|"
    r"population|colou?r|year|date|day|month|century|decade|era|period|time|language|religion|"
    r"genre|occupation|profession|job|position|role|rank|title|status|party|sport|type|kind|"
    r"sort|number|price|value)"
)
_WHAT_IS = re.compile(
    rf"^(?i:who|what|which)(?:\s+(?!{_PROPERTY}\b)[a-z]+)?\s+(?:is|was|are|were)"
    rf"\s+(?P<name>{_NAME})\s*\??$"
)
"""A step that asks who or what a named thing is ("Which university is Harvard?", "What
river is the Magdalena River?", "Who is Hayao Miyazaki?"): its answer is, at best, the name.
A step that asks for a property of the thing ("What nationality is Scott Derrickson?", "What
genre is Nirvana?") asks for a fact, not the name (:data:`_PROPERTY`)."""


def named_steps(questions: Sequence[str], question: str) -> list[str]:
    """The plan without its steps that only ask who or what a thing the user's question names
    is (:data:`_WHAT_IS`, no ``#k``, the name in ``question``): a later ``#k`` of such a step
    becomes the name itself ("Which university is Harvard?", "In what year was #1 founded?"
    is run as "In what year was Harvard founded?"). Such a step costs a call, and its answer
    is often a description ("an American university") that spoils the next step. A step
    that is the user's question ("Who is Edmund on Days of Our Lives?") stays, and so does a
    plan that is only such steps, and a step no later step uses or names again: its name
    would be lost ("Who is Scott Derrickson?", "Who is Ed Wood?", "Are they of the same
    nationality?")."""
    names: dict[int, str] = {}
    for number, planned in enumerate(questions, start=1):
        own = _BACKREF.search(planned) or same_query(planned, question)
        found = None if own else _WHAT_IS.match(planned.strip())
        if found and cover_em(question, found["name"]):
            name = re.sub(r"^the\s+", "", found["name"])
            named_again = any(cover_em(q, name) for q in questions[number:])
            if is_bridge(questions, number - 1) or named_again:
                names[number] = name
    if not names or len(names) == len(questions):
        return list(questions)
    kept = [n for n in range(1, len(questions) + 1) if n not in names]
    renumber = {old: new for new, old in enumerate(kept, start=1)}

    def fill(match: re.Match[str]) -> str:
        k = int(match.group(1))
        return names[k] if k in names else f"#{renumber.get(k, k)}"

    return [_BACKREF.sub(fill, questions[n - 1]) for n in kept]


_UNNAMED = re.compile(
    r"^(?i:what|who)\s+(?i:is|was)\s+the\s+name\s+of\s+(?:the|this|that)\b[^#A-Z]*\?$"
)
"""A step that asks the name of a thing it does not name ("What is the name of the airport?")."""


def _words(words: Sequence[str]) -> set[str]:
    """The normalised words of ``words``, a possessive "'s" taken off (2Wiki writes "'S")."""
    return {w for word in words for w in normalize_answer(re.sub(r"['’][sS]$", "", word)).split()}


def _names(text: str) -> set[str]:
    """The words of the names ``text`` gives: capitalised words after its first word, and
    words in quotes."""
    words = [w for w in text.split()[1:] if w[:1].isupper()]
    words += re.findall(r"['\"‘“]([^'\"’”]+)['\"’”]", text)
    return _words(words) - STOPWORDS


def leaks_an_exemplar(questions: Sequence[str], question: str) -> bool:
    """Whether a step of the plan holds words of a planning exemplar's own question
    (:data:`~.prompts.plan_execute.OWN_PHRASES`: "go public", "Dracula") that the user's
    question does not: the step was copied from the exemplar, and nothing the user asked
    can answer it."""
    return any(
        not cover_em(question, own) and any(cover_em(q, own) for q in questions)
        for own in prompt.OWN_PHRASES
    )


def loses_the_subject(questions: Sequence[str], question: str) -> bool:
    """Whether a plan has lost what the user's question is about: a step asks the name of a
    thing it does not name (the 1.5B model plans "What is the name of the airport?" then "In
    which US state is #1 located?" for "Truax Field airport is in which US state?"), or no
    step gives any of the names the question gives ("Which film was released more
    recently?" for a choice between two named films). No retrieval can find such a step's
    answer; the question itself is the better single step."""
    if any(_UNNAMED.match(q.strip()) for q in questions):
        return True
    names = _names(question)
    return bool(names) and not names & _words(" ".join(questions).split())


def plan_flaws(questions: Sequence[str], question: str) -> list[str]:
    """What a plan visibly gets wrong for the user's ``question``, one item a flaw: a step
    that restates the whole question beside other steps (the 1.5B model writes the question,
    then the chain that answers it, with no use of the first step's answer); a step that
    asks the name of a thing it does not name ("What is the name of the airport?"); each
    word of a name, title or number of the question that no step gives ("In which movie did
    #1 play?" for "Who did the cast member of Rooster Cogburn play in True Grit?" drops
    "True Grit"). A plan of one step that is the question has none."""
    flaws = []
    if restates(questions, question):
        flaws.append("restates the question")
    if any(_UNNAMED.match(q.strip()) for q in questions):
        flaws.append("asks the name of a thing it does not name")
    numbers = {w for w in _words(question.split()) if any(c.isdigit() for c in w)}
    given = _words(" ".join(questions).split())
    flaws += [f"drops '{w}'" for w in sorted((_names(question) | numbers) - given)]
    return flaws


_KIND_WORDS = "place date year time name city country nationality birth death burial"
_ANSWER_KIND_WORDS = frozenset(_KIND_WORDS.split())
"""Words of "the place of birth of X" that name the kind of answer asked for, not a hop."""
_WHO_IS = re.compile(r"^(?i:who|what)(?:\s+[a-z]+)?\s+(?:is|was)\s+(?P<name>[A-Z][^#?]*?)\s*\??$")
"""A step that asks who or what a named thing is, the name as the model wrote it ("Who is
Gerard I, Count Of Guelders?")."""


def with_relations(questions: Sequence[str], question: str) -> list[str]:
    """The plan with a step that asks who or what a named thing is (:data:`_WHO_IS`) asking
    instead for the relative the user's question wants of it, when no step names that
    relation: for "Where was the husband of Emily Davenport born?" the 1.5B model plans "Who
    is Emily Davenport?" then "Where was #1 born?", and the husband's hop is lost. The step
    becomes "Who is the husband of Emily Davenport?" (or "Who is X's father?", in the
    question's own words). Words that name the kind of answer ("the place of birth of")
    are not relations."""
    planned = _words(" ".join(questions).split())
    repaired = list(questions)
    for number, step in enumerate(questions):
        found = _WHO_IS.match(step.strip())
        if not found or re.search(r"['’]s [a-z]", found["name"]):  # "X's purchaser": asked
            continue
        name = re.escape(found["name"])
        relation = re.search(
            rf"\b(?P<span>the (?P<of>\w+) of (?:the )?{name}\b"
            rf"|{name}(?:\s*\([^)]*\))?['’]s (?P<s>\w+))",
            question,
            flags=re.IGNORECASE,
        )
        if relation is None:
            continue
        word = (relation["of"] or relation["s"]).lower()
        if word in planned or word in STOPWORDS or word in _ANSWER_KIND_WORDS:
            continue
        opening = step.strip()[: found.start("name")].rstrip()
        repaired[number] = f"{opening} {relation['span']}?"
    return repaired


def ends_on_the_answer(questions: Sequence[str], question: str) -> list[str]:
    """The plan cut after its last step that asks for the kind of answer the user's question
    asks for (:func:`asks_for`) when every step after it clearly asks for another kind: the
    1.5B model plans "Which city served as the capital of West Germany?" then "When was #1
    in power?" for "Which city served as the capital of West Germany from 1949 to 1990?",
    and the date it finds last becomes the answer. A plan whose kinds are unclear is kept."""
    wanted = asks_for(question)
    kinds = [asks_for(q) for q in questions]
    if wanted is None or not kinds or kinds[-1] == wanted or wanted not in kinds:
        return list(questions)
    last = max(i for i, kind in enumerate(kinds) if kind == wanted)
    if any(kind is None for kind in kinds[last + 1 :]):
        return list(questions)
    return list(questions[: last + 1])


def is_chain(questions: Sequence[str]) -> bool:
    """Whether every planned question but the last is used (as ``#k``) by a later one, so
    that the last question's answer is the answer to the whole question."""
    used = {int(k) for q in questions for k in _BACKREF.findall(q)}
    return all(number in used for number in range(1, len(questions)))


def is_bridge(questions: Sequence[str], index: int) -> bool:
    """Whether the answer of planned question ``index`` (0-based) is used by a later one."""
    return any(int(k) == index + 1 for q in questions[index + 1 :] for k in _BACKREF.findall(q))


_CHAINED = re.compile(
    r"\bthe\s+(?:[\w'-]+\s+){0,2}?[\w'-]+\s+(?:where|who|whom|whose|that|which)\b",
    re.IGNORECASE,
)
"""A noun phrase with a relative clause ("the state where X was born", "the actor who
voices Batman"): a thing the step names by another fact, often a hop of its own."""


def chained_step(questions: Sequence[str]) -> int | None:
    """The index of the first planned question that uses no earlier answer and still names a
    thing by a relative clause (:data:`_CHAINED`: "Which city borders the capital of the
    state where Levi Casey was born?"), or None."""
    return next(
        (i for i, q in enumerate(questions) if not _BACKREF.search(q) and _CHAINED.search(q)),
        None,
    )


def splice(questions: Sequence[str], index: int, parts: Sequence[str]) -> list[str]:
    """The plan with question ``index`` (0-based) replaced by the chain ``parts``: the parts'
    own ``#k`` move up by ``index``, a later use of the replaced question's answer points to
    the last part, and later uses of the questions after it move up by ``len(parts) - 1``."""
    shift, replaced = len(parts) - 1, index + 1

    def later(match: re.Match[str]) -> str:
        k = int(match.group(1))
        return f"#{k if k < replaced else k + shift}"

    inner = [_BACKREF.sub(lambda m: f"#{int(m.group(1)) + index}", q) for q in parts]
    return [
        *questions[:index],
        *inner,
        *(_BACKREF.sub(later, q) for q in questions[index + 1 :]),
    ]


def _answer(state: AgentState, ctx: AgentContext) -> Update:
    """Answer the pending step (:func:`~.answer.answer_sub`; quoting its evidence first as
    ``agents.quote_evidence`` says, reading an answer no passage on its query holds again
    with ``agents.reread_unsupported``); a bridge step
    (:func:`is_bridge`) with ``agents.bridge_votes`` = m > 1 then keeps the answer of the
    vote over its greedy answer and m − 1 samples (:mod:`.votes`): one prompt evaluation
    on llama.cpp, m − 1 calls on other models."""
    step = int(state.get("pending_step", 0))
    plan = state.get("plan") or []
    quoting = ctx.agents.quote_evidence
    quote = quoting == "all" or (quoting == "final" and step == len(plan) - 1)
    update = answer_sub(state, ctx, quote=quote, reread=ctx.agents.reread_unsupported)
    m = ctx.agents.bridge_votes
    if m < 2 or not is_bridge(plan, step):
        return update
    after: AgentState = {**state, **update}  # type: ignore[typeddict-item]
    if step_limit(after, ctx):  # the run's budget is spent: the greedy answer stands
        return update
    greedy = next(str(s.get("answer") or "") for s in steps_of(after) if s.get("index") == step)
    records = shown_docs(ctx, after, step)
    query = step_query(after, step)
    docs = [doc_from_record(d) for d in records]
    samples = sample_answers(
        ctx.chat,
        answer_messages(ctx, query, docs, quote=quote),
        m - 1,
        temperature=VOTE_TEMPERATURE,
        seed=1000 * (step + 1),
        max_tokens=ctx.agents.answer_max_tokens + (QUOTE_TOKENS if quote else 0),
    )
    read = quoted_answer if quote else extract_short_answer
    outcome = vote(
        [greedy, *(read(s) for s in samples)],
        lambda a, b: ctx.parts.equivalence.equivalent(a, b, question=query),
        lambda a: held_by(a, records),
    )
    record = {"index": step, "answer": outcome.answer, "vote": outcome.to_dict()}
    return {
        **update,
        "steps": merge_steps(steps_of(after), [record]),  # type: ignore[list-item]
        **costs(after, llm_calls=sampling_calls(ctx.chat, m - 1)),
    }


def _next(state: AgentState, ctx: AgentContext) -> Update:
    """Hand the next planned question (answers in place of ``#k``) to retrieval; once the
    plan is done, the last answer of a chain is the loop's answer (:func:`is_chain`); any
    other plan is concluded from all its answers."""
    plan = list(state.get("plan") or [])
    steps = steps_of(state)
    if len(steps) >= len(plan):
        last = str(steps[-1].get("answer") or "") if steps else ""
        done: Update = {"stop_reason": "final_answer", "next_node": "conclude"}
        if _known(last) and is_chain(plan):
            return {**done, "loop_answer": last, "loop_source": "loop"}
        return done
    if reason := step_limit(state, ctx):
        return {"stop_reason": reason, "next_node": "conclude"}
    index = len(steps)
    planned = plan[index]
    query = substitute_answers(planned, [str(s.get("answer") or "") for s in steps])
    whole = same_query(query, state["question"])
    new_step = {
        "index": index,
        "kind": "question" if whole else "follow_up",
        "sub_question": query,
        "answer": "",
        **({"planned": planned} if planned != query else {}),
    }
    return {**ask(query, index), "steps": [*steps, new_step], "next_node": "retrieve"}


def _plan_messages(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    return prompt.messages(
        state["question"],
        max_steps=ctx.agents.max_steps,
        exemplars=ctx.agents.exemplars,
        format_hint=bool(state.get("format_hint")),
        rules=ctx.agents.plan_rules,
        one_step=ctx.agents.one_step_exemplar,
    )


def _start(state: AgentState, ctx: AgentContext, reply: ChatReply, questions: list[str]) -> Update:
    update: Update = {"plan_rounds": state.get("plan_rounds", 0) + 1}
    ordered = in_order(questions)
    questions = [] if ordered is None or _copied(questions, state["question"]) else ordered
    if not questions:
        errors = state.get("format_errors", 0) + 1
        update["format_errors"] = errors
        if errors <= ctx.agents.max_format_errors:
            return {**update, "format_hint": True, "next_node": "plan"}
        questions = [state["question"]]  # degrade to looking up the question itself
    notes = list(state.get("notes") or [])
    if ctx.agents.plan_samples and plan_flaws(questions, state["question"]):
        questions, note = _least_flawed(questions, state, ctx)
        samples = sampling_calls(ctx.chat, ctx.agents.plan_samples)
        update.update(costs(state, reply, llm_calls=samples))  # with the plan's own call
        notes.append(note)
    update.update(plan=_fit(questions, state, ctx)[: ctx.agents.max_steps], format_hint=False)
    if ctx.agents.tidy_plans and update["plan"] != questions[: ctx.agents.max_steps]:
        notes.append("plan as written: " + " / ".join(questions))
    if notes != list(state.get("notes") or []):
        update["notes"] = notes
    if _splits(update["plan"], ctx):
        return {**update, "next_node": "split"}
    return {**update, **_next({**state, **update}, ctx)}  # type: ignore[typeddict-item]


PLAN_TEMPERATURE = 0.7
"""Sampling temperature of the plans ``agents.plan_samples`` sets against a flawed one."""


def _least_flawed(
    questions: list[str], state: AgentState, ctx: AgentContext
) -> tuple[list[str], str]:
    """The plan with the fewest flaws (:func:`plan_flaws`) of ``questions`` (the model's
    greedy plan, kept on a tie) and ``agents.plan_samples`` plans sampled from the same
    prompt, with a note for the trace that lists every candidate and its flaws. A sample
    that cannot be run in order, copies an exemplar or is only the question (in any words)
    is no candidate: the plan checks already fall back to the question."""
    question = state["question"]
    texts = sample_answers(
        ctx.chat,
        _plan_messages(state, ctx),
        ctx.agents.plan_samples,
        temperature=PLAN_TEMPERATURE,
        seed=0,
        max_tokens=ctx.agents.step_max_tokens * 2,
        stop=prompt.STOP,
    )
    candidates = [questions]
    for text in texts:
        sampled = in_order(parse_plan(text, ctx.agents.max_steps)) or []
        alone = len(sampled) == 1 and same_query(sampled[0], question)
        if sampled and not alone and not _copied(sampled, question):
            candidates.append(sampled)
    flaws = [plan_flaws(plan, question) for plan in candidates]
    best = min(range(len(candidates)), key=lambda i: len(flaws[i]))
    listed = "; ".join(
        f"{'model' if i == 0 else f'sample {i}'}{' (kept)' if i == best else ''}: "
        f"{' / '.join(plan)} [{', '.join(flaws[i]) or 'no flaw'}]"
        for i, plan in enumerate(candidates)
    )
    return candidates[best], f"plan candidates: {listed}"


def _fit(questions: Sequence[str], state: AgentState, ctx: AgentContext) -> list[str]:
    """With ``agents.plan_checks``, the question itself when the plan has lost its subject
    (:func:`loses_the_subject`) or copies an exemplar's words (:func:`leaks_an_exemplar`),
    else the plan with the relations its steps dropped asked for
    (:func:`with_relations`); then cut after the user's question (:func:`beyond_the_question`);
    with ``agents.tidy_plans`` also without steps that ask what a named thing is
    (:func:`named_steps`), the question alone when a step restates it
    (:func:`the_question_alone`), and ending on the kind of answer asked for
    (:func:`ends_on_the_answer`)."""
    question = state["question"]
    if ctx.agents.plan_checks:
        if loses_the_subject(questions, question) or leaks_an_exemplar(questions, question):
            return [question]
        questions = with_relations(questions, question)
    if ctx.agents.tidy_plans:
        questions = the_question_alone(named_steps(questions, question), question)
    questions = beyond_the_question(questions, question)
    return ends_on_the_answer(questions, question) if ctx.agents.tidy_plans else questions


def _splits(plan: Sequence[str], ctx: AgentContext) -> bool:
    """Whether ``agents.split_steps`` asks to plan a step of ``plan`` again: it has room for
    one more step and a step that still chains two hops (:func:`chained_step`)."""
    return (
        ctx.agents.split_steps
        and len(plan) < ctx.agents.max_steps
        and (chained_step(plan) is not None)
    )


def _split_messages(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    plan = state.get("plan") or []
    index = chained_step(plan)
    return prompt.messages(
        plan[index or 0],
        max_steps=ctx.agents.max_steps - len(plan) + 1,
        exemplars=ctx.agents.exemplars,
        rules=ctx.agents.plan_rules,
    )


def _split(state: AgentState, ctx: AgentContext, reply: ChatReply, parts: list[str]) -> Update:
    """Put the chain the step was planned into in place of the step (:func:`splice`; run in
    the order its uses need, :func:`in_order`) when it is a chain of two or more questions
    that copies no exemplar; otherwise keep the plan. Then run the plan (one split a run)."""
    plan = list(state.get("plan") or [])
    index = chained_step(plan)
    update: Update = {}
    parts = in_order(parts) or []
    if index is not None and len(parts) >= 2 and is_chain(parts):
        spliced = splice(plan, index, parts)
        if len(spliced) <= ctx.agents.max_steps and not _copied(parts, plan[index]):
            update["plan"] = _fit(spliced, state, ctx)
            note = f"plan step {index + 1} split into {len(parts)}: " + " / ".join(parts)
            update["notes"] = [*(state.get("notes") or []), note]
    return {**update, **_next({**state, **update}, ctx)}  # type: ignore[typeddict-item]


def _from_plan(plan: SubQuestionPlan) -> list[str]:
    return [query for q in plan.questions if (query := clean_query(q))]


def _final_messages(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    return prompt.final_messages(state["question"], reasoning_path(state))


def _forced(state: AgentState, ctx: AgentContext, reply: ChatReply, answer: str) -> Update:
    update: Update = {}
    if _known(answer):
        update.update(loop_answer=answer, loop_source="forced_final")
    if not state.get("stop_reason"):
        update["stop_reason"] = "max_steps"
    return update


_PLAN = Think(
    _plan_messages,
    parse_plan,
    _start,
    stop=prompt.STOP,
    max_tokens=lambda ctx: ctx.agents.step_max_tokens * 2,
    schema=SubQuestionPlan,
    convert=_from_plan,
    failed=lambda questions: not questions,
)
"""The planning step; ``split`` is the same step on one planned question."""


PLAN_EXECUTE = Loop(
    name=LOOP,
    description="Plan-and-execute",
    entry="plan",
    nodes={
        "plan": _PLAN,
        "split": replace(_PLAN, messages=_split_messages, step=_split, failed=None),
        "answer_sub": _answer,
        "next": _next,
        "conclude": Think(
            _final_messages,
            clean_answer,
            _forced,
            stop=["\n"],
            max_tokens=lambda ctx: ctx.agents.answer_max_tokens,
            limit=None,
            skip=has_answer,
            schema=ShortAnswer,
            convert=lambda final: clean_answer(final.answer),
            failed=lambda answer: not answer,
        ),
    },
    accept="answer_sub",
    edges=[("answer_sub", "next")],
    routes={
        "plan": ("plan", "split", "retrieve", "conclude"),
        "split": ("retrieve", "conclude"),
        "next": ("retrieve", "conclude"),
    },
)
