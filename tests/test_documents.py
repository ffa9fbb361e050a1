from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rag_complexity_agents.corpus.documents import (
    SourceDocument,
    chunk_document,
    chunk_id,
    iter_documents,
)
from rag_complexity_agents.errors import CorpusError


def test_reads_txt_md_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("Alpha text.", encoding="utf-8")
    (tmp_path / "sub" / "b.md").write_text("# Beta\nBeta text.", encoding="utf-8")
    (tmp_path / "ignored.csv").write_text("x,y", encoding="utf-8")
    records = [
        {"id": "r1", "title": "One", "text": "First record.", "year": 1999},
        {"id": "r2", "text": "Second record.", "metadata": {"lang": "en"}},
    ]
    (tmp_path / "c.jsonl").write_text(
        "\n".join(json.dumps(r) for r in records) + "\n\n", encoding="utf-8"
    )
    docs = {d.id: d for d in iter_documents(tmp_path)}
    assert set(docs) == {"a.txt", "sub/b.md", "r1", "r2"}
    assert docs["r1"].title == "One" and docs["r1"].metadata == {"year": 1999}
    assert docs["r2"].metadata == {"lang": "en"}
    assert docs["sub/b.md"].text.startswith("# Beta")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: p / "missing", "does not exist"),
        (lambda p: p, "contains no"),
    ],
)
def test_missing_or_empty_directory(tmp_path: Path, setup, message: str) -> None:
    with pytest.raises(CorpusError, match=message):
        list(iter_documents(setup(tmp_path)))


def test_binary_and_non_utf8_files_are_named(tmp_path: Path) -> None:
    binary = tmp_path / "image.txt"
    binary.write_bytes(b"\x89PNG\x00\x00\x01\x02")
    with pytest.raises(CorpusError, match=r"image\.txt looks like a binary file"):
        list(iter_documents(binary))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(CorpusError, match=r"latin\.txt is not valid UTF-8"):
        list(iter_documents(latin))


def test_garbled_jsonl_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "text": "ok"}\n{"id": 2, "text": \n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:2: not valid JSON"):
        list(iter_documents(bad))
    bad.write_text('{"id": "1", "body": "no text"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:1: record has no string field 'text'"):
        list(iter_documents(bad))


def test_chunking_by_tokens_with_overlap(embedder) -> None:
    words = [f"word{i}" for i in range(300)]
    doc = SourceDocument(id="d", text=" ".join(words), title="T")
    chunks = chunk_document(doc, embedder.token_offsets, chunk_size=64, chunk_overlap=16)
    assert len(chunks) > 3
    for chunk in chunks:
        assert embedder.count_tokens(chunk.text) <= 64
        assert chunk.text in doc.text
        assert chunk.metadata["doc_id"] == "d"
    # consecutive chunks overlap, and together they cover the whole document
    for first, second in itertools.pairwise(chunks):
        assert first.text.split()[-1] in second.text
    assert chunks[0].text.startswith("word0") and chunks[-1].text.endswith("word299")
    # ids are stable content hashes
    again = chunk_document(doc, embedder.token_offsets, chunk_size=64, chunk_overlap=16)
    assert [c.id for c in again] == [c.id for c in chunks]
    assert chunks[0].id == chunk_id("d", chunks[0].text)


def test_short_and_empty_documents(embedder) -> None:
    short = SourceDocument(id="s", text="  A short note.  ")
    assert [
        c.text
        for c in chunk_document(short, embedder.token_offsets, chunk_size=64, chunk_overlap=8)
    ] == ["A short note."]
    empty = SourceDocument(id="e", text="   \n ")
    assert chunk_document(empty, embedder.token_offsets, chunk_size=64, chunk_overlap=8) == []
