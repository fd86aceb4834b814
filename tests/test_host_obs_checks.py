"""A host env's bad observations are the env's error, naming the env: non-finite values
(not blamed on the learning rate), another shape, or something that is not a number."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.envs.suites.gymnasium import from_factory
from purejaxppo.errors import EnvError


class Faulty(gym.Env):
    """Observations of shape (2,); step 2 returns what `fault` says."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fault: str = "nan"):
        self.fault, self.t = fault, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.zeros(2, np.float32)
        if self.t == 2:
            obs = {
                "nan": np.array([np.nan, 0.0], np.float32),
                "shape": np.zeros(3, np.float32),
                "type": "not an observation",
            }[self.fault]
        return obs, 1.0, False, False, {}


def make_faulty_nan():
    return Faulty("nan")


def make_faulty_shape():
    return Faulty("shape")


def make_faulty_type():
    return Faulty("type")


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            make_faulty_nan,
            r"env gymnasium:faulty returned a non-finite observation \(env 0\) in step",
        ),
        # gymnasium's vector env refuses these itself; the error still names the env
        (make_faulty_shape, r"env gymnasium:faulty raised in step: .*wrong shape"),
        (make_faulty_type, r"env gymnasium:faulty .*in step"),
    ],
)
def test_bad_observations_name_the_env(factory, message):
    env = from_factory(factory, name="faulty")
    vec = env.make_vec(2)
    obs = vec.reset([0, 1])
    assert obs.shape == (2, 2) and obs.dtype == np.float32
    vec.step(np.zeros(2, np.int64))  # step 1: fine
    with pytest.raises(EnvError, match=message):
        vec.step(np.zeros(2, np.int64))


def test_training_on_nan_observations_blames_the_env_not_the_learning_rate():
    env = from_factory(make_faulty_nan, name="faulty")
    config = pjp.PPOConfig(
        env_name="gymnasium:faulty", num_envs=2, num_steps=4, hidden_sizes=(8,), total_timesteps=16
    )
    train = pjp.make_train(config, env=env)
    with pytest.raises(Exception) as err:
        train(jax.random.key(0))
    text = str(err.value)
    assert "non-finite observation" in text and "gymnasium:faulty" in text
    assert "learning_rate" not in text


class Hangs(gym.Env):
    """Steps forever (a hung env)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        import time

        time.sleep(3600)


def make_hanging():
    return Hangs()


def test_a_stop_at_once_kills_the_workers_of_a_hung_async_env():
    import threading

    from purejaxppo.envs import host

    vec = from_factory(make_hanging, name="hangs").make_vec(2, "async")
    vec.reset([0, 1])
    ended = []

    def step() -> None:
        try:
            vec.step(np.zeros(2, np.int64))
        except EnvError as err:  # once its workers are killed
            ended.append(str(err))

    stepping = threading.Thread(target=step, daemon=True)
    stepping.start()
    stepping.join(1.0)
    assert stepping.is_alive()  # hung in the workers
    workers = [p for v in list(host._WITH_WORKERS) for p in v.processes]
    assert len(workers) >= 2 and all(p.is_alive() for p in workers)
    assert host.kill_workers() >= 2
    assert not any(p.is_alive() for p in workers)
    stepping.join(10)
    assert ended and "a worker process died during step" in ended[0]
