"""Export of a multi-agent (IPPO) shared policy: PyTorch parity on every agent's rows.

The IPPO policy is the single-agent network applied to the rows `[N * A]` of the agents'
observations, so `export_torch` writes it like any policy; here its torch program (.pt2)
and module source + state_dict must match JAX on real observations of N envs x A agents
(MPE: arrays; SMAX: dict observations with the action mask). MAPPO's centralised critic
sees the world state (towers on different inputs): its export is refused with a
ValueError naming the setting.
"""

from __future__ import annotations

import importlib.util
import json
import math

import jax
import numpy as np
import pytest
import torch

import purejaxppo as pjp
from purejaxppo.envs import make_env
from purejaxppo.export import export_torch
from purejaxppo.multiagent import configure_env, reset_agents
from purejaxppo.networks import apply_action_mask

TOL = 1e-5
CASES = {
    "mpe": ("jaxmarl:MPE_simple_spread_v3", {"agent_ids": True}),
    "smax": ("jaxmarl:HeuristicEnemySMAX", {"scenario": "3m"}),
}


def random_params(networks, seed):
    """Params of the network's shapes drawn with numpy: kernels N(0, 1/fan_in), biases
    N(0, 0.5^2) (larger than the init's, so the actor head's outputs are not ~0)."""
    rng = np.random.default_rng(seed)

    def draw(leaf):
        scale = 1.0 / math.sqrt(math.prod(leaf.shape[:-1])) if leaf.ndim >= 2 else 0.5
        return rng.normal(0.0, scale, leaf.shape).astype(np.float32)

    return jax.tree.map(draw, jax.eval_shape(networks.init, jax.random.key(0)))


def load_module(path):
    spec = importlib.util.spec_from_file_location("exported_ippo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def to_torch(obs):
    if isinstance(obs, dict):
        return {k: torch.from_numpy(np.array(v, np.float32)) for k, v in obs.items()}
    return torch.from_numpy(np.array(obs, np.float32))


@pytest.mark.parametrize("case", list(CASES))
def test_ippo_export_keeps_torch_parity_on_every_agent_row(tmp_path, case):
    env_name, kwargs = CASES[case]
    config = pjp.PPOConfig(
        env_name=env_name, env_kwargs=kwargs, multi_agent="ippo", hidden_sizes=(32, 16)
    )
    fns = pjp.make_train_fns(config)
    params = random_params(fns.networks, seed=len(case))
    env, env_params = make_env(env_name, kwargs)
    env = configure_env(config, env)
    carry = jax.jit(lambda k: reset_agents(env, env_params, k, 6, fns.networks))(jax.random.key(0))
    obs = carry.obs  # [6 * A, ...]: every agent's row of 6 envs

    @jax.jit
    def reference(obs):
        _, actor_out, value, _ = fns.networks.module.apply(params, None, obs)
        if isinstance(obs, dict):  # SMAX: unavailable actions masked
            actor_out = apply_action_mask(actor_out, obs["action_mask"])
        return actor_out, value

    logits, value = (np.asarray(x) for x in reference(obs))
    if case == "smax":  # the mask is not all-True, so masking is exercised
        assert not np.asarray(obs["action_mask"]).all()

    path = export_torch(params, config, tmp_path / "policy.pt", env, env_params)
    meta = json.loads(path.with_suffix(".json").read_text())
    net = getattr(load_module(path.with_suffix(".module.py")), meta["class_name"])(
        **meta["constructor"]
    )
    net.load_state_dict(torch.load(path.with_suffix(".state_dict.pt")), strict=True)
    net.eval()
    program = torch.export.load(path.with_suffix(".pt2")).module()
    with torch.no_grad():
        routes = {"module": net(to_torch(obs)), "pt2": program(to_torch(obs))}
        greedy = net.act_greedy(to_torch(obs)).numpy()
    for route, (actor_out, torch_value) in routes.items():
        np.testing.assert_allclose(actor_out.numpy(), logits, atol=TOL, err_msg=route)
        np.testing.assert_allclose(torch_value.numpy(), value, atol=TOL, err_msg=route)
    np.testing.assert_array_equal(greedy, logits.argmax(axis=-1))
    # the rows differ (agents see different observations), so parity is not trivial
    assert not np.allclose(logits[0], logits[1])


def test_mappo_export_is_refused(tmp_path):
    config = pjp.PPOConfig(env_name=CASES["mpe"][0], multi_agent="mappo")
    params = jax.jit(pjp.make_train_fns(config).networks.init)(jax.random.key(0))
    with pytest.raises(ValueError, match=r"multi_agent='mappo'.*centralised critic"):
        export_torch(params, config, tmp_path / "policy.pt")
