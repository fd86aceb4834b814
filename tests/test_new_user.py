"""What a new user types, answered: an id another suite knows gets its prefixed id; a user's
own registered gymnasium env trains with an explicit `--import MODULE` on the command line
(a config file never imports), and an env id naming a module says how."""

from __future__ import annotations

import sys
import textwrap

import pytest

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.envs.registry import unknown_id_message

TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]


@pytest.mark.parametrize(
    ("env_id", "suggestion"),
    [
        ("HalfCheetah-v4", "use env_name='envpool:HalfCheetah-v4' (or 'gymnasium:HalfCheetah-v4')"),
        ("Pong-v5", "use env_name='envpool:Pong-v5'"),
        ("PongNoFrameskip-v4", "use env_name='envpool:Pong-v5'"),  # CleanRL's, SB3's
        ("ALE/Breakout-v5", "use env_name='envpool:Breakout-v5'"),  # gymnasium's
        ("LunarLander-v3", "use env_name='gymnasium:LunarLander-v3'"),
    ],
)
def test_an_id_another_suite_knows_gets_the_prefixed_id(env_id, suggestion):
    message = unknown_id_message(env_id)
    assert suggestion in message and "MountainCar" not in message
    with pytest.raises(ValueError, match="another suite knows it"):
        pjp.make_env(env_id)


def test_an_unknown_id_still_gets_close_gymnax_matches():
    assert "Close matches: CartPole-v1" in unknown_id_message("CartPol-v1")


@pytest.fixture()
def user_package(tmp_path, monkeypatch):
    """A package `userenvs_goright` that registers gymnasium "GoRightUser-v0" on import."""
    package = tmp_path / "userenvs_goright"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            import gymnasium as gym
            import numpy as np

            class GoRight(gym.Env):
                observation_space = gym.spaces.Box(-1.0, 10.0, (1,), np.float32)
                action_space = gym.spaces.Discrete(2)

                def reset(self, seed=None, options=None):
                    super().reset(seed=seed)
                    self.x = 0
                    return np.zeros(1, np.float32), {}

                def step(self, action):
                    self.x += int(action)
                    obs = np.array([self.x], np.float32)
                    return obs, float(action), self.x >= 5, False, {}

            gym.register("GoRightUser-v0", entry_point=GoRight, max_episode_steps=20)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "userenvs_goright"
    sys.modules.pop("userenvs_goright", None)


def test_import_flag_trains_a_users_registered_gymnasium_env(user_package, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", *TINY, "--total-timesteps", "256", "--run-dir", str(run)]
    # Named with its module in the id: refused, saying how to import it.
    with pytest.raises(SystemExit) as refused:
        main([*argv, "--env-name", f"gymnasium:{user_package}:GoRightUser-v0"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert f"--import {user_package} --env-name gymnasium:GoRightUser-v0" in err
    assert not run.exists()
    # With --import: it trains, and the policy evaluates to the env's return (<= 5).
    code = main([*argv, "--import", user_package, "--env-name", "gymnasium:GoRightUser-v0"])
    assert code == 0 and (run / "metrics.csv").is_file()
    result = pjp.evaluate(pjp.Policy.load(run), num_episodes=2)
    assert result.returns.shape == (2,) and (result.returns <= 5.0).all()
    # A module that does not import is one line.
    with pytest.raises(SystemExit) as missing:
        main(["train", "--import", "no_such_module_xyz"])
    assert missing.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "purejaxppo: error: --import no_such_module_xyz: ModuleNotFoundError: "
        "No module named 'no_such_module_xyz'"
    ]
