"""Weight transfer between MLP architectures (`networks.evolve`): the widened / deepened
network computes the same function; blocks are copied; Adam's moments follow."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.networks.evolve import transfer_params, transfer_train_state
from purejaxppo.train import make_train_fns

BASE = pjp.PPOConfig(num_envs=2, num_steps=8, total_timesteps=2 * 8 * 2)


def _fns(hidden_sizes, activation="tanh"):
    return make_train_fns(BASE.replace(hidden_sizes=hidden_sizes, activation=activation))


def _outputs(fns, params, obs):
    """(logits, value) of the actor-critic on `obs` `[B, 4]`."""
    dist, value = fns.networks.apply(params, obs)[:2]
    return np.asarray(dist.logits), np.asarray(value)


@pytest.mark.parametrize(
    ("old", "new", "activation"),
    [
        ((8,), (16,), "tanh"),  # widen the only layer
        ((8, 8), (8, 24), "tanh"),  # widen the last layer
        ((8, 8), (16, 16), "tanh"),  # widen both
        ((8,), (8, 8), "relu"),  # add a layer: identity (relu(relu(x)) = relu(x))
        ((8, 8), (16, 16, 12), "relu"),  # widen and add
    ],
)
def test_widen_and_add_layer_keep_the_function(old, new, activation):
    old_fns, new_fns = _fns(old, activation), _fns(new, activation)
    old_state = old_fns.init(jax.random.key(0)).train_state
    fresh = jax.device_get(new_fns.init(jax.random.key(1)).train_state)
    moved = transfer_params(jax.device_get(old_state.params), fresh.params)
    obs = jax.random.normal(jax.random.key(2), (5, 4))
    got_logits, got_value = _outputs(new_fns, moved, obs)
    want_logits, want_value = _outputs(old_fns, old_state.params, obs)
    np.testing.assert_allclose(got_logits, want_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_value, want_value, rtol=1e-5, atol=1e-6)


def test_widening_copies_the_block_and_keeps_new_units_fresh():
    old = {"dense_0": {"kernel": np.full((3, 2), 7.0), "bias": np.full(2, 5.0)}}
    old["dense_1"] = {"kernel": np.full((2, 1), 9.0), "bias": np.zeros(1)}
    new = {"dense_0": {"kernel": np.ones((3, 4)), "bias": np.ones(4)}}
    new["dense_1"] = {"kernel": np.ones((4, 1)), "bias": np.ones(1)}
    out = transfer_params(old, new)
    # dense_0 [3, 2] -> [3, 4]: old block in columns 0-1; new units 2-3 keep their init
    np.testing.assert_array_equal(out["dense_0"]["kernel"], [[7, 7, 1, 1]] * 3)
    np.testing.assert_array_equal(out["dense_0"]["bias"], [5, 5, 1, 1])
    # dense_1 [2, 1] -> [4, 1]: rows of the new units (2-3) are zero: no effect downstream
    np.testing.assert_array_equal(out["dense_1"]["kernel"], [[9], [9], [0], [0]])


def test_added_layer_is_identity_then_fresh_units():
    old = {"dense_0": {"kernel": np.ones((3, 2)), "bias": np.zeros(2)}}
    new = {"dense_0": {"kernel": np.ones((3, 2)), "bias": np.zeros(2)}}
    new["dense_1"] = {"kernel": np.full((2, 3), 4.0), "bias": np.full(3, 4.0)}
    out = transfer_params(old, new)
    # [2, 3]: columns 0-1 are the identity (eye(2)), zero bias; column 2 a fresh unit
    np.testing.assert_array_equal(out["dense_1"]["kernel"], [[1, 0, 4], [0, 1, 4]])
    np.testing.assert_array_equal(out["dense_1"]["bias"], [0, 0, 4])


def test_train_state_moves_adam_moments_and_count():
    old_fns, new_fns = _fns((8,)), _fns((16, 16))
    runner = old_fns.init(jax.random.key(0))
    old_state = jax.device_get(runner.train_state)
    old_state = old_state.replace(
        opt_state=jax.tree.map(lambda x: np.ones_like(x) * 3, old_state.opt_state)
    )
    fresh = jax.device_get(new_fns.init(jax.random.key(1)).train_state)
    moved = transfer_train_state(old_state, fresh)
    assert jax.tree.structure(moved.opt_state) == jax.tree.structure(fresh.opt_state)
    for got, want in zip(
        jax.tree.leaves(moved.opt_state), jax.tree.leaves(fresh.opt_state), strict=True
    ):
        assert got.shape == want.shape
    from jax.flatten_util import ravel_pytree  # Adam's moments are one raveled vector

    unravel = ravel_pytree(fresh.params)[1]
    mu = unravel(moved.opt_state[0][1].mu)["params"]["actor_encoder"]["obs_mlp"]
    np.testing.assert_array_equal(mu["dense_0"]["kernel"][:, :8], 3)  # copied block
    np.testing.assert_array_equal(mu["dense_0"]["kernel"][:, 8:], 0)  # new units: fresh
    np.testing.assert_array_equal(mu["dense_1"]["kernel"], 0)  # added layer: fresh
    assert int(moved.opt_state[0][1].count) == 3
    # the new state trains: one update of the new architecture runs on it
    new_runner = new_fns.init(jax.random.key(1)).replace(
        train_state=jax.tree.map(np.asarray, moved)
    )
    out, metrics = new_fns.run(new_runner, pjp.Hyperparams.from_config(BASE), 1)
    assert np.isfinite(np.asarray(metrics["pg_loss"])).all()
