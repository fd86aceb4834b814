"""`purejaxppo train`: run directory, progress, errors, and equality with one-call `train`."""

import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest
import yaml

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.drivers.single import train_and_log

CONFIG = pjp.PPOConfig(total_timesteps=7 * 512, log_freq=3, seed=5)  # 7 updates: 3 + 3 + 1


def test_logged_run_equals_one_call_train(tmp_path):
    result = train_and_log(CONFIG, tmp_path / "run", progress=False)
    one_call = jax.jit(pjp.make_train(CONFIG))(jax.random.key(CONFIG.seed))
    # Bitwise: the segmented, logged run is the same computation.
    jax.tree.map(
        np.testing.assert_array_equal,
        jax.device_get(result.runner_state.train_state.params),
        jax.device_get(one_call.train_state.params),
    )
    for name in pjp.METRICS:
        np.testing.assert_array_equal(
            result.metrics[name].to_numpy(), np.asarray(one_call.metrics[name]), err_msg=name
        )
    table = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert list(table["update"]) == list(range(1, 8))
    np.testing.assert_allclose(table["v_loss"], one_call.metrics["v_loss"], rtol=1e-6)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert pjp.PPOConfig.from_dict(saved) == CONFIG
    png = (tmp_path / "run" / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_main_writes_run_dir_and_prints_summary(tmp_path, capsys):
    run_dir = tmp_path / "r"
    code = main(
        [
            "train",
            "--total-timesteps",
            "2048",
            "--log-freq",
            "2",
            "--run-dir",
            str(run_dir),
            "--hidden-sizes",
            "32,32",
            "--no-progress",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "final mean episode_return" in out and str(run_dir) in out
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["hidden_sizes"] == [32, 32] and saved["total_timesteps"] == 2048
    assert len(pd.read_csv(run_dir / "metrics.csv")) == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--num-minibatches", "3"], "num_minibatches=3"),
        (["--env-name", "CartPol-v1"], "Close matches: CartPole-v1"),
        (["--learning-rate", "fast"], "learning_rate must be a number"),
    ],
)
def test_bad_input_exits_with_a_clear_message(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run-dir", str(tmp_path / "x"), "--no-progress", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_config_files_load_and_build(tmp_path):
    config_dir = os.path.join(os.path.dirname(__file__), "..", "configs")
    names = sorted(n for n in os.listdir(config_dir) if n.endswith(".yaml"))
    assert {
        "cartpole.yaml",
        "acrobot.yaml",
        "pendulum.yaml",
        "mountaincar_continuous.yaml",
        "breakout_minatar.yaml",
    } <= set(names)
    assert {f"probe{i}.yaml" for i in range(1, 8)} <= set(names)
    for name in names:
        config = pjp.PPOConfig.from_yaml(os.path.join(config_dir, name))
        # Builds the env and networks (no training): catches bad ids and spaces.
        fns = pjp.make_train_fns(config)
        runner = jax.eval_shape(fns.init, jax.random.key(0))
        assert runner.update_step.shape == ()


def test_console_script_default_style_run(tmp_path):
    # The installed entry point, in a fresh process, with a progress bar.
    exe = os.path.join(os.path.dirname(sys.executable), "purejaxppo")
    proc = subprocess.run(
        [exe, "train", "--total-timesteps", "20480", "--run-dir", str(tmp_path / "cli")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "final mean episode_return" in proc.stdout
    assert "update" in proc.stderr  # the tqdm bar
    assert (tmp_path / "cli" / "learning_curve.png").exists()


@pytest.mark.parametrize(
    "flag, suggestion",
    [
        ("--learnig-rate", "--learning-rate"),  # a typo
        ("--learning-rat", "--learning-rate"),  # a prefix: no abbreviations (allow_abbrev)
        ("--num-env", "--num-envs"),
    ],
)
def test_mistyped_flag_exits_2_with_a_suggestion_and_the_subcommand_usage(flag, suggestion, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", flag, "1e-3"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"did you mean {suggestion}" in err
    assert "usage: purejaxppo train" in err  # the subcommand's usage, not the top level's
    assert f"unrecognized arguments: {flag} 1e-3" in err


@pytest.mark.parametrize(
    "argv, hint",
    [
        (
            ["train", "--env", "Acrobot-v1"],
            "did you mean --env-name, for RL Zoo's and rejax's env?",
        ),
        (["train", "--env-id", "Acrobot-v1"], "did you mean --env-name, for CleanRL's env_id?"),
        (["sweep", "--n-epochs", "3"], "did you mean --update-epochs, for SB3's n_epochs?"),
        (["tune", "--clip-range=0.1"], "did you mean --clip-coef, for SB3's clip_range?"),
    ],
)
def test_another_librarys_flag_gets_ours_and_whose_it_is(argv, hint, capsys):
    # difflib alone answered RL Zoo's --env with --num-envs
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {' '.join(argv[1:])} ({hint})" in err, err


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["train", "CartPole-v1"], "CartPole-v1 (did you mean --env-name CartPole-v1?)"),
        (["check", "envpool:Hopper-v4"], "(did you mean --env-name envpool:Hopper-v4?)"),
        (["train", "my.yaml"], "my.yaml (did you mean --config my.yaml?)"),
        (
            ["train", "--learning-rate", "1e-3", "3e-4"],
            "3e-4 (did you mean one run per value: purejaxppo sweep --grid FIELD=V1,V2?)",
        ),
        (["train", "--env", "Acrobot-v1"], "Acrobot-v1 (did you mean --env-name, for RL Zoo"),
        (["train", "CartPole-v1", "{a: 1, a: 2}"], "(did you mean --env-name CartPole-v1?)"),
    ],
)
def test_a_word_no_flag_took_gets_the_flag_it_belongs_to(argv, hint, capsys):
    """An env id or a config file given as a positional, a second value of a one-value
    flag; the value of an unknown flag gets that flag's hint only."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: " in err and hint in err, err
    assert err.count("did you mean") == 1, err


@pytest.mark.parametrize("command", ["train", "sweep", "pbt", "tune", "check"])
def test_a_tuple_field_takes_its_items_as_one_word_or_several(command):
    """`--hidden-sizes 64 64` (tyro's convention) is `--hidden-sizes 64,64`; the next flag
    ends the list, and a scalar field still takes one word."""
    from purejaxppo.cli.parser import build_parser
    from purejaxppo.cli.values import load_config

    parser = build_parser()

    def config(*flags):
        args = vars(parser.parse_args([command, *flags]))
        return load_config(
            None, {k: v for k, v in args.items() if k in pjp.PPOConfig.__annotations__}
        )

    spaced = config(
        "--hidden-sizes", "32", "16", "--loggers", "csv", "tensorboard", "--num-envs", "8"
    )
    commas = config("--hidden-sizes", "32,16", "--loggers", "csv,tensorboard", "--num-envs", "8")
    assert spaced == commas
    assert spaced.hidden_sizes == (32, 16) and spaced.loggers == ("csv", "tensorboard")
    assert config("--hidden-sizes", "16").hidden_sizes == (16,)
    assert config("--head-hidden-sizes", "null").head_hidden_sizes is None
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--num-envs", "8", "16"])  # one word: 16 is unrecognized


def test_sweep_and_pbt_refuse_abbreviations_too(capsys):
    for argv in (["sweep", "--num-sampl", "3"], ["pbt", "--populatio", "4"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert f"usage: purejaxppo {argv[0]}" in err and "did you mean --" in err


def test_resume_says_where_it_resumed(tmp_path, capsys):
    run_dir = tmp_path / "r"
    argv = ["train", "--total-timesteps", "2048", "--save-freq", "2", "--log-freq", "2"]
    assert main([*argv, "--run-dir", str(run_dir), "--no-progress"]) == 0
    # Keep the checkpoint of update 2 only, as if the run had been killed after it.
    shutil.rmtree(run_dir / "checkpoints" / "last" / "4")
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert f"resumed from update 2 (step 1024) in {run_dir}" in captured.err
    assert len(pd.read_csv(run_dir / "metrics.csv")) == 4  # updates 3 and 4 ran again
