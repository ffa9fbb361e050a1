"""Cold start of ``rca ask``: query-time embedding without sentence-transformers
(the NumPy twin of the packaged MiniLM gives the same vectors) and the libraries a fresh
``rca ask`` process no longer imports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from agent_fakes import demo_home

from rag_complexity_agents.models.bert_numpy import NumpyBertEncoder, plain_bert_layout
from rag_complexity_agents.models.embeddings import (
    NUMPY_MAX_TEXTS,
    SentenceTransformerEmbedder,
    resolve_embedding_path,
)

REPO = Path(__file__).resolve().parents[1]
PACKAGED = resolve_embedding_path("packaged:all-minilm-l6-v2")
TEXTS = [
    "From which university did the founder of Amazon graduate?",
    "Jeff Bezos",
    "",
    "  padded  text\twith tabs and\nnew lines ",
    "Café naïve résumé — 東京 Ünïcödé, 42 % & co.",
    "Princeton University " * 120,  # longer than the 256-token limit: truncated alike
]
#: Libraries that ``rca ask`` must not import (sentence-transformers and what it drags in).
DEFERRED = ("torch", "sentence_transformers", "transformers", "sklearn")


def reference(texts: list[str]) -> np.ndarray:
    """The vectors of sentence-transformers itself."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(PACKAGED), device="cpu", local_files_only=True)
    return np.asarray(
        model.encode(texts, convert_to_numpy=True, normalize_embeddings=True), dtype=np.float32
    )


def test_numpy_encoder_gives_the_sentence_transformers_vectors() -> None:
    expected = reference(TEXTS)
    encoder = NumpyBertEncoder(PACKAGED)
    together = encoder.encode(TEXTS)  # one padded batch, sorted by length
    one_by_one = np.stack([encoder.encode([text])[0] for text in TEXTS])
    assert together.dtype == np.float32 and together.shape == expected.shape
    assert np.abs(together - expected).max() <= 1e-5
    assert np.abs(one_by_one - expected).max() <= 1e-5
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)
    assert encoder.encode([]).shape == (0, 384)


def test_the_embedder_uses_the_numpy_twin_for_few_texts_only() -> None:
    embedder = SentenceTransformerEmbedder(PACKAGED)
    expected = reference(TEXTS)
    query = embedder.encode_query(TEXTS[0])
    few = embedder.encode(TEXTS[:2])
    assert "model" not in vars(embedder)  # sentence-transformers not loaded for them
    assert embedder.dimension == 384 and "model" not in vars(embedder)
    assert np.abs(query - expected[0]).max() <= 1e-5
    assert np.abs(few - expected[:2]).max() <= 1e-5
    many = [f"text number {i}" for i in range(NUMPY_MAX_TEXTS + 1)]
    batch = embedder.encode(many)  # a batch (indexing) goes to sentence-transformers
    assert "model" in vars(embedder)
    assert np.abs(batch - reference(many)).max() <= 1e-5


def test_other_layouts_keep_sentence_transformers(tmp_path: Path) -> None:
    model = tmp_path / "cls-pooling"
    shutil.copytree(PACKAGED, model)
    assert plain_bert_layout(model)
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    assert not plain_bert_layout(model)
    assert not plain_bert_layout(tmp_path / "missing")
    embedder = SentenceTransformerEmbedder(model)
    assert embedder.numpy_encoder is None
    vector = embedder.encode_query("Jeff Bezos")  # CLS pooling, computed by the library
    assert "model" in vars(embedder)
    assert np.abs(vector - reference(["Jeff Bezos"])[0]).max() > 1e-3


_ASK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from agent_fakes import Script, ScriptedChat
from rag_complexity_agents.cli import app
from rag_complexity_agents.components import Components

chat = ScriptedChat(script=Script(
    self_ask=["Follow up: Who founded Amazon?", "So the final answer is: Princeton University"],
    answer=["Jeff Bezos"],
    asu="Jeff Bezos",
    mer="[Reasoning]: Bezos founded Amazon.\\n[Final Answer]: Princeton University",
))
Components.chat = property(lambda self: chat)
app(["ask", "--json", "--pipeline", "self_ask_sunar_mer",
     "From which university did the founder of Amazon graduate?"],
    standalone_mode=False)
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def test_rca_ask_does_not_import_sentence_transformers(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The whole ``rca ask`` path of the paper's pipeline (``--pipeline self_ask_sunar_mer``:
    Self-Ask + SUNAR with ASU + MER; dense and hybrid first stage, bi-encoder scores,
    embedding equivalence) in a fresh process."""
    home = demo_home(tmp_path_factory.getbasetemp())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(RCA_CORPUS__HOME=str(home), RCA_GRAPH__K="16")
    done = subprocess.run(
        [sys.executable, "-c", _ASK, str(REPO / "tests"), json.dumps(DEFERRED)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer, imported = done.stdout.strip().rsplit("\n", 1)
    assert json.loads(answer[answer.index("{") :])["answer"] == "Princeton University"
    assert json.loads(imported) == []
