"""Loading source documents (.txt, .md, JSONL records) and cutting them into token chunks.

Files are read as streams: a text file is decoded block by block and tokenised in pieces that
end at whitespace, and a JSONL file is read line by line; :func:`iter_chunks` yields the chunks
one at a time, so memory does not grow with the size of a file.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorpusError
from ..types import Chunk

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
JSONL_SUFFIXES = frozenset({".jsonl"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | JSONL_SUFFIXES
#: Bytes read from a file at a time.
BLOCK_BYTES = 1 << 18
#: Characters tokenised at a time (pieces end at whitespace, see :func:`text_pieces`).
PIECE_CHARS = 1 << 16
#: A piece is cut mid-word when its last this many characters hold no whitespace.
_MAX_WORD_CHARS = 1000
_BINARY_PROBE = 8192


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document before chunking; ``id`` is the JSONL id or the path relative to the root."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def blocks(self) -> Iterator[str]:
        """The text as a stream of blocks (here: one block)."""
        yield self.text


@dataclass(frozen=True, slots=True)
class TextFileDocument:
    """A UTF-8 text file, read only when used: :meth:`blocks` streams it, ``text`` reads it
    whole. ``id`` is the path relative to the indexed root."""

    id: str
    path: Path
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(self.blocks())

    def blocks(self, block_bytes: int = BLOCK_BYTES) -> Iterator[str]:
        """The decoded text, block by block (CorpusError for a binary or non-UTF-8 file)."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        consumed = 0
        first = True
        with open(self.path, "rb") as handle:
            while True:
                data = handle.read(block_bytes)
                if first and b"\x00" in data[:_BINARY_PROBE]:
                    raise CorpusError(
                        f"{self.path} looks like a binary file (NUL bytes); only UTF-8 text is read"
                    )
                pending = len(decoder.getstate()[0])
                try:
                    text = decoder.decode(data, final=not data)
                except UnicodeDecodeError as exc:
                    raise _not_utf8(self.path, consumed - pending + exc.start) from exc
                consumed += len(data)
                if first:
                    text = text.removeprefix("\ufeff")
                    first = False
                if text:
                    yield text
                if not data:
                    return


Document = SourceDocument | TextFileDocument


def _not_utf8(path: Path, byte: int) -> CorpusError:
    return CorpusError(
        f"{path} is not valid UTF-8 (byte {byte}); convert it, e.g. "
        f"iconv -f latin1 -t utf-8 {path.name}"
    )


