from __future__ import annotations

from pathlib import Path

import pytest

from rag_complexity_agents.config import Config, is_set, load_config
from rag_complexity_agents.errors import ConfigError, InputError
from rag_complexity_agents.profiles import apply_profile
from rag_complexity_agents.text import normalize_answer, validate_question


def test_defaults_follow_the_paper() -> None:
    cfg = Config()
    assert cfg.graph.k == 100
    assert cfg.retrieval.first_stage_k == 100


def test_toml_env_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "rca.toml"
    toml.write_text('collection = "notes"\n[graph]\nk = 16\n[corpus]\nchunk_size = 128\n')
    monkeypatch.setenv("RCA_CORPUS__CHUNK_SIZE", "256")
    cfg = load_config(toml)
    assert cfg.collection == "notes"
    assert cfg.graph.k == 16
    assert cfg.corpus.chunk_size == 256  # the environment beats the file
    cfg2 = cfg.with_overrides({"graph.k": 4, "models.chat": "ollama:x", "retrieval.k": None})
    assert (cfg2.graph.k, cfg2.models.chat, cfg2.retrieval.k) == (4, "ollama:x", 10)


def test_bad_config_is_reported() -> None:
    with pytest.raises(ConfigError, match="unknown config key"):
        Config().with_overrides({"graph.kk": 3})
    with pytest.raises(ConfigError, match="chunk_overlap"):
        Config().with_overrides({"corpus.chunk_overlap": 500})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent/rca.toml")


def test_question_validation() -> None:
    assert validate_question("  Who wrote Emma? ", max_chars=100) == "Who wrote Emma?"
    with pytest.raises(InputError, match="empty"):
        validate_question(" \n\t", max_chars=100)
    with pytest.raises(InputError, match="1,048,576 characters"):
        validate_question("x" * 2**20, max_chars=4000)
    with pytest.raises(InputError, match="garbled"):
        validate_question("\x00\x01\x02\x03\x04 a", max_chars=100)
    with pytest.raises(InputError, match="garbled"):
        validate_question("?!?!", max_chars=100)


def test_normalize_answer() -> None:
    assert normalize_answer("The  U.S.A.!") == "usa"
    assert normalize_answer("an Apple a day") == "apple day"


def test_cpu_profile_fills_in_only_what_nobody_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an explicit value equal to the paper default is the user's choice: it stays
    assert apply_profile(Config().with_overrides({"nar.c": 100}), "cpu").nar.c == 100
    toml = tmp_path / "rca.toml"
    toml.write_text("[nar]\nc = 100\n")
    from_file = apply_profile(load_config(toml), "cpu")
    assert from_file.nar.c == 100 and from_file.nar.b == 2 and from_file.asu.m == 3
    # overrides keep what was set before them
    assert apply_profile(load_config(toml).with_overrides({"nar.b": 4}), "cpu").nar.c == 100
    monkeypatch.setenv("RCA_NAR__C", "100")
    assert apply_profile(Config(), "cpu").nar.c == 100
    monkeypatch.delenv("RCA_NAR__C")
    # what nobody set takes the profile's value; 'paper' keeps the paper's
    unset = apply_profile(Config(), "cpu")
    assert unset.nar.c == 8 and unset.models.n_threads is None  # free cores
    assert apply_profile(Config(), "paper").nar.c == 100
    assert is_set(unset, "nar.c") and not is_set(Config(), "nar.c")
    with pytest.raises(ConfigError, match=r"unknown agents\.profile"):
        apply_profile(Config(), "gpu")


def test_nar_params_are_checked_in_one_place() -> None:
    with pytest.raises(ConfigError, match="batch size b must be at least 1"):
        Config().with_overrides({"nar.b": 0})
    assert Config().with_overrides({"nar.c": 0}).nar.c == 0  # scores nothing: first-stage order
    with pytest.raises(ConfigError, match="greater than or equal"):
        Config().with_overrides({"nar.c": -1})
