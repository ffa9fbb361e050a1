"""PDF, HTML, Word, CSV, Markdown and text files: written for real, indexed into a real
collection (Chroma on disk, the packaged MiniLM) and retrieved with their page, section or row
in the metadata, the trace and the printed citation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_complexity_agents.cli import app
from rag_complexity_agents.cli.render import print_trace
from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.documents import iter_documents, load_documents
from rag_complexity_agents.corpus.store import CorpusStore, list_collections
from rag_complexity_agents.errors import CorpusError, MissingDependency
from rag_complexity_agents.retrieval.first_stage import BM25FirstStage, DenseFirstStage

runner = CliRunner()

HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Rivers of Europe</title>
<style>p { color: red; }</style></head>
<body><p>An overview of <b>three</b> rivers.</p>
<h1>Danube</h1><p>The Danube flows through Vienna and Budapest.</p>
<h2>Delta</h2><p>The Danube delta lies in Romania and hosts pelicans.</p>
<h1>Rhine</h1><p>The Rhine rises in the Swiss Alps.</p>
<script>var ignored = "script text";</script>
</body></html>
"""


def write_pdf(path: Path, pages: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def write_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Emma", level=1)
    document.add_paragraph("Emma is a novel by Jane Austen published in 1815.")
    document.save(str(path))


def make_files(root: Path) -> Path:
    """One file of every supported kind under ``root`` (a subdirectory holds two)."""
    root.mkdir(parents=True, exist_ok=True)
    write_pdf(
        root / "glacier_report.pdf",
        [
            "The Aletsch Glacier is the largest glacier in the Alps.",
            "Page two: the glacier lost about one kilometre of length since 1980.",
        ],
    )
    (root / "rivers.html").write_text(HTML, encoding="utf-8")
    write_docx(root / "novel.docx")
    (root / "cities.csv").write_text(
        "city,country,river\nTokyo,Japan,Sumida\nVienna,Austria,Danube\nCairo,Egypt,Nile\n",
        encoding="utf-8",
    )
    sub = root / "notes"
    sub.mkdir()
    (sub / "film.md").write_text(
        "# Spirited Away\n\nSpirited Away is a 2001 film by Hayao Miyazaki.\n", encoding="utf-8"
    )
    (sub / "mountain.txt").write_text("Mount Fuji is the highest mountain in Japan.\n")
    return root


def test_every_kind_is_read_with_its_place(tmp_path: Path) -> None:
    docs = {d.id: d for d in iter_documents(make_files(tmp_path / "docs"))}
    assert sorted(docs) == [
        "cities.csv#row=1",
        "cities.csv#row=2",
        "cities.csv#row=3",
        "glacier_report.pdf#page=1",
        "glacier_report.pdf#page=2",
        "notes/film.md",
        "notes/mountain.txt",
        "novel.docx",
        "rivers.html#section=0",
        "rivers.html#section=1",
        "rivers.html#section=2",
        "rivers.html#section=3",
    ]
    page2 = docs["glacier_report.pdf#page=2"]
    assert page2.title == "glacier report" and "kilometre" in page2.text
    assert dict(page2.metadata) == {"path": "glacier_report.pdf", "page": 2}
    assert dict(docs["cities.csv#row=2"].metadata) == {"path": "cities.csv", "row": 2}
    assert docs["cities.csv#row=2"].text == "city: Vienna\ncountry: Austria\nriver: Danube"
    intro, danube, delta, rhine = (docs[f"rivers.html#section={i}"] for i in range(4))
    assert intro.text == "An overview of three rivers." and "section" not in intro.metadata
    assert (danube.metadata["section"], delta.metadata["section"]) == ("Danube", "Danube › Delta")
    assert delta.text == "Delta\nThe Danube delta lies in Romania and hosts pelicans."
    assert rhine.metadata["section"] == "Rhine" and "script" not in rhine.text
    assert {d.title for d in (intro, delta)} == {"Rivers of Europe"}
    assert "Jane Austen" in docs["novel.docx"].text
    assert docs["notes/film.md"].metadata == {"path": "notes/film.md"}


def test_indexed_files_are_retrieved_with_page_section_and_row(
    tmp_path: Path, config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    store = CorpusStore.open_or_create("files", config)
    report = store.ingest(load_documents([make_files(tmp_path / "docs")]), progress=False)
    assert (report.documents, report.added) == (12, 12)

    store = CorpusStore.open("files", config)  # what a later `rca ask` reads back
    dense = DenseFirstStage(store)
    (page,) = dense.search("How much length did the glacier lose since 1980?", 1)
    assert page.chunk.metadata["page"] == 2 and page.chunk.metadata["path"] == "glacier_report.pdf"
    assert "kilometre" in page.text and page.chunk.title == "glacier report"
    (section,) = dense.search("Where is the Danube delta with its pelicans?", 1)
    assert section.chunk.metadata["section"] == "Danube › Delta" and "Romania" in section.text
    (row,) = BM25FirstStage(store).search("Cairo Egypt", 1)
    assert row.chunk.metadata["row"] == 3 and "Nile" in row.text
    (novel,) = dense.search("Who wrote the novel Emma?", 1)
    assert novel.chunk.metadata["doc_id"] == "novel.docx" and "Jane Austen" in novel.text

    evidence = [page.to_trace(), section.to_trace(), row.to_trace(), novel.to_trace()]
    assert (evidence[0]["page"], evidence[1]["section"], evidence[2]["row"]) == (
        2,
        "Danube › Delta",
        3,
    )
    assert not {"page", "section", "row"} & set(evidence[3])
    for number, doc in enumerate(evidence):
        doc.update(source="first_stage", score=0.5 - number / 10)
    trace = {
        "steps": [{"index": 0, "sub_question": "q", "retrieval": {"evidence": evidence}}],
        "mer": {"evidence": evidence[:2], "answer": "a"},
    }
    print_trace("q", "a", trace)
    out = capsys.readouterr().out
    assert "[1] glacier report, p. 2 (first stage" in out
    assert "[2] Rivers of Europe, § Danube › Delta (" in out
    assert "[3] cities, row 3 (" in out and "[4] novel (" in out
    assert "evidence (l=None): glacier report, p. 2; Rivers of Europe, § Danube › Delta" in out


def test_a_corrupt_pdf_is_one_line_and_leaves_the_collection_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RCA_CORPUS__HOME", str(home))
    monkeypatch.setenv("RCA_GRAPH__K", "4")
    docs = tmp_path / "docs"
    docs.mkdir()
    write_pdf(docs / "good.pdf", ["Lake Geneva lies between Switzerland and France."])
    (docs / "zz_broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ntrailer\n")

    result = runner.invoke(app, ["index", str(docs), "-c", "files", "-q"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {docs / 'zz_broken.pdf'}: cannot read this PDF file")
    assert list_collections(Config(corpus={"home": home})) == []  # nothing half-written

    good = docs / "good.pdf"
    assert runner.invoke(app, ["index", str(good), "-c", "files", "-q"]).exit_code == 0
    store = CorpusStore.open("files", Config(corpus={"home": home}))
    before = (len(store), store.chroma_count(), [c.id for c in store.chunks])
    (docs / "more.txt").write_text("The Matterhorn is a mountain of the Alps.\n")
    with pytest.raises(CorpusError, match=r"zz_broken\.pdf: cannot read this PDF file"):
        store.ingest(load_documents(docs), progress=False)
    result = runner.invoke(app, ["index", str(docs), "-c", "files", "-q"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    store = CorpusStore.open("files", Config(corpus={"home": home}))
    assert (len(store), store.chroma_count(), [c.id for c in store.chunks]) == before
    assert store.chunks[0].metadata["page"] == 1


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.pdf", b"", "cannot read this PDF file"),
        ("broken.docx", b"PK\x03\x04 not a zip archive", "cannot read this Word file"),
        ("latin.csv", "name\nZürich\n".encode("latin-1"), "save it as UTF-8"),
    ],
)
def test_unreadable_files_are_named_in_one_line(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CorpusError) as caught:
        list(iter_documents(path))
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_a_missing_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_pdf(tmp_path / "a.pdf", ["Some text."])
    (tmp_path / "b.html").write_text(HTML, encoding="utf-8")
    monkeypatch.setitem(sys.modules, "pypdf", None)  # `import pypdf` raises ImportError
    monkeypatch.setitem(sys.modules, "bs4", None)
    for name, module in (("a.pdf", "pypdf"), ("b.html", "bs4")):
        with pytest.raises(MissingDependency) as caught:
            list(iter_documents(tmp_path / name))
        assert f"needs {module}" in str(caught.value)
        assert "pip install 'rag-complexity-agents[documents]'" in str(caught.value)


def test_a_pdf_without_text_yields_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_pdf(tmp_path / "scan.pdf", [""])
    assert list(iter_documents(tmp_path / "scan.pdf")) == []
    assert "scan.pdf holds no text to index" in caplog.text
