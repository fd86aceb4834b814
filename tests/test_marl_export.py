"""Export of a multi-agent (IPPO, MAPPO) shared policy: PyTorch parity on every agent's rows.

The IPPO policy is the single-agent network applied to the rows `[N * A]` of the agents'
observations, so `export_torch` writes it like any policy; here its torch program (.pt2)
and module source + state_dict must match JAX on real observations of N envs x A agents
(MPE: arrays; SMAX: dict observations with the action mask). MAPPO's towers encode
different inputs (the actor "obs", the critic "world_state"); its export keeps the same
parity, with observation statistics and a GRU per tower.
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
from purejaxppo.envs.agent_rows import agent_rows
from purejaxppo.export import export_torch
from purejaxppo.kinds.agents import configure_env
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
    rows = agent_rows(env, env_params)
    carry = jax.jit(lambda k: rows.reset(k, 6, fns.networks))(jax.random.key(0))
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


@pytest.mark.parametrize("case,recurrent", [("mpe", None), ("smax", "gru")])
def test_mappo_export_keeps_torch_parity_with_towers_on_their_own_inputs(tmp_path, case, recurrent):
    """MAPPO's actor encodes "obs" and its critic "world_state" (tower_inputs): the torch
    module mirrors that, with observation statistics per tower (MPE) and a GRU per tower
    (SMAX, with the action mask)."""
    env_name, kwargs = CASES[case]
    config = pjp.PPOConfig(
        env_name=env_name, env_kwargs=kwargs, multi_agent="mappo", hidden_sizes=(32,),
        recurrent=recurrent, recurrent_size=16, normalize_observations=recurrent is None,
    )  # fmt: skip
    fns = pjp.make_train_fns(config)
    params = random_params(fns.networks, seed=7)
    if "obs_norm" in params:  # statistics: a count and positive variances
        params["obs_norm"]["var"] = jax.tree.map(np.abs, params["obs_norm"]["var"])
        params["obs_norm"]["count"] = np.float32(100.0)
    env, env_params = make_env(env_name, kwargs)
    env = configure_env(config, env)
    agents = agent_rows(env, env_params)
    carry = jax.jit(lambda k: agents.reset(k, 4, fns.networks))(jax.random.key(0))
    obs = carry.obs  # {"obs": [4 * A, D], "world_state": [4 * A, W], ...}
    rows = obs["obs"].shape[0]
    state = np.asarray(
        jax.random.normal(jax.random.key(1), (rows, 32)) if recurrent else np.zeros((rows, 0))
    ).astype(np.float32)
    resets = jax.numpy.zeros((rows,), bool)

    @jax.jit
    def reference(obs, state):
        new_state, dist, value = fns.networks.step(params, state if recurrent else (), obs, resets)
        return dist.logits, value, new_state  # normalised: log-probabilities

    logits, value, new_state = reference(obs, state)
    logits, value = np.asarray(logits), np.asarray(value)

    path = export_torch(params, config, tmp_path / "policy.pt", env, env_params)
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["constructor"]["tower_inputs"] is not None
    net = getattr(load_module(path.with_suffix(".module.py")), meta["class_name"])(
        **meta["constructor"]
    )
    net.load_state_dict(torch.load(path.with_suffix(".state_dict.pt")), strict=True)
    net.eval()
    program = torch.export.load(path.with_suffix(".pt2")).module()
    args = (to_torch(obs),) + ((torch.from_numpy(state),) if recurrent else ())
    with torch.no_grad():
        routes = {"module": net(*args), "pt2": program(*args)}
    valid = np.asarray(obs["action_mask"]) if "action_mask" in obs else np.ones_like(logits, bool)
    for route, out in routes.items():
        log_probs = torch.log_softmax(out[0], -1).numpy()
        np.testing.assert_allclose(
            np.where(valid, log_probs, 0.0), np.where(valid, logits, 0.0), atol=TOL,
            err_msg=route,
        )  # fmt: skip
        np.testing.assert_allclose(out[1].numpy(), value, atol=TOL, err_msg=route)
        if recurrent:
            np.testing.assert_allclose(out[2].numpy(), np.asarray(new_state), atol=TOL)
    # the critic encodes the world state only: moving the obs leaves the value unchanged
    moved = {**to_torch(obs), "obs": to_torch(obs)["obs"] + 1.0}
    with torch.no_grad():
        moved_out = net(moved, *args[1:])
    np.testing.assert_allclose(moved_out[1].numpy(), routes["module"][1].numpy(), atol=TOL)
    assert not np.allclose(moved_out[0].numpy(), routes["module"][0].numpy())
