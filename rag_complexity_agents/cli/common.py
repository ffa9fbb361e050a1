"""What every ``rca`` command shares: the --config / --set options and clean error exits."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import click
import typer
from pydantic import ValidationError

from ..config import Config, validation_message
from ..errors import ConfigError, RCAError

F = TypeVar("F", bound=Callable[..., Any])

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="TOML config file (default: ./rca.toml if present).")
]
PresetOption = Annotated[
    str | None,
    typer.Option("--preset", help="Starting values: cpu (default, sized for a CPU) | paper."),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override any config key, e.g. --set graph.k=16 (repeatable)."),
]
DataOption = Annotated[
    Path | None,
    typer.Option("--data", help="Directory of the dataset files (default: eval.data_dir)."),
]


#: Set (to anything but "" or "0") to see the traceback of an unexpected error (``--debug``).
DEBUG_ENV = "RCA_DEBUG"


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def fail_cleanly(func: F) -> F:
    """Turn our own errors and invalid settings into one red line and exit code 2, and any
    other exception into one red line naming its type plus how to see the traceback (exit
    code 1; with ``--debug`` / ``RCA_DEBUG=1`` it propagates with its traceback)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (RCAError, ValidationError) as exc:
            message = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
            raise typer.Exit(code=2) from None
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as exc:
            if debugging():
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            typer.secho(
                f"error: unexpected {type(exc).__name__}: {first} (rerun with --debug, or "
                f"{DEBUG_ENV}=1, for the traceback)",
                fg=typer.colors.RED,
                err=True,
            )
            raise typer.Exit(code=1) from None

    return wrapper  # type: ignore[return-value]


def quiet_libraries() -> None:
    """Silence the progress bars of the model libraries (``-q``): Hugging Face's "Loading
    weights" and download bars. The variable covers libraries imported later, the calls
    those already imported."""
    import os
    import sys

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils.tqdm import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


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
    """The preset (flag ``preset``), the config file (or ./rca.toml) and ``RCA_*`` variables
    (:meth:`Config.from_env`), then --set pairs, then the other flags that were given."""
    preset = flags.pop("preset", None)
    overrides = parse_set(pairs)
    overrides.update({key: value for key, value in flags.items() if value is not None})
    return Config.from_env(path, preset=preset).with_overrides(overrides)
