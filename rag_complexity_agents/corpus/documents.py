"""Loading source documents (.txt, .md, JSONL records; PDF, HTML, Word and CSV files through
:mod:`.loaders`) and cutting them into token chunks.

Files are read as streams: a text file is decoded block by block and tokenised in pieces that
end at whitespace, and a JSONL file is read line by line; :func:`iter_chunks` yields the chunks
one at a time, so memory does not grow with the size of a file. A chunk never holds more than a
set number of characters, so text without whitespace (one huge token) is cut by characters.

Every record is checked against what the store accepts (:func:`metadata_problem`: metadata keys,
value types, nesting depth, text that UTF-8 can encode) while it is read, so a bad record stops
``rca index`` with one line naming its file and line before anything is written.
"""

from __future__ import annotations

import bisect
import codecs
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.sections import CHUNK_CHARS_PER_TOKEN
from ..errors import CorpusError
from ..types import Chunk
from .loaders import LOADER_SUFFIXES, load_file

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
JSONL_SUFFIXES = frozenset({".jsonl"})
#: PDF, HTML, Word and CSV files, read by :mod:`.loaders` (the ``documents`` extra).
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | JSONL_SUFFIXES | LOADER_SUFFIXES
#: Bytes read from a file at a time.
BLOCK_BYTES = 1 << 18
#: Characters tokenised at a time (pieces end at whitespace, see :func:`text_pieces`).
PIECE_CHARS = 1 << 16
#: A piece is cut mid-word when its last this many characters hold no whitespace.
_MAX_WORD_CHARS = 1000
_BINARY_PROBE = 8192
#: Deepest nesting of lists / objects a metadata value may have (a scalar has depth 0).
MAX_METADATA_DEPTH = 16
#: Metadata keys that start with one of these are reserved by Chroma's query language.
_RESERVED_KEY_PREFIXES = ("#", "$")


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


