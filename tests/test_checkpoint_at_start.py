"""`train_and_log(..., save_initial=True)` (`purejaxppo train --save-initial`): a checkpoint of
update 0 that loads (the initial params) and resumes."""

import shutil

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.drivers.single import train_and_log

CONFIG = pjp.PPOConfig(
    env_name="Probe4-v0",
    total_timesteps=2 * 4 * 16,  # 2 updates
    num_envs=4,
    num_steps=16,
    hidden_sizes=(8,),
    save_freq=1,
    log_freq=1,
    keep_checkpoints="all",
)


def test_update_zero_checkpoint_exists_loads_and_resumes(tmp_path):
    run = tmp_path / "run"
    result = train_and_log(CONFIG, run, progress=False, plot=False, save_initial=True)
    assert pjp.list_checkpoints(run) == [0, 1, 2]
    start = pjp.Policy.load(run, step=0)
    final = pjp.Policy.load(run)
    first = jax.tree.leaves(start.get_params())
    last = jax.tree.leaves(result.runner_state.train_state.params)
    assert any(not np.array_equal(a, b) for a, b in zip(first, last, strict=True))
    assert start.act(np.zeros(1, np.float32)).shape == () and final is not None
    # Resuming from update 0 trains the whole run again, to the same params.
    for step in ("1", "2"):
        shutil.rmtree(run / "checkpoints" / "last" / step)
    again = train_and_log(CONFIG, run, progress=False, plot=False, resume=True)
    assert len(again.metrics) == 2 and pjp.list_checkpoints(run)[-1] == 2
    resumed = jax.tree.leaves(again.runner_state.train_state.params)
    assert all(np.array_equal(a, b) for a, b in zip(last, resumed, strict=True))


def test_without_save_initial_there_is_no_update_zero(tmp_path):
    train_and_log(CONFIG, tmp_path / "run", progress=False, plot=False)
    assert pjp.list_checkpoints(tmp_path / "run") == [1, 2]


def test_train_save_initial_flag_keeps_the_initial_params_as_step_zero(tmp_path, capsys):
    from purejaxppo.cli import main
    from purejaxppo.train import make_train_fns

    run = tmp_path / "run"
    argv = ["train", "--env-name", "Probe4-v0", "--total-timesteps", "128", "--num-envs", "4"]
    argv += ["--num-steps", "16", "--hidden-sizes", "8", "--keep-checkpoints", "all"]
    assert main([*argv, "--no-progress", "--save-initial", "--run-dir", str(run)]) == 0
    assert pjp.list_checkpoints(run) == [0, 2]  # update 0 and the end
    config = pjp.PPOConfig.from_yaml(run / "config.yaml")
    initial = jax.jit(make_train_fns(config).init)(jax.random.key(config.seed))
    start = pjp.Policy.load(run, step=0).get_params()
    jax.tree.map(np.testing.assert_array_equal, start, initial.train_state.params)
    for extra in (["--num-seeds", "2"], ["--resume", str(run)]):
        with pytest.raises(SystemExit) as exit_info:
            main(["train", "--save-initial", *extra])
        assert exit_info.value.code == 2
        assert "purejaxppo: error: --save-initial is for" in capsys.readouterr().err
