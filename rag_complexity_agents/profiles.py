"""Profiles: a layer of defaults between the fields' own defaults and whatever the user set
(TOML, environment, overrides, run options). A profile never rewrites a value that was set."""

from __future__ import annotations

from typing import Any

from .config import Config, is_set
from .errors import ConfigError

CPU_PROFILE: dict[str, Any] = {
    "retrieval.first_stage_k": 20,
    "nar.b": 2,
    "nar.c": 8,
    "asu.m": 3,
    "asu.max_tokens": 12,
    "asu.max_passage_chars": 300,
    "mer.l": 4,
    "mer.max_tokens": 96,
    "mer.max_evidence_chars": 350,
    "answer.sub_passages": 3,
}
"""The ``cpu`` profile: defaults for the paper-sized knobs. A SUNAR run with b = 16, c = 100
and m = 10 samples 70 answers per sub-question, minutes on two cores. The paper's l is one
knob, ``mer.l``: MER's evidences and, while ``answer.sub_passages`` is unset, the passages each
sub-question is answered from (paper profile: 10 for both). This profile keeps MER's l = 4 but
answers sub-questions from 3 passages, the setting every published 0.5B end-to-end row was
measured with: a shorter reader prompt (issue 15: prompt tokens set the CPU time), and on the
demo question a fourth passage led the 0.5B reader to a wrong title (UCL, not Princeton).
Each passage keeps the field default of 700 characters, single-step's length. Until session
31 this profile cut them to 400 for latency. On all 134 questions of each end-to-end set,
plan-and-execute with 700 scored within one question of 400 with the 0.5B (6 and 8 of 134,
against 6 and 9) and better with the 1.5B on MuSiQue (20 against 15;
``benchmarks/results/end_to_end.md``), at about 10% more time per question.
The profile leaves ``models.n_threads`` unset: llama.cpp then follows the cores other work
leaves free, call by call (one thread on a busy machine, where all-core llama.cpp was measured
5–7× slower than one thread; both cores on an idle one, where two threads were measured
1.95× / 1.76× faster than one in prefill / decode)."""

PROFILES: dict[str, dict[str, Any]] = {"cpu": CPU_PROFILE, "paper": {}}
"""Profile name → the defaults it gives (``paper``: the paper's, i.e. the fields' own)."""


def apply_profile(config: Config, profile: str | None = None) -> Config:
    """``config`` with the profile (default: ``agents.profile``) filling in the knobs nobody
    set; a value given in the constructor, TOML, environment or an override is kept."""
    profile = profile or config.agents.profile
    if profile not in PROFILES:
        raise ConfigError(f"unknown agents.profile {profile!r}; use 'cpu' or 'paper'")
    changes = {key: value for key, value in PROFILES[profile].items() if not is_set(config, key)}
    return config.with_overrides(changes) if changes else config


__all__ = ["CPU_PROFILE", "PROFILES", "apply_profile"]
