"""One typed configuration object holding every knob.

``Config()`` is the package's defaults and nothing else: the ``cpu`` preset, sized for a
2-core machine. ``Config.preset("paper")`` gives the paper's values for the knobs the papers
size (R, b, c, m, l and their prompt lengths); each field's description names the paper's
value. Files and the environment are read only when asked: :meth:`Config.from_env` (what the
CLI and the served graphs use) reads a TOML file (``RCA_CONFIG`` or ``./rca.toml``) and the
``RCA_<SECTION>__<KEY>`` environment variables, e.g. ``RCA_CORPUS__CHUNK_SIZE=256``.

Fields that cannot change an answer (paths, endpoints, threads, batch sizes, measurement
sections) say so with :data:`NEUTRAL`; :func:`answer_neutral_keys` lists them (a
run's fingerprint leaves them out).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ConfigError
from ..text import validate_collection_name
from .measurement import AdaptiveConfig, EvalConfig, GradeConfig, RRCPConfig
from .sections import (
    NEUTRAL,
    AgentsConfig,
    AnswerConfig,
    ASUConfig,
    CorpusConfig,
    GraphConfig,
    MERConfig,
    ModelsConfig,
    NARConfig,
    NARParams,
    RetrievalConfig,
    default_home,
)

PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {},
    "paper": {
        "retrieval.first_stage_k": 100,
        "nar.b": 16,
        "nar.c": 100,
        "asu.m": 10,
        "asu.max_tokens": 24,
        "asu.max_passage_chars": 600,
        "mer.l": 10,
        "mer.max_tokens": 256,
        "mer.max_evidence_chars": 700,
        "mer.after_one_step_plan": True,
        "answer.sub_passages": 10,
        "asu.rescore": "paper",
        "grade.binning": "per_hop",
    },
}
"""Named starting points: ``cpu`` is the fields' defaults (a SUNAR run with the paper's
b = 16, c = 100 and m = 10 samples 70 answers per sub-question, minutes on two cores);
``paper`` sets the papers' values."""


