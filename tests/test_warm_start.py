"""Warm start (`init_from` / `make_train(init_params=)`) and a run's checkpoint series
(`keep_checkpoints: all`, `list_checkpoints`, `Policy.load(step=)`, `eval --all-steps`).

One source run is trained once for the module: CartPole-v1, 16 envs x 64 steps, lr 1e-3,
400k steps (390 updates), a checkpoint every 65 updates, all kept. Its last 10 updates'
mean return was 500 (the maximum) for 8 of 8 vmapped seeds on a 2-core AMD EPYC. (The
earlier 2.5e-3 x 200k source ended at 256 for seed 0 on that machine, a late dip, though
it had reached 500 on another: XLA's CPU numerics differ between machines.)
"""

import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import yaml

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.drivers.single import train_and_log

SOURCE = pjp.PPOConfig(
    num_envs=16,
    num_steps=64,
    total_timesteps=400_000,
    learning_rate=1e-3,
    log_freq=65,
    save_freq=65,
    save_minutes=0,
    keep_checkpoints="all",
    seed=0,
)
STEPS = [65, 130, 195, 260, 325, 390]
# Fine-tuning: 4 envs x 512 steps, so that every env ends a (500-step) episode in the
# first rollout; 2 updates. From scratch the first update's return is about 25 (a random
# CartPole policy); from the trained run it was 500 for every source seed 0-3.
FINE = pjp.PPOConfig(num_envs=4, num_steps=512, total_timesteps=2 * 2048)
WARM_MIN = 400.0
SCRATCH_MAX = 100.0


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("warm") / "source"
    result = train_and_log(SOURCE, run_dir, progress=False, plot=False)
    assert result.final_return >= 450.0, result.final_return  # the source learned
    return run_dir


def first_returns(output) -> np.ndarray:
    return np.asarray(output.metrics["episode_return"])[..., 0]


def test_list_checkpoints_and_load_step_equal_the_params_at_that_step(source):
    assert pjp.list_checkpoints(source) == STEPS
    fns = pjp.make_train_fns(SOURCE)
    run = jax.jit(fns.run, static_argnums=2)
    runner = run(fns.init(jax.random.key(SOURCE.seed)), pjp.Hyperparams.from_config(SOURCE), 65)[0]
    loaded = pjp.Policy.load(source, step=65).get_params()
    # Bitwise: the checkpoint of update 65 holds the params the run had after 65 updates.
    jax.tree.map(np.testing.assert_array_equal, loaded, jax.device_get(runner.train_state.params))
    newest = pjp.Policy.load(source).get_params()  # a later step: other params
    assert not all(jax.tree.leaves(jax.tree.map(np.array_equal, loaded, newest)))
    with pytest.raises(
        ValueError, match="step 7 was not kept .* kept steps are 65, 130, 195, 260, 325, 390"
    ):
        pjp.Policy.load(source, step=7)


