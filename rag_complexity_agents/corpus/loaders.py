"""Reading PDF, HTML, Word (.docx) and CSV files as documents, each part with its place.

A file is cut into the parts a citation can name: a PDF into its pages (metadata ``page``,
1-based), an HTML page into the sections its headings open (``section``: the heading path,
e.g. ``"Danube › Delta"``), a CSV file into its rows (``row``: the 1-based data row, the
header not counted); a Word file is one part. Every part's metadata also holds ``path`` (the
file relative to the indexed root), and its id is that path with the place appended
(``report.pdf#page=3``), so chunk ids stay stable across runs.

PDF, Word and CSV files are read by LangChain's community document loaders (``PyPDFLoader``,
``Docx2txtLoader``, ``CSVLoader``); HTML is read with BeautifulSoup, the parser behind
``BSHTMLLoader``, because that loader flattens a page into one text and loses its headings.
The libraries are the ``documents`` extra and are imported only when such a file is met; a
missing one, or a file the parser cannot read (a damaged or encrypted PDF, a broken .docx),
is one error line naming the file. Plain text, Markdown and JSONL files are read by
:mod:`.documents` itself.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CorpusError, MissingDependency

if TYPE_CHECKING:
    from bs4 import BeautifulSoup

DOCUMENTS_EXTRA = "pip install 'rag-complexity-agents[documents]'"
"""The command that installs the loaders of PDF, HTML, Word and CSV files."""

#: Suffix → (kind named in messages, modules its loader needs).
_KINDS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    ".pdf": ("PDF", ("langchain_community", "pypdf")),
    ".html": ("HTML", ("bs4",)),
    ".htm": ("HTML", ("bs4",)),
    ".docx": ("Word", ("langchain_community", "docx2txt")),
    ".csv": ("CSV", ("langchain_community",)),
}
LOADER_SUFFIXES = frozenset(_KINDS)
"""Suffixes of the files this module reads."""

_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
#: Elements whose content is no text of the page.
_HIDDEN = ("head", "script", "style", "noscript", "template", "svg")
#: Elements that start a new line of text.
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
        "figcaption", "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p",
        "pre", "section", "table", "td", "th", "tr", "ul",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FilePart:
    """One part of a file (a page, section, row, or the whole file) before chunking."""

    id: str
    text: str
    title: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _require(path: Path, kind: str, modules: tuple[str, ...]) -> None:
    """MissingDependency naming the extra when a module the loader needs is not installed."""
    for module in modules:
        try:
            with warnings.catch_warnings():  # langchain-community warns on import
                warnings.simplefilter("ignore", DeprecationWarning)
                importlib.import_module(module)
        except ImportError as exc:
            raise MissingDependency(
                f"{path}: reading {kind} files needs {module.split('.')[0]}, which is not "
                f"installed: {DOCUMENTS_EXTRA}"
            ) from exc


def _reason(exc: BaseException) -> str:
    """The innermost cause of ``exc`` as one short line (loaders wrap the parser's error)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _clean(text: str) -> str:
    """``text`` without NUL characters and with what UTF-8 cannot encode replaced."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


@contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """pypdf logs every repaired defect of a PDF; only errors are worth a line."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _pdf_pages(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based page number, text) of every page, through ``PyPDFLoader``."""
    from langchain_community.document_loaders.pdf import PyPDFLoader

    with _quiet_pypdf():
        pages = list(PyPDFLoader(str(path)).lazy_load())
    for number, page in enumerate(pages, start=1):
        yield int(page.metadata.get("page", number - 1)) + 1, page.page_content


def _docx_text(path: Path) -> str:
    """The text of a Word file, through ``Docx2txtLoader``."""
    from langchain_community.document_loaders.word_document import Docx2txtLoader

    return "\n\n".join(doc.page_content for doc in Docx2txtLoader(str(path)).lazy_load())


def _csv_rows(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based data row, ``"column: value"`` lines) of every row, through ``CSVLoader``;
    read as a stream, so a long file is not held in memory."""
    from langchain_community.document_loaders.csv_loader import CSVLoader

    for number, row in enumerate(CSVLoader(str(path), encoding="utf-8-sig").lazy_load(), 1):
        yield int(row.metadata.get("row", number - 1)) + 1, row.page_content


def _tidy(text: str) -> str:
    """Whitespace runs within a line made one space; blank lines dropped."""
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _html_title(soup: BeautifulSoup) -> str:
    return soup.title.get_text(" ", strip=True) if soup.title else ""


def _html_sections(soup: BeautifulSoup) -> Iterator[tuple[str, str]]:
    """(heading path, text) of every section of a page: the text before the first heading
    (path ``""``) and the text from each heading to the next."""
    from bs4.element import NavigableString, Tag

    for hidden in soup(list(_HIDDEN)):
        hidden.decompose()
    trail: list[tuple[int, str]] = []  # (level, heading) of the headings above this point
    parts: list[str] = []
    for node in soup.descendants:
        if isinstance(node, Tag) and node.name in _HEADINGS:
            yield " › ".join(h for _, h in trail), _tidy("".join(parts))
            heading = node.get_text(" ", strip=True)
            level = int(node.name[1])
            trail = [(lv, h) for lv, h in trail if lv < level]
            if heading:
                trail.append((level, heading))
            parts = [heading, "\n"]
        elif isinstance(node, Tag) and node.name in _BLOCKS:
            parts.append("\n")
        elif type(node) is NavigableString and not any(p.name in _HEADINGS for p in node.parents):
            parts.append(str(node))
    yield " › ".join(h for _, h in trail), _tidy("".join(parts))


def _html_parts(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """The page title and its sections (BeautifulSoup with Python's own HTML parser; the
    encoding is read from the page or guessed)."""
    from bs4 import BeautifulSoup

    with open(path, "rb") as handle:
        soup = BeautifulSoup(handle, "html.parser")
    return _html_title(soup), list(_html_sections(soup))


def _parts(path: Path, rel: str, title: str) -> Iterator[FilePart]:
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        for page, text in _pdf_pages(path):
            yield FilePart(f"{rel}#page={page}", text, title, {"path": rel, "page": page})
    elif suffix == ".docx":
        yield FilePart(rel, _docx_text(path), title, {"path": rel})
    elif suffix == ".csv":
        for row, text in _csv_rows(path):
            yield FilePart(f"{rel}#row={row}", text, title, {"path": rel, "row": row})
    else:
        page_title, sections = _html_parts(path)
        for number, (section, text) in enumerate(sections):
            metadata = {"path": rel, "section": section} if section else {"path": rel}
            yield FilePart(f"{rel}#section={number}", text, page_title or title, metadata)


def load_file(path: Path, rel: str) -> Iterator[FilePart]:
    """The parts of the PDF, HTML, Word or CSV file ``path`` that hold text (``rel``: its
    path relative to the indexed root). MissingDependency when the ``documents`` extra is
    missing; CorpusError naming the file when it cannot be read. A file without any text
    (e.g. a scanned PDF) yields nothing and is logged."""
    kind, modules = _KINDS[path.suffix.lower()]
    _require(path, kind, modules)
    title = path.stem.replace("_", " ").replace("-", " ")
    found = False
    try:
        for part in _parts(path, rel, title):
            text = _clean(part.text).strip()
            if text:
                found = True
                yield FilePart(part.id, text, _clean(part.title), part.metadata)
    except (CorpusError, MissingDependency):
        raise
    except Exception as exc:
        hint = "; is it damaged or encrypted?" if kind == "PDF" else ""
        if isinstance(exc.__cause__ or exc, UnicodeDecodeError):
            hint = "; save it as UTF-8"
        raise CorpusError(f"{path}: cannot read this {kind} file ({_reason(exc)}){hint}") from exc
    if not found:
        logging.getLogger(__name__).warning("%s holds no text to index (a scanned file?)", path)
