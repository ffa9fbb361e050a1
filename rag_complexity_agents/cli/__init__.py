"""The ``rca`` command line: index, ask, info, eval, rc, grade, adaptive.

One module per command group (:mod:`.corpus`: index and info, :mod:`.ask`, :mod:`.eval`,
:mod:`.rc`, :mod:`.grade`, :mod:`.adaptive`), :mod:`.render` for the printed traces and
:mod:`.common` for the shared options; this module assembles them into :data:`app`.
"""

from __future__ import annotations

import os

import typer

from .adaptive import adaptive_app
from .ask import ask
from .common import DEBUG_ENV
from .corpus import index, info
from .eval import eval_app
from .grade import grade_app
from .html import render
from .rc import rc_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

app = typer.Typer(
    help="rag_complexity_agents: measurable complex-question answering, offline.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _global_options(
    debug: bool = typer.Option(
        False, "--debug", help="Show the traceback of an unexpected error (or RCA_DEBUG=1)."
    ),
) -> None:
    if debug:
        os.environ[DEBUG_ENV] = "1"


app.command()(index)
app.command()(ask)
app.command()(info)
app.command()(render)
app.add_typer(eval_app, name="eval")
app.add_typer(rc_app, name="rc")
app.add_typer(grade_app, name="grade")
app.add_typer(adaptive_app, name="adaptive")

__all__ = ["app"]