def _jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, decoded line) of a UTF-8 file, read line by line."""
    consumed = 0
    with open(path, "rb") as handle:
        if b"\x00" in handle.read(_BINARY_PROBE):
            raise CorpusError(
                f"{path} looks like a binary file (NUL bytes); only UTF-8 text is read"
            )
        handle.seek(0)
        for line_no, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(path, consumed + exc.start) from exc
            consumed += len(raw)
            yield line_no, line.removeprefix("\ufeff") if line_no == 1 else line


def _jsonl_records(path: Path) -> Iterator[SourceDocument]:
    for line_no, line in _jsonl_lines(path):
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


def _files_under(root: Path) -> list[Path]:
    """Supported files below ``root``, sorted. Symbolic links are followed only when they
    lead to a place inside ``root``; the others are skipped with a logged note."""
    real_root = root.resolve()
    files = []
    for dirpath, dirnames, filenames in os.walk(root):  # does not descend into linked dirs
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = here / name
            if path.is_symlink() and not path.resolve().is_relative_to(real_root):
                log.warning(
                    "skipped %s: a symbolic link to %s, outside %s", path, path.resolve(), root
                )
            elif name in filenames and path.suffix.lower() in SUPPORTED_SUFFIXES and path.is_file():
                files.append(path)
    return sorted(files)


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Yield the documents under ``path`` (a supported file or a directory, recursively).

    Raises CorpusError for a missing path, a directory without supported files, a binary or
    non-UTF-8 file, or a malformed JSONL line, naming the file (and line). Text files are
    checked by a streamed pass and yielded as :class:`TextFileDocument` (read again, as a
    stream, when chunked); symbolic links inside a directory
    that lead outside it are skipped with a note.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise CorpusError(f"{root} does not exist")
    if root.is_file():
        files, base = [root], root.parent
    else:
        files = _files_under(root)
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
            rel = file.relative_to(base).as_posix()
            title = file.stem.replace("_", " ").replace("-", " ")
            doc = TextFileDocument(id=rel, path=file, title=title, metadata={"path": rel})
            for _ in doc.blocks():  # a streamed pass that fails early on binary / non-UTF-8
                pass
            yield doc
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


def _cut(text: str, start: int, stop: int) -> int:
    """The position after the last whitespace in ``text[start:stop]`` (``stop`` when the
    last :data:`_MAX_WORD_CHARS` characters hold none)."""
    for i in range(stop - 1, max(start, stop - _MAX_WORD_CHARS) - 1, -1):
        if text[i].isspace():
            return i + 1
    return stop


def text_pieces(blocks: Iterable[str], size: int = PIECE_CHARS) -> Iterator[str]:
    """The concatenated ``blocks`` re-cut into pieces of at most about ``size`` characters,
    each ending at whitespace where possible, so that tokenising piece by piece gives the
    tokens of the whole text (tokenizers split words at whitespace)."""
    carry = ""
    for block in blocks:
        text = carry + block
        start = 0
        while len(text) - start > size:
            end = _cut(text, start, start + size)
            yield text[start:end]
            start = end
        carry = text[start:]
    if carry:
        yield carry


def _window_texts(
    pieces: Iterable[str], token_offsets: OffsetsFn, chunk_size: int, step: int
) -> Iterator[str]:
    """The text of every window of ``chunk_size`` tokens, ``step`` tokens apart, over the
    concatenated ``pieces``; the last window holds the remaining tokens. Only the text from the
    current window on is kept. A text without tokens is one window."""
    buffer = ""
    offsets: list[tuple[int, int]] = []
    first = 0  # index in ``offsets`` of the current window's first token
    for piece in pieces:
        if first:
            cut = offsets[first][0]
            buffer = buffer[cut:]
            offsets = [(a - cut, b - cut) for a, b in offsets[first:]]
            first = 0
        base = len(buffer)
        buffer += piece
        offsets.extend((a + base, b + base) for a, b in token_offsets(piece))
        while len(offsets) - first > chunk_size:  # more tokens follow: not the last window
            yield buffer[offsets[first][0] : offsets[first + chunk_size - 1][1]]
            first += step
    if offsets:
        yield buffer[offsets[first][0] : offsets[-1][1]]
    else:
        yield buffer


def iter_chunks(
    doc: Document,
    token_offsets: OffsetsFn,
    *,
    chunk_size: int,
    chunk_overlap: int,
    piece_chars: int = PIECE_CHARS,
) -> Iterator[Chunk]:
    """The windows of ``chunk_size`` tokens overlapping by ``chunk_overlap`` that ``doc`` is
    cut into, one at a time.

    ``token_offsets`` maps text to the character span of each token (from the embedding
    model's tokenizer), so chunks are exact substrings of the source and the token limits
    are the ones the encoder sees. The document is read and tokenised as a stream of pieces
    of about ``piece_chars`` characters (the chunks do not depend on it), so memory does not
    grow with its size.
    """
    if chunk_overlap >= chunk_size:
        raise CorpusError("chunk_overlap must be smaller than chunk_size")
    pieces = text_pieces(doc.blocks(), piece_chars)
    texts = _window_texts(pieces, token_offsets, chunk_size, chunk_size - chunk_overlap)
    for position, text in enumerate(texts):
        piece = text.strip()
        if not piece:
            continue
        metadata = {**doc.metadata, "doc_id": doc.id, "position": position}
        yield Chunk(id=chunk_id(doc.id, piece), text=piece, title=doc.title, metadata=metadata)


def chunk_document(
    doc: Document,
    token_offsets: OffsetsFn,
    *,
    chunk_size: int,
    chunk_overlap: int,
    piece_chars: int = PIECE_CHARS,
) -> list[Chunk]:
    """All chunks of ``doc`` (:func:`iter_chunks`) as a list."""
    return list(
        iter_chunks(
            doc,
            token_offsets,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            piece_chars=piece_chars,
        )
    )


#: GRADE's RAG evaluation setting (Lee et al., §4.1): chunks of 128–256 tokens, 50 overlapping.
GRADE_CHUNK_SIZE = 256
GRADE_CHUNK_OVERLAP = 50
GRADE_CHUNK_RANGE = (128, 256)


def chunk_grade_setting(
    doc: Document,
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