def test_eval_all_steps_writes_one_row_per_kept_step(source, capsys):
    assert main(["eval", str(source), "--all-steps", "--episodes", "8", "--greedy"]) == 0
    table = pd.read_csv(source / "eval_steps.csv")
    assert list(table["update"]) == STEPS
    assert list(table["env_steps"]) == [s * SOURCE.batch_size for s in STEPS]
    assert table["mean"].iloc[-1] >= 450.0  # the trained policy, greedy
    png = (source / "eval_steps.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    capsys.readouterr()
    with pytest.raises(SystemExit):  # never overwrites without the flag
        main(["eval", str(source), "--all-steps", "--episodes", "8"])
    assert "eval_steps.csv exists; pass --overwrite" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", str(source), "--step", "64", "--episodes", "8"])
    assert "the kept steps are 65, 130, 195, 260, 325, 390" in capsys.readouterr().err


def test_fine_tuning_from_a_trained_run_starts_high(source):
    params = pjp.Policy.load(source).get_params()
    train = pjp.make_train(FINE)
    keys = jax.vmap(jax.random.key)(jnp.arange(2))
    # init_params as a traced argument, the same for both seeds (in_axes None).
    warm = jax.jit(jax.vmap(train, in_axes=(0, None, None, None)))(keys, None, None, params)
    scratch = jax.jit(jax.vmap(train))(keys)
    assert (first_returns(warm) >= WARM_MIN).all(), first_returns(warm)
    assert (first_returns(scratch) <= SCRATCH_MAX).all(), first_returns(scratch)


def test_cli_init_from_records_the_source_and_starts_high(source, tmp_path, capsys):
    run_dir = tmp_path / "fine"
    argv = ["train", "--init-from", str(source), "--run-dir", str(run_dir), "--no-progress"]
    argv += ["--num-envs", "4", "--num-steps", "512", "--total-timesteps", "4096"]
    assert main(argv) == 0
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["init_from"] == str(source.resolve())
    assert saved["init_step"] == 390 and saved["init_parts"] == ["params", "normalization"]
    table = pd.read_csv(run_dir / "metrics.csv")
    assert table["episode_return"].iloc[0] >= WARM_MIN


def test_optimizer_part_copies_adam_state(source):
    state, step = pjp.load_init_params(source, ("params", "optimizer"), step=130)
    assert step == 130
    config = FINE.replace(init_parts=("params", "optimizer"))
    runner = jax.jit(pjp.make_train_fns(config, init_params=state).init)(jax.random.key(3))
    jax.tree.map(
        np.testing.assert_array_equal,
        jax.device_get(runner.train_state.opt_state),
        jax.device_get(state.opt_state),
    )


def test_mismatched_network_names_the_first_differing_layer(source):
    params = pjp.Policy.load(source).get_params()
    with pytest.raises(
        ValueError,
        match=r"layer params/actor_encoder/obs_mlp/dense_0/bias has shape \(64,\) in the "
        r"source, this config's network / env needs \(32,\)$",
    ):
        pjp.make_train(FINE.replace(hidden_sizes=(32, 32)), init_params=params)
    with pytest.raises(ValueError, match="pass a TrainState"):
        pjp.make_train(FINE.replace(init_parts=("optimizer",)), init_params=params)


def test_init_from_a_directory_that_is_not_a_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--init-from", str(tmp_path), "--no-progress"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--init-from {tmp_path}: not a run directory" in err


def test_resume_of_a_warm_started_run_needs_not_its_source(source, tmp_path):
    copy = tmp_path / "source-copy"
    shutil.copytree(source, copy)
    run_dir = tmp_path / "fine"
    argv = ["train", "--init-from", str(copy), "--run-dir", str(run_dir), "--no-progress"]
    assert main([*argv, "--total-timesteps", "2048", "--save-freq", "2"]) == 0
    shutil.rmtree(copy)  # the source is gone: the resumed run uses its own checkpoints
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 0
    assert pjp.list_checkpoints(run_dir)[-1] == 4


# --- The batched drivers: every member starts from the source (a traced argument) -------


def test_num_seeds_starts_every_seed_from_the_source(source, tmp_path):
    run_dir = tmp_path / "seeds"
    argv = ["train", "--init-from", str(source), "--run-dir", str(run_dir), "--no-progress"]
    argv += ["--num-envs", "4", "--num-steps", "512", "--total-timesteps", "4096"]
    assert main([*argv, "--num-seeds", "2"]) == 0
    for seed in (0, 1):
        table = pd.read_csv(run_dir / f"seed_{seed}" / "metrics.csv")
        assert table["episode_return"].iloc[0] >= WARM_MIN, (seed, table["episode_return"])
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["init_from"] == str(source.resolve()) and saved["init_step"] == 390


def test_sweep_starts_every_run_from_the_source(source):
    config = FINE.replace(init_from=str(source))
    result = pjp.sweep(config, seeds=1, grid={"ent_coef": [0.0, 0.01]}, verbose=False)
    first = result.curves[result.curves["update"] == result.curves["update"].min()]
    assert len(first) == 2 and (first["episode_return"] >= WARM_MIN).all(), first


def test_pbt_starts_every_member_from_the_source(source):
    config = FINE.replace(init_from=str(source))
    result = pjp.pbt(
        config,
        population=2,
        ready_every=1,
        search={"ent_coef": ("uniform", 0.0, 0.01)},
        verbose=False,
    )
    first = result.curves[result.curves["update"] == result.curves["update"].min()]
    assert len(first) == 2 and (first["episode_return"] >= WARM_MIN).all(), first


def test_the_drivers_init_program_takes_the_source_as_an_argument(source):
    """No constant of the source's shapes in the init program: the params come in as an
    argument (so one compiled program serves every source of the same shapes)."""
    from purejaxppo.drivers import warm

    config = FINE.replace(init_from=str(source))
    params = warm.load_warm_start(config)
    fns = pjp.make_train_fns(warm.program_config(config))
    key_data = jax.random.key_data(jax.vmap(jax.random.key)(jnp.arange(2)))
    closed = jax.make_jaxpr(warm.init_runs(fns.init, lambda runner: runner))(key_data, params)
    shapes = {np.shape(leaf) for leaf in jax.tree.leaves(params) if np.ndim(leaf) == 2}
    assert shapes and not [c for c in closed.consts if np.shape(c) in shapes]
    runner = jax.jit(warm.init_runs(fns.init, lambda runner: runner))(key_data, params)
    for k in range(2):  # both runs start from the source's params exactly
        got = jax.tree.map(lambda x: x[k], jax.device_get(runner.train_state.params))  # noqa: B023
        jax.tree.map(np.testing.assert_array_equal, got, params)


def test_program_and_start_splits_a_warm_started_config(source):
    """`warm.program_and_start`: the programs' config without the source (so the source
    is not baked in), the source's params from its newest checkpoint, and none for a
    resumed run (it continues from its own checkpoint)."""
    from purejaxppo.checkpoint import load_init_params
    from purejaxppo.drivers import warm

    config = FINE.replace(init_from=str(source), init_step=130)
    program, params = warm.program_and_start(config)
    assert (program.init_from, program.init_step) == (None, None)
    assert program == config.replace(init_from=None, init_step=None)
    at_130, step = load_init_params(source, config.init_parts, 130)
    assert step == 130
    jax.tree.map(np.testing.assert_array_equal, params, at_130)
    resumed, none = warm.program_and_start(config, resume=True)
    assert resumed == program and none is None
    assert warm.program_and_start(FINE) == (FINE, None)  # no warm start
    with pytest.raises(ValueError, match="init_from='/nonexistent"):
        warm.program_and_start(FINE.replace(init_from="/nonexistent/run"))
