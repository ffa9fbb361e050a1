"""One typed configuration object holding every knob.

Precedence (highest first): explicit overrides (CLI flags, ``configurable`` in graphs) →
environment variables (``RCA_`` prefix, ``__`` between nesting levels, e.g.
``RCA_CORPUS__CHUNK_SIZE=256``) → a TOML file (``RCA_CONFIG`` or ``./rca.toml``) → the
profile (``agents.profile``, see :mod:`.profiles`) → defaults. Paper symbols keep the paper's
names and defaults; the ``cpu`` profile (the default) gives the paper-sized knobs that nobody
set smaller values (:func:`is_set` tells which were set).

Fields that cannot change an answer (paths, endpoints, threads, batch sizes, measurement
sections) say so with :data:`NEUTRAL`; :func:`answer_neutral_keys` lists them (a
run's fingerprint leaves them out).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ..corpus.manifest import validate_collection_name
from ..errors import ConfigError
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


class Config(BaseSettings):
    """Every knob of rag_complexity_agents in one object."""

    model_config = SettingsConfigDict(
        env_prefix="RCA_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

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
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = os.environ.get("RCA_CONFIG") or "rca.toml"
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml_path),
        )

    def with_overrides(self, overrides: dict[str, Any]) -> Config:
        """A copy with dotted-key overrides applied, e.g. ``{"graph.k": 16}``; validated.

        What was set before stays set and the overridden keys become set; everything else
        keeps its default (so a profile still applies to it)."""
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


def _config_from_sources() -> Config:
    try:
        return Config()
    except ValidationError as exc:
        raise ConfigError(validation_message(exc)) from None


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


def is_set(config: BaseModel, dotted: str) -> bool:
    """Whether ``dotted`` was given a value (constructor, TOML, environment, override)
    instead of keeping its default."""
    node = config
    *parents, leaf = dotted.split(".")
    for part in parents:
        if part not in node.model_fields_set:
            return False
        node = getattr(node, part)
    return leaf in node.model_fields_set


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
    """Load the config from ``path`` (TOML), the environment and dotted ``overrides``; an
    invalid value is a ConfigError with a one-line message."""
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        previous = os.environ.get("RCA_CONFIG")
        os.environ["RCA_CONFIG"] = str(path)
        try:
            cfg = _config_from_sources()
        finally:
            if previous is None:
                os.environ.pop("RCA_CONFIG", None)
            else:
                os.environ["RCA_CONFIG"] = previous
    else:
        cfg = _config_from_sources()
    return cfg.with_overrides({k.replace("__", "."): v for k, v in overrides.items()})


__all__ = [
    "NEUTRAL",
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
    "is_set",
    "load_config",
    "validation_message",
]
