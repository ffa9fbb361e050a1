from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rag_complexity_agents.corpus.documents import (
    SourceDocument,
    TextFileDocument,
    chunk_document,
    chunk_id,
    iter_documents,
    text_pieces,
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


def test_text_files_are_streamed_and_chunk_like_the_whole_text(embedder, tmp_path: Path) -> None:
    words = [f"w{i}" if i % 7 else f"Sentence{i}." for i in range(2000)]
    text = "\ufeff  " + " ".join(words) + "\n\n"
    (tmp_path / "long.txt").write_text(text, encoding="utf-8")
    (doc,) = iter_documents(tmp_path / "long.txt")
    assert isinstance(doc, TextFileDocument) and doc.text == text[1:]
    blocks = list(doc.blocks(block_bytes=100))
    assert len(blocks) > 100 and "".join(blocks) == text[1:]
    whole = SourceDocument(doc.id, doc.text, doc.title, doc.metadata)
    expected = chunk_document(whole, embedder.token_offsets, chunk_size=64, chunk_overlap=16)
    for piece_chars in (50, 333, 10_000):
        got = chunk_document(
            doc,
            embedder.token_offsets,
            chunk_size=64,
            chunk_overlap=16,
            piece_chars=piece_chars,
        )
        assert got == expected
    # the tokenizer only ever sees one piece: its input is bounded by piece_chars
    seen: list[int] = []

    def offsets(piece: str) -> list[tuple[int, int]]:
        seen.append(len(piece))
        return embedder.token_offsets(piece)

    chunk_document(doc, offsets, chunk_size=64, chunk_overlap=16, piece_chars=500)
    assert max(seen) <= 500 and sum(seen) == len(doc.text)


def test_pieces_end_at_whitespace() -> None:
    pieces = list(text_pieces(["alpha beta gam", "ma delta ", "x" * 50], size=12))
    assert "".join(pieces) == "alpha beta gamma delta " + "x" * 50
    assert pieces[:2] == ["alpha beta ", "gamma delta "]  # cut after the last space
    assert pieces[2:] == ["x" * 12] * 4 + ["x" * 2]  # no space at all: cut anyway


def test_utf8_errors_name_the_byte_across_blocks(tmp_path: Path) -> None:
    bad = tmp_path / "late.txt"
    bad.write_bytes(b"a" * 5000 + b"\xe9t\xc3")
    with pytest.raises(CorpusError, match=r"late\.txt is not valid UTF-8 \(byte 5000\)"):
        list(TextFileDocument("late.txt", bad).blocks(block_bytes=64))
    cut = tmp_path / "cut.txt"
    cut.write_bytes("é".encode() * 100 + b"\xc3")  # a sequence cut off at the end
    with pytest.raises(CorpusError, match=r"byte 200\)"):
        list(iter_documents(cut))


def test_symlinks_leading_outside_the_folder_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("Secret text.", encoding="utf-8")
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "own.txt").write_text("Own text.", encoding="utf-8")
    (root / "link_out.txt").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside, target_is_directory=True)
    (root / "sub" / "link_in.md").symlink_to(root / "own.txt")
    with caplog.at_level("WARNING"):
        docs = {d.id: d.text for d in iter_documents(root)}
    assert docs == {"own.txt": "Own text.", "sub/link_in.md": "Own text."}
    assert "link_out.txt: a symbolic link to" in caplog.text and "dir_out" in caplog.text
    # a file named on the command line is read even when it is a link
    assert [d.text for d in iter_documents(root / "link_out.txt")] == ["Secret text."]


DEEP = '{"text": "deep", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"
BAD_RECORDS = [
    ('{"text": "t", "metadata": {"": 1}}', "metadata key '' is empty"),
    ('{"text": "t", "metadata": {"#x": 1}}', "metadata key '#x' starts with '#' or '$'"),
    ('{"text": "t", "$x": 1}', "metadata key '$x' starts with '#' or '$'"),
    ('{"text": "t", "metadata": [1, 2, 3]}', "'metadata' must be a JSON object, not list"),
    ('{"text": "t", "metadata": "abc"}', "'metadata' must be a JSON object, not str"),
    (DEEP, "JSON nested too deeply to read"),
    ('{"text": "t", "m": ' + "[" * 17 + "]" * 17 + "}", "nested more than 16 levels deep"),
    ('{"text": "t\\ud800"}', "text holds a lone surrogate"),
    ('{"text": "t", "metadata": {"k": ["\\udfff"]}}', "metadata value of 'k' holds a lone"),
    ('{"text": "t", "id": {"a": 1}}', "'id' must be a string or a number"),
]


@pytest.mark.parametrize(("line", "message"), BAD_RECORDS)
def test_records_the_store_cannot_hold_are_named_by_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    good = '{"id": "ok", "text": "fine", "metadata": {"tags": ["a"], "n": 1.5, "x": null}}\n'
    bad.write_text(good + line + "\n", encoding="utf-8")
    with pytest.raises(CorpusError) as info:
        list(iter_documents(bad))
    text = str(info.value)
    assert text.startswith(f"{bad}:2: ") and message in text, text
    assert "\n" not in text and len(text) < 400


def test_a_symbolic_link_loop_is_named(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "own.txt").write_text("Own text.", encoding="utf-8")
    (root / "a.txt").symlink_to(root / "b.txt")
    (root / "b.txt").symlink_to(root / "a.txt")
    for path in (root, root / "a.txt"):
        with pytest.raises(CorpusError, match=r"[ab]\.txt: a symbolic link loop") as info:
            list(iter_documents(path))
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["x" * 40_000, "ab+/" * 10_000, "é" * 20_000])
def test_text_without_whitespace_is_cut_under_the_character_cap(embedder, text: str) -> None:
    doc = SourceDocument("blob", text)
    chunks = chunk_document(doc, embedder.token_offsets, chunk_size=200, chunk_overlap=40)
    assert max(len(c.text) for c in chunks) <= 8 * 200  # the default cap
    covered = "".join(c.text for c in chunks)
    assert len(chunks) > 1 and set(covered) == set(text)
    small = chunk_document(
        doc,
        embedder.token_offsets,
        chunk_size=200,
        chunk_overlap=40,
        max_chars=300,
        piece_chars=999,
    )
    assert max(len(c.text) for c in small) <= 300 and len(small) >= len(text) // 300


def test_the_cap_keeps_prose_chunks_and_shortens_long_windows(embedder) -> None:
    prose = SourceDocument("prose", " ".join(f"word{i} is here." for i in range(600)))
    kw = {"chunk_size": 50, "chunk_overlap": 10}
    plain = chunk_document(prose, embedder.token_offsets, **kw, max_chars=10**9)
    assert chunk_document(prose, embedder.token_offsets, **kw) == plain  # cap not reached
    capped = chunk_document(prose, embedder.token_offsets, **kw, max_chars=60)
    assert max(len(c.text) for c in capped) <= 60 and len(capped) > len(plain)
    # every word is still in some chunk
    assert all(f"word{i} " in " ".join(c.text + " " for c in capped) for i in range(600))
