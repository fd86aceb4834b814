"""Sweeps on one device: equality with individual runs, chunking, static groups, errors."""

from __future__ import annotations

import math

import jax
import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo import memory, parallel
from purejaxppo.cli import main, parse_grid, parse_random
from purejaxppo.drivers import report, settings, sweeps
from purejaxppo.drivers.sweeps import groups as sweep_groups
from purejaxppo.train import METRICS

# 12 updates of 4 envs x 16 steps: a few seconds per compile.
CONFIG = pjp.PPOConfig(num_envs=4, num_steps=16, total_timesteps=4 * 16 * 12)
GRID = {"learning_rate": [1e-3, 3e-4], "ent_coef": [0.0, 0.01]}


def metric_array(table: pd.DataFrame) -> np.ndarray:
    table = table.sort_values(["run", "update"])
    return (
        table[list(METRICS)].to_numpy(np.float64).reshape(table["run"].nunique(), -1, len(METRICS))
    )


@pytest.fixture(scope="module")
def grid_sweep() -> sweeps.SweepResult:
    return pjp.sweep(CONFIG, seeds=3, grid=GRID)


def test_grid_sweep_equals_individual_runs(grid_sweep):
    result = grid_sweep
    assert result.num_compiles == 1
    assert len(result.settings) == 4 and len(result.runs) == 12
    assert len(result.table) == 12 * CONFIG.num_updates
    train = jax.jit(pjp.make_train(CONFIG))  # one compile: the grid is all traced fields
    for setting_index, setting in enumerate(result.settings):
        hparams = pjp.Hyperparams.from_config(CONFIG.replace(**setting))
        for seed in range(3):
            run = setting_index * 3 + seed
            rows = result.table[result.table["run"] == run].sort_values("update")
            assert rows["seed"].unique().tolist() == [seed]
            assert rows["config/learning_rate"].unique().tolist() == [setting["learning_rate"]]
            out = train(jax.random.key(seed), hparams)
            for name in METRICS:
                # vmap over 12 runs vs one run: XLA may change the last float bits
                # (observed <= 4e-6 on v_loss), nothing more.
                np.testing.assert_allclose(
                    rows[name].to_numpy(np.float64),
                    np.asarray(out.metrics[name], np.float64),
                    rtol=1e-5,
                    atol=2e-5,
                    err_msg=f"run {run} metric {name}",
                )


def test_chunked_sweep_with_progress_equals_one_batch(grid_sweep):
    # 12 runs in chunks of 5 (the last padded to 5), run in segments for the progress bar.
    chunked = pjp.sweep(CONFIG, seeds=3, grid=GRID, max_runs_per_chunk=5, progress=True)
    np.testing.assert_array_equal(metric_array(chunked.table), metric_array(grid_sweep.table))
    pd.testing.assert_frame_equal(chunked.summary, grid_sweep.summary)


def test_memory_rule_chunks_and_matches(grid_sweep, monkeypatch):
    # Pretend the device reports memory: the sweep measures one run's memory by compiling
    # it and picks a chunk size; results must not change.
    seen = {}

    def fake_limit(mesh):
        return 10**9

    def fake_rule(bytes_per_run, bytes_limit, bytes_in_use, num_runs, num_devices, *args):
        seen["bytes_per_run"] = bytes_per_run
        return 4  # as if only 4 runs fit

    monkeypatch.setattr(parallel, "device_bytes_limit", fake_limit)
    monkeypatch.setattr(memory, "runs_per_chunk", fake_rule)
    result = pjp.sweep(CONFIG, seeds=3, grid=GRID)
    assert seen["bytes_per_run"] > 10_000  # a real measurement of a run's buffers
    np.testing.assert_array_equal(metric_array(result.table), metric_array(grid_sweep.table))


