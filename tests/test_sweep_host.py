"""Batched runs on a host env (gymnasium, issue #37): `--num-seeds`, `purejaxppo sweep` and
`pbt` step R runs x N envs in ONE gymnasium vector env, called from inside the compiled
program (`envs.host_calls`). Each run steps the episodes of its single run (its envs are
seeded from its own keys); a resumed run or population restarts the vector env's
episodes. Runs
split over several devices stay refused, in one line naming the operation, the kind and
the alternative."""

from __future__ import annotations

import os

import jax
import numpy as np
import pandas as pd
import pytest
from fresh_episodes import check_population_restarts_episodes, check_run_restarts_episodes

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.train import make_train

GYM = "gymnasium:CartPole-v1"
#: 3 updates of 2 envs x 16 steps per run.
TINY = ["--env-name", GYM, "--num-envs", "2", "--num-steps", "16", "--total-timesteps", "96"]
TINY += ["--no-progress"]
SMALL = pjp.PPOConfig(env_name=GYM, num_envs=2, num_steps=16, total_timesteps=96)

#: What a batched run agrees on with its single run: its episodes exactly (the env's
#: outcomes of the actions taken), the learning numbers to float32 rounding (a vmapped
#: batch may change XLA's last bits, as on EnvPool: tests/test_envpool.py).
EXACT = ("episode_return", "episode_length", "env_steps")
CLOSE = ("v_loss", "entropy", "approx_kl", "grad_norm")


def _assert_single_run(batched: pd.DataFrame, single: dict) -> None:
    for name in EXACT:
        np.testing.assert_array_equal(batched[name].to_numpy(), single[name], err_msg=name)
    for name in CLOSE:
        np.testing.assert_allclose(
            batched[name].to_numpy(), single[name], rtol=1e-4, atol=1e-6, err_msg=name
        )


def test_num_seeds_and_a_sweep_step_the_episodes_of_their_single_runs(tmp_path, capsys):
    seeds = tmp_path / "seeds"
    assert main(["train", *TINY, "--num-seeds", "2", "--run-dir", str(seeds)]) == 0
    assert "2 seeds (0..1) in one program on 1 device(s)" in capsys.readouterr().err
    train = jax.jit(make_train(SMALL))
    for seed in (0, 1):
        single = jax.device_get(train(jax.random.key(seed)).metrics)
        _assert_single_run(pd.read_csv(seeds / f"seed_{seed}" / "metrics.csv"), single)

    out = tmp_path / "sweep"
    grid = ["--seeds", "2", "--grid", "learning_rate=0.001,0.0003", "--out", str(out)]
    assert main(["sweep", *TINY, *grid]) == 0
    assert "in 1 static group(s) -> 1 compile(s)" in capsys.readouterr().err
    table = pd.read_csv(out / "table.csv")
    for setting, seed, lr in [(1, 1, 3e-4), (0, 0, 1e-3)]:
        single = jax.device_get(
            jax.jit(make_train(SMALL.replace(learning_rate=lr)))(jax.random.key(seed)).metrics
        )
        rows = table[(table["setting"] == setting) & (table["seed"] == seed)]
        _assert_single_run(rows.reset_index(drop=True), single)
    assert pd.read_csv(out / "runs.csv")["diverged"].eq(0).all()


def test_a_pbt_population_resumes_with_fresh_episodes(
    tmp_path, capsys, monkeypatch, crash_population_after
):
    # One vector env for all members, outside the checkpoint. 4 updates: 2 generations.
    config = SMALL.replace(num_steps=8, total_timesteps=64, update_epochs=1)
    check_population_restarts_episodes(
        config, tmp_path, capsys, monkeypatch, crash_population_after, generations=2
    )


def test_a_resumed_run_restarts_its_episodes_and_continues_the_rest(tmp_path, capsys):
    config = SMALL.replace(num_steps=8, total_timesteps=64, save_freq=2, log_freq=2)
    err = check_run_restarts_episodes(config, tmp_path, capsys)
    assert f"resume: {GYM} (host env (gymnasium)) keeps its episodes on the host" in err


def test_runs_over_several_devices_are_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as refused:
        main(["sweep", *TINY, "--seeds", "2", "--devices", "2", "--out", str(out)])
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"env_name='{GYM}' (host env (gymnasium))" in err
    assert "batched runs split over several devices" in err
    assert err.endswith("use one device (devices=1, --devices 1) (asked for 2 devices)")
    assert not out.exists()  # refused before --out is claimed


@pytest.mark.parametrize(
    ("env_name", "line"),
    [
        ("CartPole-v1", "{n} CPU devices (one per core"),  # a JAX env: split over the cores
        (GYM, "{n} CPU devices; this env's runs use one of them"),  # a host env: one device
    ],
    ids=["jax", "gymnasium"],
)
def test_a_sweep_sets_its_cpu_devices_before_the_env_kind_starts_jax(env_name, line, tmp_path):
    """Validating the env's kind imports gymnax, which starts JAX's backend: the CPU device
    count must be set before it (a sweep otherwise ran on one device, silently). The
    subprocess reports 2 usable cores, so the check does not depend on the machine."""
    import subprocess
    import sys

    argv = [*TINY[:-1], "--env-name", env_name, "--seeds", "1", "--out", str(tmp_path / "s")]
    code = (
        "import sys; import purejaxppo.platform as p; p.usable_cores = lambda: 2; "
        "from purejaxppo.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    command = [sys.executable, "-c", code, "sweep", *argv]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert line.format(n=2) in proc.stderr, proc.stderr[-2000:]
