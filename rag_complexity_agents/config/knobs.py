"""The knob table: the per-run knobs every surface offers, each with one meaning.

A knob has a meaningful name (keyword argument, ``configurable`` key, Studio's context
field, CLI flag ``--name-with-dashes``), the paper's symbol as an alias where the paper has
one, the config key it sets, and the pipeline parts it acts on. Its type, bounds, default and
description are the config field's own (:class:`~rag_complexity_agents.config.Config`), so
a bound holds on every surface, a served run included.

A knob given to a pipeline without the part it acts on changes nothing; the run says so once
in ``trace["notes"]`` (:func:`idle_knob_notes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, TypedDict, cast

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from ..errors import ConfigError
from . import Config


@dataclass(frozen=True)
class Knob:
    """One per-run knob (see the module docstring)."""

    name: str
    key: str
    parts: frozenset[str]
    symbol: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The names a caller may use: the knob's name, then the paper's symbol."""
        return (self.name, self.symbol) if self.symbol else (self.name,)

    @property
    def flag(self) -> str:
        """The CLI flag."""
        return "--" + self.name.replace("_", "-")


_ALWAYS = frozenset({"answer"})

KNOBS: tuple[Knob, ...] = (
    Knob("retrieval", "agents.retrieval", _ALWAYS),
    Knob("mer", "agents.mer", _ALWAYS),
    Knob("passages", "answer.passages", _ALWAYS, symbol="k"),
    Knob("sub_passages", "answer.sub_passages", frozenset({"loop"})),
    Knob("max_steps", "agents.max_steps", frozenset({"loop"})),
    Knob("bridge_votes", "agents.bridge_votes", frozenset({"loop"})),
    Knob("first_stage_k", "retrieval.first_stage_k", frozenset({"nar"})),
    Knob("batch_size", "nar.b", frozenset({"nar"}), symbol="b"),
    Knob("budget", "nar.c", frozenset({"nar"}), symbol="c"),
    Knob("samples", "asu.m", frozenset({"asu"}), symbol="m"),
    Knob("evidence", "mer.l", frozenset({"mer"}), symbol="l"),
)
"""Every per-run knob. ``first_stage_k`` is R, the first-stage list NAR starts from."""

KNOBS_BY_NAME: dict[str, Knob] = {name: knob for knob in KNOBS for name in knob.names}
"""A knob by its name or its paper symbol."""


class RetrieverKnobValues(TypedDict, total=False):
    """The knobs a retriever adapter uses, as keyword arguments (by name or paper symbol)."""

    first_stage_k: int | None
    batch_size: int | None
    b: int | None
    budget: int | None
    c: int | None
    samples: int | None
    m: int | None


class KnobValues(RetrieverKnobValues, total=False):
    """Every knob as a keyword argument (by name or paper symbol); ``None`` means unset."""

    retrieval: str | None
    mer: bool | None
    passages: int | None
    k: int | None
    sub_passages: int | None
    max_steps: int | None
    bridge_votes: int | None
    evidence: int | None
    l: int | None  # noqa: E741 - the paper's symbol


def canonical(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` keyed by knob name (symbols resolved, ``None`` dropped); a ConfigError names
    an unknown knob, or a knob given twice under its two names, and lists the knobs."""
    out: dict[str, Any] = {}
    for given, value in values.items():
        if value is None:
            continue
        knob = KNOBS_BY_NAME.get(given)
        if knob is None:
            raise ConfigError(f"unknown knob {given!r}; knobs: {knob_list()}")
        if knob.name in out and out[knob.name] != value:
            raise ConfigError(f"knob {knob.name!r} given twice ({knob.symbol!r} is its symbol)")
        out[knob.name] = value
    return out


def checked(values: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`canonical` ``values``, each converted to its knob's type and checked against its
    bounds; a ConfigError names the knob as the caller wrote it, what it accepts and what it
    got."""
    out = canonical(values)
    for name, value in out.items():
        knob = KNOBS_BY_NAME[name]
        try:
            out[name] = _adapter(knob).validate_python(value)
        except ValidationError as exc:
            problem = " ".join(str(exc.errors(include_url=False)[0]["msg"]).split())
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            label = f"{knob.name} ({knob.symbol})" if knob.symbol else knob.name
            raise ConfigError(f"knob {label}: {problem} (got {shown})") from None
    return out


def overrides_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted config overrides for knob ``values`` (names or symbols), checked."""
    return {KNOBS_BY_NAME[name].key: value for name, value in checked(values).items()}


@cache
def _adapter(knob: Knob) -> TypeAdapter[Any]:
    info = field_of(knob)
    annotated: Any = cast(Any, Annotated)[info.annotation, info]
    return TypeAdapter(annotated)


def knob_list() -> str:
    """The knobs, as the error messages list them: ``batch_size (b), budget (c), …``."""
    return ", ".join(f"{k.name} ({k.symbol})" if k.symbol else k.name for k in KNOBS)


def field_of(knob: Knob) -> FieldInfo:
    """The config field behind ``knob`` (its type, bounds, default and description)."""
    model: type[BaseModel] = Config
    *sections, leaf = knob.key.split(".")
    for section in sections:
        annotation = model.model_fields[section].annotation
        assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
        model = annotation
    return model.model_fields[leaf]


def bounds(knob: Knob) -> tuple[float | None, float | None]:
    """(lowest, highest) value ``knob`` accepts (None: unbounded on that side)."""
    low = high = None
    for meta in field_of(knob).metadata:
        low = getattr(meta, "ge", None) if getattr(meta, "ge", None) is not None else low
        high = getattr(meta, "le", None) if getattr(meta, "le", None) is not None else high
    return low, high


def idle_knob_notes(given: Mapping[str, Any], parts: frozenset[str], pipeline: str) -> list[str]:
    """One note per knob in ``given`` that cannot act in a pipeline running ``parts``."""
    notes = []
    for name in canonical(given):
        knob = KNOBS_BY_NAME[name]
        if not knob.parts & parts:
            needs = " or ".join(sorted(knob.parts))
            notes.append(
                f"knob {knob.name} changes nothing here: it acts on {needs}, which the "
                f"pipeline {pipeline!r} does not run"
            )
    return notes
