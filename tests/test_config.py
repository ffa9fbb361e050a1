from __future__ import annotations

from pathlib import Path

import pytest

from rag_complexity_agents.config import PRESETS, Config, load_config
from rag_complexity_agents.errors import ConfigError, InputError
from rag_complexity_agents.text import normalize_answer, validate_question


def test_defaults_are_the_cpu_preset_and_the_paper_preset_the_papers() -> None:
    cfg = Config()
    assert cfg == Config.preset("cpu")
    assert (cfg.graph.k, cfg.retrieval.first_stage_k, cfg.nar.b, cfg.nar.c) == (100, 20, 2, 8)
    paper = Config.preset("paper")
    assert (paper.retrieval.first_stage_k, paper.nar.b, paper.nar.c, paper.asu.m) == (
        100,
        16,
        100,
        10,
    )
    assert (paper.mer.l, paper.answer.sub_passages) == (10, 10)
    assert (paper.asu.rescore, paper.grade.binning) == ("paper", "per_hop")
    assert set(PRESETS) == {"cpu", "paper"}
    with pytest.raises(ConfigError, match="unknown preset 'gpu'"):
        Config.preset("gpu")


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


def test_files_and_environment_are_read_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "rca.toml"
    toml.write_text('preset = "paper"\n[nar]\nc = 50\n')
    monkeypatch.setenv("RCA_CONFIG", str(toml))
    monkeypatch.setenv("RCA_ASU__M", "5")
    monkeypatch.chdir(tmp_path)
    assert Config() == Config.preset("cpu")  # the library never reads them on its own
    cfg = Config.from_env()
    assert (cfg.nar.c, cfg.nar.b, cfg.asu.m) == (50, 16, 5)  # file over preset, env over file
    assert Config.from_env(preset="cpu").nar.b == 2  # an explicit preset wins over the file's
    env = {"RCA_NAR__B": "4", "RCA_DATA_DIR": "/x", "RCA_HOME": "/y"}  # not config keys
    assert Config.from_env(toml, environ=env).nar.b == 4
    with pytest.raises(ConfigError, match=r"nar\.b"):
        Config.from_env(toml, environ={"RCA_NAR__B": "many"})


def test_nar_params_are_checked_in_one_place() -> None:
    with pytest.raises(ConfigError, match=r"nar\.b: Input should be greater than or equal to 1"):
        Config().with_overrides({"nar.b": 0})
    assert Config().with_overrides({"nar.c": 0}).nar.c == 0  # scores nothing: first-stage order
    with pytest.raises(ConfigError, match="greater than or equal"):
        Config().with_overrides({"nar.c": -1})
