"""Checks shared by the kinds whose envs live on the host, outside the checkpoint (EnvPool
pools, gymnasium vector envs: `EnvKind.episodes_restart_on_resume`): a resumed run or
population starts fresh episodes, seeded (reproducible), and continues the rest."""

from __future__ import annotations

import shutil

import jax
import numpy as np
import pandas as pd
import pytest


def check_run_restarts_episodes(config, tmp_path, capsys) -> str:
    """Trains `config` (4 updates, a checkpoint every 2), keeps the checkpoint of update 2
    only (as if killed after it), resumes it twice (the run and a twin copy) and checks
    the rows and the reproducible fresh episodes; returns the resume's stderr."""
    from purejaxppo.drivers.single import train_and_log

    run_dir = tmp_path / "run"
    train_and_log(config, run_dir, progress=False, plot=False)
    whole = pd.read_csv(run_dir / "metrics.csv")
    shutil.rmtree(run_dir / "checkpoints" / "last" / "4")
    twin = tmp_path / "twin"
    shutil.copytree(run_dir, twin)
    capsys.readouterr()
    resumed = train_and_log(config, run_dir, resume=True, progress=False, plot=False)
    err = capsys.readouterr().err
    assert "the envs start fresh episodes" in err
    again = train_and_log(config, twin, resume=True, progress=False, plot=False)
    assert int(resumed.runner_state.update_step) == 4
    table = pd.read_csv(run_dir / "metrics.csv")
    assert list(table["update"]) == [1, 2, 3, 4]
    pd.testing.assert_frame_equal(table.iloc[:2], whole.iloc[:2])  # the checkpoint's rows
    # The fresh episodes are seeded from the run's key and the update step: a resume is
    # reproducible, and it is not the uninterrupted run (its episodes were cut short).
    pd.testing.assert_frame_equal(table, pd.read_csv(twin / "metrics.csv"))
    np.testing.assert_array_equal(
        np.asarray(jax.tree.leaves(resumed.runner_state.train_state.params)[0]),
        np.asarray(jax.tree.leaves(again.runner_state.train_state.params)[0]),
    )
    assert not np.allclose(table["v_loss"].iloc[2:], whole["v_loss"].iloc[2:])
    return err


def check_population_restarts_episodes(
    config, tmp_path, capsys, monkeypatch, crash_population_after, generations: int
) -> None:
    """A PBT population of 2 (a generation every 2 updates, `generations` in all) killed
    after its first generation's checkpoint resumes with fresh, seeded episodes: twice
    the same lineage, the checkpoint's first generation, then not the uninterrupted one."""
    import purejaxppo as pjp

    kw = dict(population=2, ready_every=2, verbose=False)
    kw["search"] = {"learning_rate": ("log_uniform", 1e-4, 1e-3)}
    whole = pjp.pbt(config, **kw, checkpoint_dir=tmp_path / "whole")
    crash_population_after(1)  # saved after 1 generation, then killed
    for name in ("run", "twin"):
        with pytest.raises(KeyboardInterrupt):
            pjp.pbt(config, **kw, checkpoint_dir=tmp_path / name)
    monkeypatch.undo()
    capsys.readouterr()
    resumed = pjp.pbt(config, **kw, checkpoint_dir=tmp_path / "run", resume=True)
    assert "the members start fresh episodes" in capsys.readouterr().err
    twin = pjp.pbt(config, **kw, checkpoint_dir=tmp_path / "twin", resume=True)
    lineage, first = resumed.lineage, resumed.lineage["generation"] == 0
    assert sorted(lineage["generation"].unique()) == list(range(generations))
    pd.testing.assert_frame_equal(lineage[first], whole.lineage[first])  # the checkpoint's
    pd.testing.assert_frame_equal(lineage, twin.lineage)  # fresh episodes, seeded
    assert not lineage[~first].equals(whole.lineage[~first])  # its episodes were cut short
