"""Options the seed libraries' users reach for (issue #26, items 3-4): `log_std_init`,
one-hot Discrete observations, n-step returns and the total `loss` metric."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import purejaxppo as pjp
from purejaxppo.networks import make_networks

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_log_std_init_sets_the_initial_std_and_is_exported(tmp_path):
    config = pjp.PPOConfig(env_name="Pendulum-v1", log_std_init=-0.7)
    env, env_params = pjp.make_env(config.env_name)
    networks = make_networks(config, env, env_params)
    params = networks.init(jax.random.key(0))
    dist, _ = networks.apply(params, jnp.zeros((3, 3)))
    # std = exp(-0.7) = 0.496585...
    np.testing.assert_allclose(dist.stddev(), np.full((3, 1), math.exp(-0.7)), rtol=1e-6)
    pjp.export_torch(params, config, tmp_path / "policy.pt")
    state = torch.load(tmp_path / "policy.state_dict.pt")
    np.testing.assert_allclose(state["log_std"].numpy(), [-0.7], rtol=1e-6)
    # The default keeps the old init (log_std 0: std 1), so golden runs stay bitwise.
    default = make_networks(pjp.PPOConfig(env_name="Pendulum-v1"), env, env_params)
    assert float(default.init(jax.random.key(0))["params"]["log_std"][0]) == 0.0