def test_runs_per_chunk_for_memory():
    # 70% of 10 GB / 300 MB per run = 23.3 -> 23 runs per device, x 4 devices.
    assert parallel.runs_per_chunk_for_memory(300e6, 10e9, 4) == 92
    assert parallel.runs_per_chunk_for_memory(50e9, 10e9, 2) == 2  # at least 1 per device
    assert parallel.pad_runs(13, 4) == 16 and parallel.pad_runs(12, 4) == 12


def test_static_field_in_grid_compiles_once_per_group(capsys):
    result = pjp.sweep(CONFIG, seeds=2, grid={"num_envs": [2, 4], "ent_coef": [0.0, 0.01]})
    assert "in 2 static group(s) -> 2 compile(s)" in capsys.readouterr().err
    assert result.num_compiles == 2
    for num_envs in (2, 4):
        rows = result.table[result.table["config/num_envs"] == num_envs]
        steps = rows[rows["update"] == 1]["env_steps"].unique().tolist()
        assert steps == [num_envs * 16]
        updates = CONFIG.replace(num_envs=num_envs).num_updates  # 24 and 12
        assert rows["update"].max() == updates
        assert rows["run"].nunique() == 4


def test_summary_statistics(grid_sweep):
    summary, runs = grid_sweep.summary, grid_sweep.runs
    assert list(summary.columns[:3]) == ["setting", "config/learning_rate", "config/ent_coef"]
    for _, row in summary.iterrows():
        finals = runs[runs["setting"] == row["setting"]]["final_return"].to_numpy()
        assert row["num_seeds"] == 3
        assert row["final_return_mean"] == pytest.approx(finals.mean())
        assert row["final_return_std"] == pytest.approx(finals.std())
        assert row["final_return_iqm"] == pytest.approx(finals.mean())  # n < 4: all values
    # final_return is the mean of the last 10 updates' episode returns (NaN-aware)
    run0 = grid_sweep.curves[grid_sweep.curves["run"] == 0]["episode_return"].to_numpy()
    assert runs.loc[0, "final_return"] == pytest.approx(np.nanmean(run0[-10:]))


def test_iqm_golden_values():
    # sorted [1..8]: drop 2 from each end -> mean(3, 4, 5, 6) = 4.5
    assert report.iqm(np.arange(1.0, 9.0)) == 4.5
    # [0, 0, 10, 100, NaN]: NaN dropped, n=4 -> middle [0, 10] -> 5
    assert report.iqm(np.array([100.0, 0.0, 10.0, 0.0, np.nan])) == 5.0
    assert math.isnan(report.iqm(np.array([np.nan])))


def test_random_search_settings():
    random = {"learning_rate": ("log_uniform", 1e-5, 1e-3), "num_envs": ("choice", [2, 4])}
    draws = settings.sample_random(random, 50, seed=3)
    assert draws == settings.sample_random(random, 50, seed=3)  # reproducible
    rates = np.array([d["learning_rate"] for d in draws])
    assert (rates >= 1e-5).all() and (rates <= 1e-3).all()
    assert rates.min() < 1e-4 < rates.max()  # log-uniform covers the decades
    assert {d["num_envs"] for d in draws} == {2, 4}
    ints = settings.sample_random({"update_epochs": ("int_uniform", 1, 3)}, 40)
    assert {d["update_epochs"] for d in ints} == {1, 2, 3}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grid": {"learning_rat": [1e-3]}}, "grid: unknown config field 'learning_rat'"),
        ({"grid": {"seed": [1, 2]}}, "pass seeds= instead"),
        ({"grid": {"ent_coef": []}}, "grid['ent_coef']=[]: must be a non-empty list"),
        ({"grid": {"clip_coef": [0.2, -1.0]}}, "clip_coef=-1.0: must be > 0"),
        ({"random": {"gamma": ("normal", 0, 1)}, "num_samples": 2}, "unknown distribution"),
        ({"random": {"gamma": ("uniform", 0.9, 0.99)}}, "num_samples=0"),
        ({"seeds": 0}, "seeds=0"),
        ({"max_runs_per_chunk": 0}, "max_runs_per_chunk=0"),
    ],
)
def test_bad_sweeps_fail_before_compiling(kwargs, message, monkeypatch):
    def no_compile(*args, **kw):
        raise AssertionError("compiled before validating")

    monkeypatch.setattr(sweep_groups, "make_train_fns", no_compile)
    with pytest.raises(ValueError, match=None) as err:
        pjp.sweep(CONFIG, **{"seeds": 2, **kwargs})
    assert message in str(err.value)


