"""The `Networks` interface (one code path for every policy), bring-your-own networks,
actor / critic learning rates, and the small fixes of the interface review (#11)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.metrics import METRICS, UpdateMetrics
from purejaxppo.networks import networks_from_modules, param_labels

TINY = pjp.PPOConfig(
    num_envs=4, num_steps=16, total_timesteps=4 * 16 * 3, num_minibatches=2, hidden_sizes=(8,)
)


def _leaves_equal(a, b) -> bool:
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        np.array_equal(x, y) for x, y in zip(leaves_a, leaves_b, strict=True)
    )


def _close(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-8)


# --------------------------------------------------------------------- the interface
def test_feed_forward_networks_have_empty_state_and_agree():
    env, env_params = pjp.make_env("CartPole-v1")
    nets = pjp.make_networks(TINY, env, env_params)
    assert not nets.stateful and nets.initial_state(5) == ()
    params = nets.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (3, 5, 4))  # [T, B, 4]
    state, dist, value = nets.step(params, (), obs[0], jnp.zeros((5,), bool))
    assert state == () and value.shape == (5,)
    dist_apply, value_apply = nets.apply(params, obs[0])
    np.testing.assert_array_equal(value, value_apply)
    np.testing.assert_array_equal(dist.logits, dist_apply.logits)
    state, dist_seq, value_seq = nets.unroll(params, (), obs, jnp.zeros((3, 5), bool))
    assert state == () and value_seq.shape == (3, 5) and dist_seq.batch_shape == (3, 5)
    np.testing.assert_allclose(value_seq[0], value, rtol=1e-6, atol=1e-6)


def test_recurrent_step_resets_rows_and_unroll_equals_steps():
    config = TINY.replace(env_name="Probe7-v0", recurrent="lstm", recurrent_size=4)
    env, env_params = pjp.make_env("Probe7-v0")
    nets = pjp.make_networks(config, env, env_params)
    params = nets.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (6, 3, 1))
    resets = jnp.zeros((6, 3), bool).at[3, 1].set(True)
    state = nets.initial_state(3)
    values = []
    for t in range(6):
        state, _, value = nets.step(params, state, obs[t], resets[t])
        values.append(value)
    final, _, value_seq = nets.unroll(params, nets.initial_state(3), obs, resets)
    np.testing.assert_allclose(value_seq, jnp.stack(values), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(final, state, rtol=1e-5, atol=1e-6)
    # The reset restarts row 1 from the initial state: its values from t = 3 on equal a
    # fresh run on obs[3:], the other rows do not.
    _, _, fresh = nets.unroll(params, nets.initial_state(3), obs[3:], jnp.zeros((3, 3), bool))
    np.testing.assert_allclose(value_seq[3:, 1], fresh[:, 1], rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(value_seq[3:, 0] - fresh[:, 0])).max() > 1e-4


def test_separate_recurrent_towers_train():
    """share_encoder: false with a core gives the actor and the critic their own encoder
    and core (their states concatenated); the default shares them."""
    config = TINY.replace(env_name="Probe7-v0", recurrent="gru", recurrent_size=4)
    assert config.shares_encoder
    fns = pjp.make_train_fns(config.replace(share_encoder=False))
    runner = fns.init(jax.random.key(0))
    names = set(runner.train_state.params["params"])
    assert {"actor_core", "critic_core", "actor_encoder", "critic_encoder"} <= names
    assert runner.env.policy_state.shape == (4, 8)
    runner, metrics = jax.jit(fns.update)(runner, pjp.Hyperparams.from_config(config))
    assert np.isfinite(metrics["v_loss"]) and np.isfinite(metrics["pg_loss"])
    shared = pjp.make_train_fns(config).init(jax.random.key(0))
    assert {"core", "encoder"} <= set(shared.train_state.params["params"])


# --------------------------------------------------------------------- bring your own
class _Mlp(nn.Module):
    out: int
    squeeze: bool = False

    @nn.compact
    def __call__(self, obs):
        x = nn.tanh(nn.Dense(32)(obs))
        x = nn.tanh(nn.Dense(32)(x))
        y = nn.Dense(self.out, kernel_init=nn.initializers.orthogonal(0.01))(x)
        return y[:, 0] if self.squeeze else y


def test_custom_modules_train_act_and_evaluate():
    config = pjp.PPOConfig(
        num_envs=8, num_steps=64, total_timesteps=8 * 64 * 60, learning_rate=2.5e-3,
        num_minibatches=4,
    )  # fmt: skip
    env, env_params = pjp.make_env("CartPole-v1")
    nets = networks_from_modules(_Mlp(2), _Mlp(1, squeeze=True), env, env_params)
    assert nets.module is None and not nets.stateful
    out = jax.jit(pjp.make_train(config, networks=nets))(jax.random.key(0))
    assert set(out.train_state.params["params"]) == {"actor", "critic"}
    final = float(np.nanmean(np.asarray(out.metrics["episode_return"])[-10:]))
    print("CartPole with user modules, last 10 updates:", final)
    # Measured (2 shared CPU cores, 2026-11-25; seeds key(0) .. key(4)): last 10 updates
    # 390 / 380 / 457 / 192 / 362, greedy evaluation (16 episodes) 429 / 500 / 500 / 258 / 500.
    # The old threshold 150 sat 42 below the worst seed, inside the spread (265); 100 (random
    # play ~22) leaves 92 (sampled) and 158 (greedy) below the worst seed.
    assert final > 100.0
    policy = pjp.Policy(out.train_state.params, config, networks=nets)
    assert policy.act(jnp.zeros(4), jax.random.key(0), temperature=0.0).shape == ()
    assert pjp.evaluate(policy, num_episodes=16, greedy=True).returns.mean() > 100.0
    with pytest.raises(ValueError, match=r"actor module outputs \(2, 3\)"):
        networks_from_modules(_Mlp(3), _Mlp(1), env, env_params).init(jax.random.key(0))


def test_actor_and_critic_learning_rates():
    labels = param_labels({"params": {"actor_head": {"k": 1}, "log_std": 0, "encoder": {"k": 1},
                                      "critic_encoder": {"k": 1}}})  # fmt: skip
    assert labels == {"params": {"actor_head": {"k": "actor"}, "log_std": "actor",
                                 "encoder": {"k": "shared"}, "critic_encoder": {"k": "critic"}}}  # fmt: skip
    fns = pjp.make_train_fns(TINY)
    run = jax.jit(fns.run, static_argnums=2)
    runner = fns.init(jax.random.key(0))
    hp = pjp.Hyperparams.from_config(TINY)
    assert np.isnan(hp.actor_learning_rate) and np.isnan(hp.critic_learning_rate)
    default, _ = run(runner, hp, 2)
    # Setting both to learning_rate is the default run, bitwise.
    same, _ = run(runner, hp.replace(actor_learning_rate=hp.learning_rate,
                                     critic_learning_rate=hp.learning_rate), 2)  # fmt: skip
    assert _leaves_equal(default.train_state.params, same.train_state.params)
    # A zero actor rate freezes the actor; the critic still learns (traced: no recompile).
    frozen, _ = run(runner, hp.replace(actor_learning_rate=jnp.float32(0.0)), 2)
    before, after = runner.train_state.params["params"], frozen.train_state.params["params"]
    assert _leaves_equal(before["actor_encoder"], after["actor_encoder"])
    assert _leaves_equal(before["actor_head"], after["actor_head"])
    assert not _leaves_equal(before["critic_head"], after["critic_head"])
    with pytest.raises(ValueError, match="actor_learning_rate=-1.0: must be > 0"):
        TINY.replace(actor_learning_rate=-1.0)


def test_grad_clip_per_network_is_two_optimizers():
    """`grad_clip_per_network` updates like MAPPO's separate actor and critic optimizers
    (each clip_by_global_norm + Adam), and is refused with a shared encoder."""
    import optax

    from purejaxppo.update import make_optimizer

    params = {"params": {"actor_head": {"k": jnp.ones((3, 2))}, "log_std": jnp.zeros(2),
                         "critic_head": {"k": jnp.ones((3, 1))}}}  # fmt: skip
    tx = make_optimizer(0.25, 1e-3, 1e-5, param_labels(params), clip_per_group=True)
    state = tx.init(params)
    one = optax.chain(optax.clip_by_global_norm(0.25), optax.adam(1e-3, eps=1e-5))
    actor = {"actor_head": params["params"]["actor_head"], "log_std": params["params"]["log_std"]}
    actor_state, critic_state = one.init(actor), one.init(params["params"]["critic_head"])
    for i, scale in enumerate((10.0, 0.01, 3.0)):  # clipped, unclipped, clipped
        leaves, treedef = jax.tree.flatten(params)
        keys = jax.random.split(jax.random.key(i), len(leaves))
        noise = [jax.random.normal(k, x.shape) for k, x in zip(keys, leaves, strict=True)]
        grads = jax.tree.unflatten(treedef, [scale * x for x in noise])
        updates, state = tx.update(grads, state, params)
        g = grads["params"]
        want_actor, actor_state = one.update(
            {"actor_head": g["actor_head"], "log_std": g["log_std"]}, actor_state
        )
        want_critic, critic_state = one.update(g["critic_head"], critic_state)
        got = updates["params"]
        for name in ("actor_head", "log_std"):
            _close(got[name], want_actor[name])
        _close(got["critic_head"], want_critic)
    # Below the threshold nothing is clipped: a run equals the default run.
    fns = pjp.make_train_fns(TINY)
    per = pjp.make_train_fns(TINY.replace(grad_clip_per_network=True))
    hp = pjp.Hyperparams.from_config(TINY).replace(max_grad_norm=jnp.float32(1e9))
    a, _ = jax.jit(fns.run, static_argnums=2)(fns.init(jax.random.key(0)), hp, 2)
    b, _ = jax.jit(per.run, static_argnums=2)(per.init(jax.random.key(0)), hp, 2)
    _close(a.train_state.params, b.train_state.params)
    with pytest.raises(ValueError, match="grad_clip_per_network=True: .*share_encoder"):
        TINY.replace(grad_clip_per_network=True, recurrent="gru")


# --------------------------------------------------------------------- review fixes
def test_env_params_are_kept_without_an_env_object():
    env, env_params = pjp.make_env("CartPole-v1")
    short = env_params.replace(max_steps_in_episode=10)
    out = jax.jit(pjp.make_train(TINY, env_params=short))(jax.random.key(0))
    assert np.nanmax(np.asarray(out.metrics["episode_length"])) <= 10.0
    policy = pjp.Policy(out.train_state.params, TINY, env_params=short)
    assert int(policy.env_params.max_steps_in_episode) == 10


def test_env_steps_do_not_wrap():
    """int32 env steps wrapped past 2^31; the count is float32 now (2^24-exact)."""
    config = pjp.PPOConfig(num_envs=4, num_steps=16, total_timesteps=64, num_minibatches=1,
                           hidden_sizes=(8,))  # fmt: skip
    fns = pjp.make_train_fns(config)
    runner = fns.init(jax.random.key(0))
    runner = runner.replace(update_step=jnp.int32(2**31 // 64 + 9))  # 2^31 + 640 steps next
    _, metrics = jax.jit(fns.update)(runner, pjp.Hyperparams.from_config(config))
    assert metrics["env_steps"].dtype == jnp.float32
    np.testing.assert_allclose(float(metrics["env_steps"]), 2**31 + 640.0, rtol=1e-7)


def test_config_is_hashable_and_outputs_hold_one_train_state():
    a = pjp.PPOConfig(env_kwargs={"max_steps_in_episode": 50}, eval_splits={"x": {"a": 1}})
    b = pjp.PPOConfig(env_kwargs={"max_steps_in_episode": 50}, eval_splits={"x": {"a": 1}})
    assert hash(a) == hash(b) and {a: 1}[b] == 1
    assert hash(a) != hash(a.replace(env_kwargs={"max_steps_in_episode": 51}))
    assert pjp.TrainOutput._fields == ("runner_state", "metrics")
    assert METRICS == UpdateMetrics._fields == pjp.METRICS
    out = jax.jit(pjp.make_train(TINY))(jax.random.key(0))
    assert out.train_state is out.runner_state.train_state
    assert set(out.metrics) == set(METRICS)


def test_custom_networks_checkpoint_policy_sweep_and_export(tmp_path):
    from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
    from purejaxppo.export import export_torch

    env, env_params = pjp.make_env("CartPole-v1")
    nets = networks_from_modules(_Mlp(2), _Mlp(1, squeeze=True), env, env_params)
    fns = pjp.make_train_fns(TINY, networks=nets)
    runner, metrics = jax.jit(fns.run, static_argnums=2)(
        fns.init(jax.random.key(0)), pjp.Hyperparams.from_config(TINY), 2
    )
    save_checkpoint(tmp_path, runner, jax.device_get(metrics), TINY)
    restored = load_checkpoint(tmp_path, networks=nets).runner_state
    assert _leaves_equal(restored.train_state.params, runner.train_state.params)
    with pytest.raises(ValueError, match="does not match the network"):
        load_checkpoint(tmp_path)  # the built-in network has other parameters
    policy = pjp.Policy.load(tmp_path, networks=nets)
    assert policy.act(jnp.zeros((3, 4)), jax.random.key(0)).shape == (3,)
    result = pjp.sweep(TINY, seeds=2, networks=nets, verbose=False)
    assert result.runs["run"].nunique() == 2
    with pytest.raises(ValueError, match="built-in"):
        export_torch(runner, TINY, tmp_path / "policy.pt", networks=nets)


def test_checkpoint_format_version_is_checked(tmp_path):
    import json

    from purejaxppo.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint

    fns = pjp.make_train_fns(TINY)
    runner, metrics = jax.jit(fns.run, static_argnums=2)(
        fns.init(jax.random.key(0)), pjp.Hyperparams.from_config(TINY), 1
    )
    where = save_checkpoint(tmp_path, runner, jax.device_get(metrics), TINY)
    assert load_checkpoint(tmp_path).update_step == 1
    metas = [p for p in where.rglob("*") if p.is_file() and b'"format_version"' in p.read_bytes()]
    assert metas
    for meta in metas:  # orbax keeps the JSON and a copy of it
        data = json.loads(meta.read_text())
        assert data["format_version"] == FORMAT_VERSION == 2
        del data["format_version"]  # what purejaxppo wrote before the Networks interface
        meta.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="format version 1; this purejaxppo reads version 2"):
        load_checkpoint(tmp_path)