class Config(BaseModel):
    """Every knob of rag_complexity_agents in one object."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    models: ModelsConfig = Field(default_factory=ModelsConfig)
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    nar: NARConfig = Field(default_factory=NARConfig)
    asu: ASUConfig = Field(default_factory=ASUConfig)
    mer: MERConfig = Field(default_factory=MERConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    # the harness's own knobs and the measurement-only sections: they never change an answer
    eval: EvalConfig = Field(default_factory=EvalConfig, **NEUTRAL)
    grade: GradeConfig = Field(default_factory=GradeConfig, **NEUTRAL)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    rrcp: RRCPConfig = Field(default_factory=RRCPConfig, **NEUTRAL)
    collection: str = Field(
        "demo", description="Collection to index into and retrieve from (a directory name)."
    )
    max_question_chars: int = Field(4000, ge=16, **NEUTRAL)

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, name: str) -> str:
        return validate_collection_name(name)

    @classmethod
    def preset(cls, name: str) -> Config:
        """The preset ``name`` (:data:`PRESETS`: ``cpu`` or ``paper``)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; use one of: {', '.join(PRESETS)}")
        return cls().with_overrides(PRESETS[name])

    @classmethod
    def from_env(
        cls,
        path: str | Path | None = None,
        *,
        preset: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Config:
        """The config the CLI and served graphs use: the preset (``preset``, else the file's
        or ``RCA_PRESET``, else ``cpu``), then the TOML file (``path``, else ``RCA_CONFIG``,
        else ``./rca.toml`` when it exists), then ``RCA_<SECTION>__<KEY>`` variables."""
        env = os.environ if environ is None else environ
        file_values = _read_toml(path, env)
        chosen = preset or file_values.pop("preset", None) or env.get("RCA_PRESET") or "cpu"
        file_values.pop("preset", None)
        base = cls.preset(str(chosen)).model_dump(exclude_unset=True)
        data = _deep_merge(_deep_merge(base, file_values), _env_values(env))
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(validation_message(exc)) from None

    def with_overrides(self, overrides: dict[str, Any]) -> Config:
        """A copy with dotted-key overrides applied, e.g. ``{"graph.k": 16}``; validated.

        ``None`` values are skipped (they mean "unset")."""
        data = self.model_dump(exclude_unset=True)
        for dotted, value in overrides.items():
            if value is None:
                continue
            model: type[BaseModel] = Config
            node = data
            *parents, leaf = dotted.split(".")
            for part in parents:
                section = _section_model(model, part)
                if section is None:
                    raise ConfigError(f"unknown config section {dotted!r}")
                model, node = section, node.setdefault(part, {})
            if leaf not in model.model_fields:
                raise ConfigError(f"unknown config key {dotted!r}")
            node[leaf] = value
        try:
            return Config.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(validation_message(exc)) from None


def _read_toml(path: str | Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    chosen = path or env.get("RCA_CONFIG")
    if chosen is None:
        if not Path("rca.toml").is_file():
            return {}
        chosen = "rca.toml"
    file = Path(chosen)
    if not file.is_file():
        raise ConfigError(f"config file {file} does not exist")
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {file} is not valid TOML: {exc}") from None


def _env_values(env: Mapping[str, str]) -> dict[str, Any]:
    """``RCA_<SECTION>__<KEY>`` variables that name a config field, as nested data (a value
    that starts with ``[`` or ``{`` is read as JSON, the rest as text pydantic converts)."""
    data: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith("RCA_"):
            continue
        *sections, leaf = name[4:].lower().split("__")
        model: type[BaseModel] = Config
        for section in sections:
            found = _section_model(model, section)
            if found is None:
                break
            model = found
        else:
            if leaf in model.model_fields and _section_model(model, leaf) is None:
                value: Any = raw
                if raw.strip()[:1] in ("[", "{"):
                    value = json.loads(raw)
                node = data
                for section in sections:
                    node = node.setdefault(section, {})
                node[leaf] = value
    return data


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def validation_message(exc: ValidationError) -> str:
    """A pydantic ValidationError as one line: every failing field (dotted), what it accepts
    (pydantic's message, which lists a choice's values and a number's bounds) and what it got."""
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "config"
        message = " ".join(str(error["msg"]).removeprefix("Value error, ").split())
        if error["type"] == "value_error":  # our own validators name the value they got
            problems.append(f"{field}: {message}")
            continue
        got = error.get("input")
        shown = repr(got) if not isinstance(got, dict | list) else type(got).__name__
        shown = shown if len(shown) <= 60 else f"{shown[:57]}..."
        problems.append(f"{field}: {message} (got {shown})")
    return "invalid config: " + "; ".join(problems)


def _section_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    field = model.model_fields.get(name)
    annotation = field.annotation if field is not None else None
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def answer_neutral_keys(model: type[BaseModel] | None = None, prefix: str = "") -> set[str]:
    """Dotted keys whose fields say they cannot change an answer (:data:`NEUTRAL`);
    a section marked so stands for everything in it."""
    keys: set[str] = set()
    for name, field in (model or Config).model_fields.items():
        dotted = f"{prefix}{name}"
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("affects_answers") is False:
            keys.add(dotted)
            continue
        section = _section_model(model or Config, name)
        if section is not None:
            keys |= answer_neutral_keys(section, dotted + ".")
    return keys


def load_config(path: str | Path | None = None, **overrides: Any) -> Config:
    """:meth:`Config.from_env` with dotted ``overrides`` on top (``__`` also separates
    levels); an invalid value is a ConfigError with a one-line message."""
    config = Config.from_env(path)
    return config.with_overrides({k.replace("__", "."): v for k, v in overrides.items()})


__all__ = [
    "NEUTRAL",
    "PRESETS",
    "ASUConfig",
    "AdaptiveConfig",
    "AgentsConfig",
    "AnswerConfig",
    "Config",
    "CorpusConfig",
    "EvalConfig",
    "GradeConfig",
    "GraphConfig",
    "MERConfig",
    "ModelsConfig",
    "NARConfig",
    "NARParams",
    "RRCPConfig",
    "RetrievalConfig",
    "answer_neutral_keys",
    "default_home",
    "load_config",
    "validation_message",
]