def test_cli_value_parsing():
    assert parse_grid(["learning_rate=1e-4,3e-4", "hidden-sizes=64,64;128"]) == {
        "learning_rate": [1e-4, 3e-4],
        "hidden_sizes": [[64, 64], 128],
    }
    assert parse_random(["ent_coef=uniform:0:0.02", "num_envs=choice:4,8"]) == {
        "ent_coef": ("uniform", 0, 0.02),
        "num_envs": ("choice", [4, 8]),
    }
    with pytest.raises(ValueError, match="--grid 'learning_rate': expected FIELD=VALUES"):
        parse_grid(["learning_rate"])


def test_cli_sweep_writes_table_summary_and_plot(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--seeds", "2", "--grid", "ent_coef=0,0.01", "--num-envs", "4"]
    argv += ["--num-steps", "16", "--total-timesteps", "640", "--out", str(out)]
    argv += ["--format", "parquet", "--log-every", "5", "--no-progress"]
    assert main(argv) == 0
    table = pd.read_parquet(out / "table.parquet")
    assert sorted(table["update"].unique()) == [5, 10]  # every 5th update
    assert table["run"].nunique() == 4
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 2 and set(summary["num_seeds"]) == {2}
    assert (out / "learning_curves.png").stat().st_size > 10_000
    assert "final_return_iqm" in capsys.readouterr().out


def test_cli_sweep_unknown_field_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--grid", "learnin_rate=1e-3,1e-4"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown config field 'learnin_rate'" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--env-name", "NoSuchEnv-v9"], "env_name='NoSuchEnv-v9' is not a known environment id"),
        (["--grid", "env_name=CartPole-v1,Acrobt-v1"], "Close matches: Acrobot-v1"),
        (["--env-kwargs", "{max_step: 3}"], "max_step"),
        (["--env-name", "gymnasium:NoSuch-v5"], "'NoSuch-v5' is not a gymnasium id"),
    ],
)
def test_cli_sweep_bad_env_exits_2_before_writing(tmp_path, capsys, flags, message):
    # Every setting's env is built before the output directory is created.
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--seeds", "2", "--out", str(out), "--no-progress", *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


TINY = ["--num-envs", "4", "--num-steps", "16", "--total-timesteps", "128", "--no-progress"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--seeds", "0"], "seeds=0: must be >= 1"),
        (["--seeds", "-2"], "seeds=-2: must be >= 1"),
        (["--max-runs-per-chunk", "0"], "max_runs_per_chunk=0: must be a positive multiple"),
        (["--log-every", "0"], "log_every=0: must be >= 1"),
    ],
)
def test_cli_sweep_bad_options_exit_2_before_writing(tmp_path, capsys, flags, message):
    # seeds, log_every and the chunk size are checked before --out is created.
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--out", str(out), "--grid", "gamma=0.9", *TINY, *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_cli_sweep_random_bound_not_a_number_names_the_field(tmp_path, capsys):
    out = tmp_path / "sweep"
    flags = ["--random", "learning_rate=uniform:a:b", "--num-samples", "2"]
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--out", str(out), "--seeds", "2", *TINY, *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "random['learning_rate']=('uniform', 'a', 'b'): the bounds of uniform" in err
    assert not out.exists()


def test_cli_sweep_resume_of_a_foreign_request_yaml_exits_2(tmp_path, capsys):
    (tmp_path / "request.yaml").write_text("just: text\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--resume", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'request.yaml'} is not a sweep request (no config, grid" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["request.yaml"]
