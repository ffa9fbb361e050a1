"""What every ``rca`` command shares: the --config / --set options and clean error exits."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ..config import Config, load_config
from ..errors import ConfigError, RCAError

F = TypeVar("F", bound=Callable[..., Any])

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="TOML config file (default: ./rca.toml if present).")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override any config key, e.g. --set graph.k=16 (repeatable)."),
]
DataOption = Annotated[
    Path | None,
    typer.Option("--data", help="Directory of the dataset files (default: eval.data_dir)."),
]


def fail_cleanly(func: F) -> F:
    """Turn our own errors into one red line and exit code 2 (no traceback)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RCAError as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


def parse_set(pairs: list[str] | None) -> dict[str, Any]:
    """``--set key=value`` pairs → overrides (values parsed as JSON when they are JSON)."""
    overrides: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        try:
            overrides[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key.strip()] = raw
    return overrides


def build_config(path: Path | None, pairs: list[str] | None, **flags: Any) -> Config:
    """The config file (or ./rca.toml), then --set pairs, then the flags that were given."""
    overrides = parse_set(pairs)
    overrides.update({key: value for key, value in flags.items() if value is not None})
    return load_config(path).with_overrides(overrides)
