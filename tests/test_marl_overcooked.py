"""Overcooked through JaxMARL (`jaxmarl:overcooked`): the cramped_room IPPO config's
spaces, and a two-update smoke run of it at a tiny size (one compile, ~1 min on 2 cores)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.envs import make_env

CONFIG = (
    Path(__file__).resolve().parents[1] / "configs" / "jaxmarl_overcooked_cramped_room_ippo.yaml"
)


def test_cramped_room_spaces_and_bad_layout():
    env, params = make_env("jaxmarl:overcooked", {"layout": "cramped_room"})
    # the arrays reset gives are [H, W, C] = [4, 5, 26] (JaxMARL's space says [5, 4, 26])
    assert env.num_agents == 2 and env.observation_space(params).shape == (4, 5, 26)
    obs, _ = env.reset(jax.random.key(0), params)
    assert obs.shape == (2, 4, 5, 26)
    assert env.action_space(params).n == 6 and env.max_steps == 400
    with pytest.raises(ValueError, match=r"layout='cramped_rom' is not an Overcooked layout"):
        make_env("jaxmarl:overcooked", {"layout": "cramped_rom"})


def test_ippo_config_smoke_run():
    config = pjp.PPOConfig.from_yaml(
        CONFIG, num_envs=2, num_steps=8, total_timesteps=2 * 8 * 2, num_minibatches=2
    )
    out = jax.jit(pjp.make_train(config))(jax.random.key(0))
    assert out.metrics["env_steps"][-1] == 2 * 8 * 2
    assert np.isfinite(np.asarray(out.metrics["loss"])).all()
    assert np.isnan(out.metrics["episode_return"]).all()  # 400-step episodes: none ended
    conv = out.train_state.params["params"]
    kernels = [x.shape for x in jax.tree.leaves(conv) if x.ndim == 4]
    assert kernels[0] == (2, 2, 26, 32)  # the grid's 26 channels into the first conv
