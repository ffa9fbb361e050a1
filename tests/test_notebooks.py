"""Executes every notebook in ``notebooks/`` with nbclient (kernel ``python3`` = this venv's
interpreter through ipykernel), offline, on a copy of the session's demo collection. Also
checks that the notebooks are stored without outputs."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
NAMES = [p.name for p in NOTEBOOKS]


def test_notebooks_exist_and_have_no_outputs() -> None:
    assert NAMES == [
        "01_quickstart.ipynb",
        "02_langchain_app.ipynb",
        "03_llamaindex_app.ipynb",
        "04_benchmarks.ipynb",
        "05_drop_in.ipynb",
        "06_chat_app.ipynb",
    ]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.fixture(scope="module")
def notebook_home(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("notebook-home") / "home"
    shutil.copytree(demo_home, home)
    return home


@pytest.mark.llm
@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_executes(
    path: Path, notebook_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RCA_DEMO_HOME", str(notebook_home))
    monkeypatch.setenv("RCA_MODELS__N_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # the kernel must run this interpreter (the venv), whatever is first on PATH
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=240,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    if path.name not in ("04_benchmarks.ipynb", "05_drop_in.ipynb"):
        assert "collection 'demo'" in text
    if path.name == "01_quickstart.ipynb":
        assert "answer:" in text and "sub-question:" in text and "MER:" in text
    if path.name == "04_benchmarks.ipynb":
        assert "rows plotted" in text
    if path.name == "05_drop_in.ipynb":
        assert "before:" in text and "upgraded:" in text and "sub-question:" in text
