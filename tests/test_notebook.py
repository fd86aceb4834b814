"""The quickstart notebook executes top to bottom on CPU (its own cells assert learning)."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "quickstart.ipynb"


def test_quickstart_notebook_runs(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = [
        out.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    ]
    text = "".join(outputs)
    assert "final return per seed" in text
    assert not any(
        out.get("output_type") == "error" for c in notebook.cells for out in c.get("outputs", [])
    )


WATCH = NOTEBOOK.with_name("watch_a_run.ipynb")


def test_watch_a_run_notebook_runs(tmp_path, monkeypatch):
    # Small: 4 seeds x 10 updates (the notebook's own cells assert the callback counts).
    monkeypatch.setenv("WATCH_A_RUN_TIMESTEPS", str(10 * 512))
    notebook = nbformat.read(WATCH, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = [out for cell in notebook.cells for out in cell.get("outputs", [])]
    assert not any(out.get("output_type") == "error" for out in outputs)
    text = "".join(out.get("text", "") for out in outputs)
    assert "callbacks per seed" in text and "frames, return" in text
    assert any("image/gif" in out.get("data", {}) for out in outputs)
    assert (tmp_path / "runs" / "watch_a_run" / "episode.gif").exists()  # only there
