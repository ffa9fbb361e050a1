"""Loading source documents (.txt, .md, JSONL records) and cutting them into token chunks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorpusError
from ..types import Chunk

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
JSONL_SUFFIXES = frozenset({".jsonl"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | JSONL_SUFFIXES


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document before chunking; ``id`` is the JSONL id or the path relative to the root."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _read_utf8(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise CorpusError(f"{path} looks like a binary file (NUL bytes); only UTF-8 text is read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{path} is not valid UTF-8 (byte {exc.start}); convert it, e.g. "
            f"iconv -f latin1 -t utf-8 {path.name}"
        ) from exc


def _jsonl_records(path: Path) -> Iterator[SourceDocument]:
    for line_no, line in enumerate(_read_utf8(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise CorpusError(f"{path}:{line_no}: expected a JSON object")
        text = record.get("text")
        if not isinstance(text, str):
            raise CorpusError(f"{path}:{line_no}: record has no string field 'text'")
        record_id = record.get("id", f"{path.name}:{line_no}")
        metadata = dict(record.get("metadata") or {})
        metadata.update(
            {k: v for k, v in record.items() if k not in {"id", "title", "text", "metadata"}}
        )
        yield SourceDocument(
            id=str(record_id), text=text, title=str(record.get("title") or ""), metadata=metadata
        )


def iter_documents(path: str | Path) -> Iterator[SourceDocument]:
    """Yield the documents under ``path`` (a supported file or a directory, recursively).

    Raises CorpusError for a missing path, a directory without supported files, a binary or
    non-UTF-8 file, or a malformed JSONL line, naming the file (and line).
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise CorpusError(f"{root} does not exist")
    if root.is_file():
        files, base = [root], root.parent
    else:
        files = sorted(
            p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES
        )
        base = root
        if not files:
            raise CorpusError(
                f"{root} contains no {', '.join(sorted(SUPPORTED_SUFFIXES))} files to index"
            )
    for file in files:
        suffix = file.suffix.lower()
        if suffix in JSONL_SUFFIXES:
            yield from _jsonl_records(file)
        elif suffix in TEXT_SUFFIXES:
            text = _read_utf8(file)
            rel = file.relative_to(base).as_posix()
            title = file.stem.replace("_", " ").replace("-", " ")
            yield SourceDocument(id=rel, text=text, title=title, metadata={"path": rel})
        else:
            raise CorpusError(
                f"{file}: unsupported file type {suffix!r}; use one of "
                f"{', '.join(sorted(SUPPORTED_SUFFIXES))}"
            )


def chunk_id(doc_id: str, text: str) -> str:
    """Stable content-hash id: the same text of the same document always gets the same id."""
    digest = hashlib.sha256(f"{doc_id}\x00{text}".encode()).hexdigest()
    return digest[:24]


OffsetsFn = Callable[[str], Sequence[tuple[int, int]]]


def chunk_document(
    doc: SourceDocument, token_offsets: OffsetsFn, *, chunk_size: int, chunk_overlap: int
) -> list[Chunk]:
    """Cut ``doc`` into windows of ``chunk_size`` tokens overlapping by ``chunk_overlap``.

    ``token_offsets`` maps text to the character span of each token (from the embedding
    model's tokenizer), so chunks are exact substrings of the source and the token limits
    are the ones the encoder sees.
    """
    if chunk_overlap >= chunk_size:
        raise CorpusError("chunk_overlap must be smaller than chunk_size")
    text = doc.text.strip()
    if not text:
        return []
    offsets = token_offsets(text)
    step = chunk_size - chunk_overlap
    windows = [(0, len(text))] if not offsets else []
    for start in range(0, len(offsets), step):
        window = offsets[start : start + chunk_size]
        windows.append((window[0][0], window[-1][1]))
        if start + chunk_size >= len(offsets):
            break
    chunks = []
    for position, (begin, end) in enumerate(windows):
        piece = text[begin:end].strip()
        if not piece:
            continue
        metadata = {**doc.metadata, "doc_id": doc.id, "position": position}
        chunks.append(
            Chunk(id=chunk_id(doc.id, piece), text=piece, title=doc.title, metadata=metadata)
        )
    return chunks


#: GRADE's RAG evaluation setting (Lee et al., §4.1): chunks of 128–256 tokens, 50 overlapping.
GRADE_CHUNK_SIZE = 256
GRADE_CHUNK_OVERLAP = 50
GRADE_CHUNK_RANGE = (128, 256)


def chunk_grade_setting(
    doc: SourceDocument,
    token_offsets: OffsetsFn,
    *,
    chunk_size: int = GRADE_CHUNK_SIZE,
    chunk_overlap: int = GRADE_CHUNK_OVERLAP,
) -> list[Chunk]:
    """:func:`chunk_document` with GRADE's evaluation preset (256 tokens, 50 overlapping).

    ``chunk_size`` must lie in the paper's 128–256 token range; the collection defaults
    (``corpus.chunk_size``) are not affected. Use it with the embedder's tokenizer, e.g.
    ``chunk_grade_setting(doc, embedder.token_offsets)``, or set
    ``corpus.chunk_size=256, corpus.chunk_overlap=50`` to index a whole collection this way.
    """
    low, high = GRADE_CHUNK_RANGE
    if not low <= chunk_size <= high:
        raise CorpusError(
            f"GRADE's evaluation chunks are {low}-{high} tokens long; got chunk_size={chunk_size}"
        )
    return chunk_document(doc, token_offsets, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
