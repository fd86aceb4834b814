"""The notebooks execute top to bottom on CPU.

The quickstart's learning claim (the default config, 500k CartPole steps, the mean of 8
seeds over 400) is `tests/test_train.py::test_cartpole_default_config_learns`'s run (the
same config and steps, 4 vmapped seeds, mean >= 475) and the learning gate's
`learn:cartpole` row; here its cells run at `QUICKSTART_TIMESTEPS` (the plumbing, the
plots, the API calls), its one learning assertion taken out (`shrunk`).
"""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "quickstart.ipynb"
#: 10 updates of the default 4 envs x 128 steps.
QUICKSTART_TIMESTEPS = 10 * 512
#: (text in the notebook, what the test runs instead): each must occur exactly once.
SHRINK = (
    ("total_timesteps=500_000", f"total_timesteps={QUICKSTART_TIMESTEPS}"),
    ("assert final.mean() > 400, final", "assert final.shape == (8,), final"),
)


def shrunk(notebook):
    """`notebook` with `SHRINK` applied to its code cells; AssertionError naming the text
    when one does not occur exactly once (the notebook changed: update `SHRINK`)."""
    for old, new in SHRINK:
        cells = [c for c in notebook.cells if c.cell_type == "code" and old in c.source]
        assert len(cells) == 1 and cells[0].source.count(old) == 1, (old, len(cells))
        cells[0].source = cells[0].source.replace(old, new)
    return notebook


def test_quickstart_notebook_runs(tmp_path):
    notebook = shrunk(nbformat.read(NOTEBOOK, as_version=4))
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
