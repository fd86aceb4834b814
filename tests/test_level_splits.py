"""Level-distribution eval splits (issue #26 item 5): an `eval_splits` entry that gives a
Jumanji env's level generator arguments (`{"generator": {...}}`, `acting.level_generator`);
gymnax / XLand-MiniGrid levels are `EnvParams` fields, the split's other keys."""

from __future__ import annotations

import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.drivers.single import train_and_log

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_level_distribution_split_reports_its_own_return(tmp_path):
    # Jumanji's RubiksCube-partly-scrambled-v0 scrambles 7 moves on reset; the split's
    # generator scrambles 1. An (untrained, 2-update) policy of random moves solves a
    # one-move scramble within the 20-step limit in about 7% of the episodes (0.074 over
    # 256 measured at init), a seven-move one almost never (0.0): reward 1 per solve.
    config = pjp.PPOConfig(
        env_name="jumanji:RubiksCube-partly-scrambled-v0", num_envs=4, num_steps=20,
        total_timesteps=160, num_minibatches=1, eval_freq=2, eval_episodes=512, log_freq=2,
        eval_splits={"train": {}, "one_move": {"generator": {"num_scrambles_on_reset": 1}}},
    )  # fmt: skip
    train_and_log(config, tmp_path / "run", progress=False, plot=False)
    table = pd.read_csv(tmp_path / "run" / "metrics.csv")
    train = table["eval/train/return"].dropna().iloc[-1]
    one_move = table["eval/one_move/return"].dropna().iloc[-1]
    print(f"eval returns: train (7 moves) {train}, one_move {one_move}")
    # 512 episodes: the std of a 0.07 rate's mean is 0.011.
    assert one_move >= 0.035 and train <= 0.01, (train, one_move)


def test_level_splits_refuse_what_they_cannot_do():
    from purejaxppo.acting import make_evaluators

    cube = "jumanji:RubiksCube-partly-scrambled-v0"
    with pytest.raises(ValueError, match=r"generator=\{'scrambles': 1\} must map arguments of "
                       r"ScramblingGenerator \(\['cube_size', 'num_scrambles_on_reset'\]\)"):  # fmt: skip
        make_evaluators(
            pjp.PPOConfig(
                env_name=cube, eval_freq=1, eval_splits={"x": {"generator": {"scrambles": 1}}}
            )
        )
    # Another cube size changes the observation's shape: both spaces named.
    with pytest.raises(ValueError, match=r"Box\(\(6, 2, 2\), int8\).*Box\(\(6, 3, 3\), int8\)"):
        make_evaluators(
            pjp.PPOConfig(
                env_name=cube, eval_freq=1, eval_splits={"x": {"generator": {"cube_size": 2}}}
            )
        )
    with pytest.raises(ValueError, match="'CartPole-v1' has none .*EnvParams fields"):
        make_evaluators(pjp.PPOConfig(eval_freq=1, eval_splits={"x": {"generator": {"n": 1}}}))


def test_xland_minigrid_levels_are_envparams_fields():
    from purejaxppo.acting import make_evaluators

    config = pjp.PPOConfig(env_name="xminigrid:MiniGrid-Empty-6x6", eval_freq=1)
    short = config.replace(eval_splits={"short": {"max_steps": 10}})
    assert list(make_evaluators(short)) == ["short"]
    # A smaller view is another observation shape: refused, naming both spaces.
    with pytest.raises(ValueError, match=r"Box\(\(5, 5, 2\), uint8\).*Box\(\(7, 7, 2\), uint8\)"):
        make_evaluators(config.replace(eval_splits={"narrow": {"view_size": 5}}))
