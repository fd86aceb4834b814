"""AgileRL-style network options (issue 40): `head_hidden_sizes`, `recurrent_layers`,
`latent_dim`. Their defaults build today's network bitwise; the torch export parity of
each option is in `test_export_torch.py` (cases "head-hidden", "lstm-linear-heads",
"lstm-stacked-3", "gru-stacked-separate", "dict-latent")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

import purejaxppo as pjp
from purejaxppo.export import param_map
from purejaxppo.networks import make_networks

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

B, T = 3, 5


class DictEnv:
    """Just the spaces: a dict observation of two vectors, Discrete(3) actions."""

    name = "DictEnv"
    default_params = None

    def observation_space(self, params=None):
        box = spaces.Box(-1.0, 1.0, (4,), jnp.float32)
        return spaces.Dict({"a": box, "b": spaces.Box(-1.0, 1.0, (2,), jnp.float32)})

    def action_space(self, params=None):
        return spaces.Discrete(3)


def shapes(config, env=None):
    """{flax param name: shape} of the config's network (CartPole by default)."""
    env, env_params = (env, None) if env is not None else pjp.make_env("CartPole-v1")
    networks = make_networks(config, env, env_params)
    tree = jax.eval_shape(networks.init, jax.random.key(0))
    return {k: tuple(v.shape) for k, v in param_map.flatten(tree).items()}, networks


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (dict(head_hidden_sizes=[8, 0]), "head_hidden_sizes=[8, 0]"),
        (dict(latent_dim=0), "latent_dim=0"),
        (dict(recurrent="lstm", recurrent_layers=0), "recurrent_layers=0"),
        (dict(recurrent_layers=2), "recurrent_layers=2"),  # no core to stack
        (dict(recurrent="transformer", recurrent_layers=2), "recurrent_layers=2"),
    ],
)
def test_bad_values_raise_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[")):
        pjp.PPOConfig(**changes)


def test_yaml_round_trip_keeps_empty_heads_apart_from_default():
    linear = pjp.PPOConfig(recurrent="gru", head_hidden_sizes=[])
    assert linear.head_hidden_sizes == () and pjp.PPOConfig().head_hidden_sizes is None
    assert pjp.PPOConfig.from_dict(linear.to_dict()) == linear


def test_defaults_build_todays_heads():
    names, _ = shapes(pjp.PPOConfig())  # feed-forward: linear heads on the 64-64 MLP
    assert names["actor_head/out/kernel"] == (64, 2)
    assert not [n for n in names if "dense" in n and "head" in n or "latent" in n]
    names, _ = shapes(pjp.PPOConfig(recurrent="lstm"))  # one hidden layer of 64
    assert names["actor_head/dense_0/kernel"] == (64, 64)
    assert "actor_head/dense_1/kernel" not in names and "core/cell/ii/kernel" in names


def test_explicit_default_values_are_bitwise_the_default_network():
    env, env_params = pjp.make_env("CartPole-v1")
    obs = jax.random.normal(jax.random.key(1), (B, 4))
    base = pjp.PPOConfig(recurrent="lstm", recurrent_size=8)
    same = base.replace(head_hidden_sizes=[64], recurrent_layers=1, latent_dim=None)
    outs = []
    for config in (base, same):
        networks = make_networks(config, env, env_params)
        params = networks.init(jax.random.key(0))
        dist, value = networks.apply(params, obs)
        outs.append((params, dist.logits, value))
    equal = jax.tree.map(lambda a, b: bool(jnp.all(a == b)), outs[0], outs[1])
    assert all(jax.tree.leaves(equal))


def test_head_hidden_sizes_set_both_heads():
    names, _ = shapes(pjp.PPOConfig(head_hidden_sizes=[16, 8]))
    for head in ("actor_head", "critic_head"):
        assert names[f"{head}/dense_0/kernel"] == (64, 16)
        assert names[f"{head}/dense_1/kernel"] == (16, 8)
    assert names["actor_head/out/kernel"] == (8, 2) and names["critic_head/out/kernel"] == (8, 1)
    names, _ = shapes(pjp.PPOConfig(recurrent="gru", recurrent_size=4, head_hidden_sizes=[]))
    assert names["actor_head/out/kernel"] == (4, 2)  # linear heads on the core
    assert not any("head/dense" in n for n in names)


@pytest.mark.parametrize(("kind", "per_layer"), [("lstm", 2 * 6), ("gru", 6)])
def test_stacked_cores_state_and_unroll(kind, per_layer):
    # 3 cells of 6 units: S = 3 * (2 * 6) = 36 (LSTM [c, h] per layer) or 3 * 6 = 18 (GRU);
    # separate towers double it.
    config = pjp.PPOConfig(recurrent=kind, recurrent_size=6, recurrent_layers=3)
    names, networks = shapes(config)
    assert networks.initial_state(B).shape == (B, 3 * per_layer)
    assert pjp.networks.state_size(config.replace(share_encoder=False)) == 6 * per_layer
    assert names[f"core/cell_0/i{'i' if kind == 'lstm' else 'r'}/kernel"] == (64, 6)
    assert names[f"core/cell_2/i{'i' if kind == 'lstm' else 'r'}/kernel"] == (6, 6)
    assert not any(n.startswith("core/cell/") for n in names)
    # unroll over T steps with a reset equals T single steps; every layer's state moves.
    params = networks.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (T, B, 4))
    resets = jnp.zeros((T, B), bool).at[0].set(True).at[2, 1].set(True)
    state, dist, value = networks.unroll(params, networks.initial_state(B), obs, resets)
    step_state = networks.initial_state(B)
    for t in range(T):
        step_state, step_dist, step_value = networks.step(params, step_state, obs[t], resets[t])
        np.testing.assert_allclose(step_dist.logits, dist.logits[t], atol=1e-5)
        np.testing.assert_allclose(step_value, value[t], atol=1e-5)
    np.testing.assert_allclose(step_state, state, atol=1e-5)
    layers = np.asarray(state).reshape(B, 3, per_layer)
    assert np.all(np.abs(layers).sum(axis=(0, 2)) > 0)


def test_latent_dim_projects_every_input_before_concatenation():
    # dict obs {"a": [4], "b": [2]}, hidden_sizes (8,), latent_dim 5: features 2 * 5 = 10.
    config = pjp.PPOConfig(hidden_sizes=(8,), latent_dim=5)
    names, networks = shapes(config, DictEnv())
    for tower in ("actor_encoder", "critic_encoder"):
        assert names[f"{tower}/a_mlp/dense_0/kernel"] == (4, 8)
        assert names[f"{tower}/a_latent/kernel"] == (8, 5)
        assert names[f"{tower}/b_latent/kernel"] == (8, 5)
    assert names["actor_head/out/kernel"] == (10, 3)
    params = networks.init(jax.random.key(0))
    obs = {"a": jnp.ones((B, 4)), "b": jnp.ones((B, 2))}
    dist, value = networks.apply(params, obs)
    assert dist.logits.shape == (B, 3) and value.shape == (B,)