def _unencodable(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (JSON's ``"\\ud800"``), which UTF-8 cannot hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _depth_problem(value: Any) -> str | None:
    """Why a metadata value cannot be stored (None: it can): nesting deeper than
    :data:`MAX_METADATA_DEPTH`, a type JSON has not, or a string UTF-8 cannot encode. Walked
    without recursion, so any depth is answered."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _unencodable(item):
                return "holds a lone surrogate (\\ud800-\\udfff), which UTF-8 cannot encode"
        elif isinstance(item, dict | list):
            if depth >= MAX_METADATA_DEPTH:
                return f"is nested more than {MAX_METADATA_DEPTH} levels deep"
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str) and _unencodable(key):
                    return "has a key with a lone surrogate, which UTF-8 cannot encode"
                stack.append((child, depth + 1))
        elif item is not None and not isinstance(item, bool | int | float):
            return f"has a value of type {type(item).__name__}"
    return None


def metadata_problem(metadata: Any) -> str | None:
    """Why ``metadata`` cannot be stored with a chunk (None: it can). Keys must be non-empty
    strings not starting with ``#`` or ``$`` (Chroma rejects them); values are scalars or
    JSON lists / objects nested at most :data:`MAX_METADATA_DEPTH` levels (stored as JSON
    strings in Chroma); strings must be valid Unicode."""
    if not isinstance(metadata, Mapping):
        return f"metadata must be a JSON object, not {type(metadata).__name__}"
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            return f"metadata key {key!r} is empty or not a string"
        if key.startswith(_RESERVED_KEY_PREFIXES):
            return f"metadata key {key!r} starts with '#' or '$' (reserved by Chroma)"
        if _unencodable(key):
            return f"metadata key {key!r} holds a lone surrogate, which UTF-8 cannot encode"
        problem = _depth_problem(value)
        if problem:
            return f"metadata value of {key!r} {problem}"
    return None


def document_problem(doc: SourceDocument | TextFileDocument) -> str | None:
    """Why ``doc``'s id, title or metadata cannot be stored (None: they can); the text of a
    :class:`SourceDocument` is checked too (a text file is valid UTF-8 once decoded)."""
    fields = [("id", doc.id), ("title", doc.title)]
    if isinstance(doc, SourceDocument):
        fields.append(("text", doc.text))
    for name, value in fields:
        if not isinstance(value, str):
            return f"{name} must be a string, not {type(value).__name__}"
        if _unencodable(value):
            return f"{name} holds a lone surrogate (\\ud800-\\udfff), which UTF-8 cannot encode"
    return metadata_problem(doc.metadata)


def _jsonl_record(path: Path, line_no: int, line: str) -> SourceDocument:
    """The document of one non-blank JSONL line; CorpusError naming file and line when the
    line is not a storable record."""
    where = f"{path}:{line_no}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{where}: not valid JSON ({exc.msg})") from exc
    except RecursionError:
        raise CorpusError(f"{where}: JSON nested too deeply to read") from None
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object")
    text = record.get("text")
    if not isinstance(text, str):
        raise CorpusError(f"{where}: record has no string field 'text'")
    nested = record.get("metadata")
    if nested is not None and not isinstance(nested, dict):
        raise CorpusError(f"{where}: 'metadata' must be a JSON object, not {type(nested).__name__}")
    metadata = dict(nested or {})
    metadata.update(
        {k: v for k, v in record.items() if k not in {"id", "title", "text", "metadata"}}
    )
    record_id = record.get("id", f"{path.name}:{line_no}")
    if isinstance(record_id, dict | list):
        raise CorpusError(f"{where}: 'id' must be a string or a number")
    doc = SourceDocument(
        id=str(record_id), text=text, title=str(record.get("title") or ""), metadata=metadata
    )
    problem = document_problem(doc)
    if problem:
        raise CorpusError(f"{where}: {problem}")
    return doc


def _jsonl_records(path: Path) -> Iterator[SourceDocument]:
    for line_no, line in _jsonl_lines(path):
        if line.strip():
            yield _jsonl_record(path, line_no, line)


def _resolved(path: Path) -> Path:
    """``path`` with its symbolic links resolved; CorpusError for a link loop."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:  # Python raises RuntimeError for a loop
        raise CorpusError(f"{path}: a symbolic link loop; remove or fix the link") from exc


def _files_under(root: Path) -> list[Path]:
    """Supported files below ``root``, sorted. Symbolic links are followed only when they
    lead to a place inside ``root``; the others are skipped with a logged note, and a link
    loop is a CorpusError naming it."""
    real_root = _resolved(root)
    files = []
    for dirpath, dirnames, filenames in os.walk(root):  # does not descend into linked dirs
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = here / name
            if path.is_symlink() and not (target := _resolved(path)).is_relative_to(real_root):
                log.warning("skipped %s: a symbolic link to %s, outside %s", path, target, root)
            elif name in filenames and path.suffix.lower() in SUPPORTED_SUFFIXES and path.is_file():
                files.append(path)
    return sorted(files)


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Yield the documents under ``path`` (a supported file or a directory, recursively).

    Raises CorpusError for a missing path, a directory without supported files, a symbolic
    link loop, a binary or non-UTF-8 file, or a JSONL line that is malformed or not storable
    (:func:`document_problem`), naming the file (and line). Text files are
    checked by a streamed pass and yielded as :class:`TextFileDocument` (read again, as a
    stream, when chunked); symbolic links inside a directory
    that lead outside it are skipped with a note.
    """
    root = Path(path).expanduser()
    if not root.exists():
        if root.is_symlink():
            _resolved(root)  # a loop is named as one
            raise CorpusError(f"{root} is a symbolic link to a missing file")
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
        elif suffix in LOADER_SUFFIXES:
            for part in load_file(file, file.relative_to(base).as_posix()):
                yield SourceDocument(part.id, part.text, part.title, part.metadata)
        else:
            raise CorpusError(
                f"{file}: unsupported file type {suffix!r}; use one of "
                f"{', '.join(sorted(SUPPORTED_SUFFIXES))}"
            )


def load_documents(paths: str | Path | Iterable[str | Path]) -> list[Document]:
    """The documents of ``paths`` (files or directories, see :func:`iter_documents`), all read
    and checked, e.g. ``CorpusStore.open_or_create(name, config).ingest(load_documents(
    ["report.pdf", "notes/"]))``. A PDF page, an HTML section and a CSV row are one document
    each, their place in the metadata (``page``, ``section``, ``row``)."""
    if isinstance(paths, str | Path):
        paths = [paths]
    return [doc for path in paths for doc in iter_documents(path)]


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


def _capped_spans(
    spans: Iterable[tuple[int, int]], base: int, max_chars: int
) -> Iterator[tuple[int, int]]:
    """``spans`` shifted by ``base``, each longer than ``max_chars`` cut into spans of at most
    ``max_chars`` characters (a tokenizer keeps a run without whitespace as one token)."""
    for a, b in spans:
        a, b = a + base, b + base
        if b - a <= max_chars:
            yield a, b
        else:
            yield from ((s, min(s + max_chars, b)) for s in range(a, b, max_chars))


def _window_end(offsets: list[tuple[int, int]], first: int, chunk_size: int, max_chars: int) -> int:
    """The index after the last token of the window that starts at token ``first``: at most
    ``chunk_size`` tokens spanning at most ``max_chars`` characters, and at least one token."""
    limit = min(len(offsets), first + chunk_size)
    over = bisect.bisect_right(
        offsets, offsets[first][0] + max_chars, lo=first + 1, hi=limit, key=lambda span: span[1]
    )
    return max(first + 1, over)


def _window_texts(
    pieces: Iterable[str],
    token_offsets: OffsetsFn,
    chunk_size: int,
    chunk_overlap: int,
    max_chars: int,
) -> Iterator[str]:
    """The text of every window of ``chunk_size`` tokens overlapping by ``chunk_overlap`` over
    the concatenated ``pieces``; the last window holds the remaining tokens. A window that
    would span more than ``max_chars`` characters ends earlier, and the next one overlaps it
    by the same share of its tokens. Only the text from the current window on is kept. A
    text without tokens is one window."""
    buffer = ""
    offsets: list[tuple[int, int]] = []
    first = 0  # index in ``offsets`` of the current window's first token

    def step(width: int) -> int:  # full windows: chunk_size - chunk_overlap tokens
        return max(1, width - width * chunk_overlap // chunk_size)

    for piece in pieces:
        if first:
            cut = offsets[first][0]
            buffer = buffer[cut:]
            offsets = [(a - cut, b - cut) for a, b in offsets[first:]]
            first = 0
        elif not offsets:  # text before the first token is in no window but the fallback
            buffer = buffer[:max_chars]
        base = len(buffer)
        buffer += piece
        offsets.extend(_capped_spans(token_offsets(piece), base, max_chars))
        while offsets and (end := _window_end(offsets, first, chunk_size, max_chars)) < len(
            offsets
        ):  # more tokens follow: the window is complete and not the last
            yield buffer[offsets[first][0] : offsets[end - 1][1]]
            first += step(end - first)
    if not offsets:
        yield buffer[:max_chars]  # no tokens (e.g. only whitespace): stripped by the caller
        return
    while True:  # the remaining tokens: one window unless they span more than max_chars
        end = _window_end(offsets, first, chunk_size, max_chars)
        yield buffer[offsets[first][0] : offsets[end - 1][1]]
        if end == len(offsets):
            return
        first += step(end - first)


def iter_chunks(
    doc: Document,
    token_offsets: OffsetsFn,
    *,
    chunk_size: int,
    chunk_overlap: int,
    max_chars: int | None = None,
    piece_chars: int = PIECE_CHARS,
) -> Iterator[Chunk]:
    """The windows of ``chunk_size`` tokens overlapping by ``chunk_overlap`` that ``doc`` is
    cut into, one at a time; no window holds more than ``max_chars`` characters (default:
    :data:`~rag_complexity_agents.config.sections.CHUNK_CHARS_PER_TOKEN` × ``chunk_size``), so
    text without whitespace is cut by characters.

    ``token_offsets`` maps text to the character span of each token (from the embedding
    model's tokenizer), so chunks are exact substrings of the source and the token limits
    are the ones the encoder sees. The document is read and tokenised as a stream of pieces
    of about ``piece_chars`` characters (the chunks do not depend on it), so memory does not
    grow with its size.
    """
    if chunk_overlap >= chunk_size:
        raise CorpusError("chunk_overlap must be smaller than chunk_size")
    cap = max_chars or CHUNK_CHARS_PER_TOKEN * chunk_size
    pieces = text_pieces(doc.blocks(), piece_chars)
    texts = _window_texts(pieces, token_offsets, chunk_size, chunk_overlap, cap)
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
    max_chars: int | None = None,
    piece_chars: int = PIECE_CHARS,
) -> list[Chunk]:
    """All chunks of ``doc`` (:func:`iter_chunks`) as a list."""
    return list(
        iter_chunks(
            doc,
            token_offsets,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            max_chars=max_chars,
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
