"""Recurrent (LSTM / GRU / transformer) policies: state handling, memory probes, a POMDP,
Policy.

Learning tests (configs/probe7_lstm.yaml, memory_chain_gru.yaml, pendulum_novel_gru.yaml,
probe7_transformer.yaml, memory_chain_transformer.yaml)
train one compiled program each; the feed-forward half of the Probe7 claim (chance, 0.5)
is tests/test_probes.py::test_probe7_feed_forward_policy_cannot_exceed_chance.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
from purejaxppo.envs.rows import vmapped_envs
from purejaxppo.networks import make_networks, state_size
from purejaxppo.rollout import make_rollout
from purejaxppo.sequences import make_sequences

CONFIGS = Path(__file__).resolve().parent.parent / "configs"

SMALL = pjp.PPOConfig(
    env_name="Probe7-v0",
    num_envs=4,
    num_steps=12,
    total_timesteps=4 * 12 * 3,
    num_minibatches=2,
    hidden_sizes=(8,),
    recurrent="gru",
    recurrent_size=4,
)


def train(config: pjp.PPOConfig, seeds: int = 1):
    fn = jax.jit(jax.vmap(pjp.make_train(config)))
    return jax.device_get(fn(jax.random.split(jax.random.key(0), seeds)))


def final_return(out, last: int = 10) -> np.ndarray:
    return np.nanmean(out.metrics["episode_return"][:, -last:], axis=1)


# --------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "changes, match",
    [
        ({"recurrent": "lstn"}, r"recurrent='lstn'.*did you mean lstm"),
        ({"recurrent_size": 0}, r"recurrent_size=0"),
        ({"max_seq_len": 5}, r"max_seq_len=5: must be >= 1 and divide num_steps=12"),
        ({"recurrent": None, "max_seq_len": 4}, r"max_seq_len=4: needs a recurrent core"),
        # 4 envs x 12 / 4 = 12 sequences do not split into 5 minibatches
        ({"max_seq_len": 4, "num_minibatches": 8}, r"num_minibatches=8: must divide .* = 12"),
        ({"num_minibatches": 3}, r"num_minibatches=3: must divide .*4\*12/12 = 4"),
    ],
)
def test_config_validation(changes, match):
    with pytest.raises(ValueError, match=match):
        SMALL.replace(**changes)


def test_feed_forward_default_has_no_recurrent_state():
    config = pjp.PPOConfig(total_timesteps=512)
    runner = pjp.make_train_fns(config).init(jax.random.key(0))
    assert runner.env.policy_state == ()
    assert "core" not in runner.train_state.params["params"]


# --------------------------------------------------------------------- state handling
@pytest.mark.parametrize("core, seq_len", [("gru", None), ("lstm", 4), ("transformer", 4)])
def test_update_rerun_reproduces_the_rollout(core, seq_len):
    """Re-running the core over the stored sequences gives the rollout's log-probs and
    values: the stored initial states and the reset flags are right. Probe7 episodes are
    5 steps, so resets fall inside the 12-step sequences and the 4-step chunks."""
    config = SMALL.replace(
        recurrent=core, max_seq_len=seq_len, transformer_dim=8, transformer_layers=2, memory_len=3
    )
    env, env_params = pjp.make_env(config.env_name)
    nets = make_networks(config, env, env_params)
    size = {"lstm": 8, "gru": 4, "transformer": 2 * 3 * 8 + 3}[core]
    assert state_size(config) == size
    params = nets.init(jax.random.key(1))
    envs = vmapped_envs(env, env_params)
    rollout = jax.jit(make_rollout(envs, nets, config.num_steps))
    carry = envs.reset(jax.random.key(2), config.num_envs, nets)
    # Two rollouts, so the second starts from a carried, non-zero state.
    carry, _, _ = rollout(params, carry, jax.random.key(3))
    assert float(jnp.abs(carry.policy_state).max()) > 0
    carry, traj, _ = rollout(params, carry, jax.random.key(4))
    assert traj.policy_state.shape == (config.num_steps, config.num_envs, size)
    zeros = jnp.zeros_like(traj.value)
    batch = make_sequences(traj, zeros, zeros, config.seq_len)
    num_seq = config.num_sequences
    assert batch.obs.shape == (num_seq, config.seq_len, 1)
    assert batch.initial_state.shape == (num_seq, size)

    def rerun(resets):
        _, dist, value = nets.unroll(
            params, batch.initial_state, jnp.swapaxes(batch.obs, 0, 1), jnp.swapaxes(resets, 0, 1)
        )
        log_prob = dist.log_prob(jnp.swapaxes(batch.action, 0, 1))
        return jnp.swapaxes(log_prob, 0, 1), jnp.swapaxes(value, 0, 1)

    log_prob, value = rerun(batch.resets)
    np.testing.assert_allclose(log_prob, batch.log_prob, atol=1e-5)
    np.testing.assert_allclose(value, batch.value, atol=1e-5)
    # Without the reset flags the re-run differs: they matter.
    _, value_no_reset = rerun(jnp.zeros_like(batch.resets))
    assert np.abs(np.asarray(value_no_reset - batch.value)).max() > 1e-3


def test_segments_and_checkpoint_keep_the_state(tmp_path):
    config = SMALL.replace(max_seq_len=4, total_timesteps=4 * 12 * 4)
    fns = pjp.make_train_fns(config)
    key = jax.random.key(0)
    one_call = jax.jit(fns.train)(key)
    hparams = pjp.Hyperparams.from_config(config)
    run = jax.jit(fns.run, static_argnums=2)
    runner, metrics = run(fns.init(key), hparams, 2)
    save_checkpoint(tmp_path, runner, jax.device_get(metrics), config)
    restored = load_checkpoint(tmp_path).runner_state
    np.testing.assert_array_equal(restored.env.policy_state, runner.env.policy_state)
    runner, _ = run(restored, hparams, 2)
    for a, b in zip(jax.tree.leaves(one_call.runner_state), jax.tree.leaves(runner), strict=True):
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_array_equal(a, b)


def test_data_parallel_shards_keep_identical_params():
    """`axis_name` / `num_shards` (what `make_data_parallel_train` passes inside shard_map),
    emulated with a named `vmap` over 2 shards: each holds 2 of the 4 envs' states."""
    config = SMALL.replace(num_minibatches=1)
    fns = pjp.make_train_fns(config, axis_name="d", num_shards=2)
    keys = jnp.stack([jax.random.key_data(jax.random.key(0))] * 2)
    init = jax.vmap(lambda k: fns.init(jax.random.wrap_key_data(k)), axis_name="d")
    runner = init(keys)
    assert runner.env.policy_state.shape == (2, 2, config.recurrent_size)
    update = jax.jit(jax.vmap(fns.update, in_axes=(0, None), axis_name="d"))
    runner, metrics = update(runner, pjp.Hyperparams.from_config(config))
    for leaf in jax.tree.leaves(runner.train_state.params):
        np.testing.assert_array_equal(leaf[0], leaf[1])
    assert not np.array_equal(runner.env.policy_state[0], runner.env.policy_state[1])
    with pytest.raises(ValueError, match="per-device number of sequences"):
        pjp.make_train_fns(config.replace(num_minibatches=4), axis_name="d", num_shards=2)


# --------------------------------------------------------------------- learning
@pytest.fixture(scope="module")
def probe7_lstm():
    config = pjp.PPOConfig.from_yaml(CONFIGS / "probe7_lstm.yaml")
    out = train(config, seeds=2)
    return config, out


def test_probe7_is_solved_by_the_lstm(probe7_lstm):
    config, out = probe7_lstm
    final = final_return(out)
    print("Probe7 LSTM, mean return of the last 10 updates per seed:", final)
    # Measured (6 seeds, 2-core x86 CPU, 2026-11-25): sampled 0.9625 .. 1.0, greedy 1.0 on
    # every seed; first 3 updates 0.45 .. 0.58. Sampled returns still explore, so they get
    # a margin of ~0.06 below the lowest seed; the greedy policy is the claim (1.0 or, if
    # the cue is ignored, ~0.5: a wide gap). Feed-forward: 0.5 (tests/test_probes.py).
    assert (final > 0.9).all(), final
    assert np.nanmean(out.metrics["episode_return"][:, :3]) < 0.7  # seen <= 0.58
    for seed in range(final.shape[0]):
        params = jax.tree.map(lambda x, s=seed: x[s], out.train_state.params)
        greedy = pjp.evaluate(pjp.Policy(params, config), num_episodes=64, greedy=True)
        assert greedy.returns.mean() > 0.9, (seed, greedy.returns.mean())  # seen 1.0


def test_probe7_policy_act_carries_the_state(probe7_lstm):
    """Greedy `Policy.act` with `reset(done)` after each step recalls the cue; resetting
    the state before every step (no memory) falls to chance; `evaluate` agrees."""
    config, out = probe7_lstm
    params = jax.tree.map(lambda x: x[0], out.train_state.params)
    policy = pjp.Policy(params, config)
    env, env_params = pjp.make_env(config.env_name)
    num = 256

    def play(forget: bool) -> float:
        keys = jax.random.split(jax.random.key(5), num)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)
        policy.reset()
        total = np.zeros(num)
        for t in range(env_params.episode_length):
            if forget:
                policy.reset()
            action = policy.act(obs, jax.random.key(t), temperature=0.0)
            keys = jax.random.split(jax.random.key(100 + t), num)
            obs, state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(keys, state, action, env_params)
            total += np.asarray(reward)
            policy.reset(terminated | truncated)
        return float(total.mean())

    remembered, forgotten = play(forget=False), play(forget=True)
    print(
        f"Probe7 greedy return: with state {remembered:.3f}, state reset every step {forgotten:.3f}"
    )
    assert remembered == 1.0
    assert forgotten < 0.75
    result = pjp.evaluate(policy, num_episodes=64, greedy=True)
    assert result.returns.mean() == 1.0 and (result.lengths == 5).all()


def test_memory_chain_is_solved_by_the_gru():
    config = pjp.PPOConfig.from_yaml(CONFIGS / "memory_chain_gru.yaml")
    assert config.env_kwargs == {"memory_length": 10}
    out = train(config)
    final = final_return(out)
    print("MemoryChain (memory 10) GRU, mean return of the last 10 updates:", final)
    # Measured (6 seeds, 2-core x86 CPU, 2026-11-25): sampled 0.944 .. 1.0, greedy 1.0 on
    # every seed. Random / feed-forward: ~0 (rewards +-1), so the sampled check keeps a
    # margin of ~0.14 below the lowest seed and the greedy one (the claim) of 0.1.
    assert final[0] > 0.8
    params = jax.tree.map(lambda x: x[0], out.train_state.params)
    result = pjp.evaluate(pjp.Policy(params, config), num_episodes=64, greedy=True)
    assert result.returns.mean() > 0.9 and (result.lengths == 11).all()  # seen 1.0


def test_probe7_is_solved_by_the_transformer():
    """The GTrXL core recalls the cue by attending to it in its memory (2 seeds)."""
    config = pjp.PPOConfig.from_yaml(CONFIGS / "probe7_transformer.yaml")
    assert (config.recurrent, config.memory_len) == ("transformer", 10)
    out = train(config, seeds=2)
    final = final_return(out)
    print("Probe7 transformer, mean return of the last 10 updates per seed:", final)
    # The claim is on the greedy evaluation of every seed. Measured (6 seeds, 2-core x86
    # CPU, 2026-11-25): greedy 1.0 on every seed (a policy ignoring the cue: ~0.5);
    # sampled 0.998 .. 1.0 here, but 0.947 for the 2nd seed on an AVX-512 CPU (XLA's CPU
    # numerics differ), so the sampled check keeps a 0.1 margin below that; first 3
    # updates 0.46 .. 0.58. Feed-forward: 0.5.
    for seed in range(final.shape[0]):
        params = jax.tree.map(lambda x, s=seed: x[s], out.train_state.params)
        result = pjp.evaluate(pjp.Policy(params, config), num_episodes=64, greedy=True)
        assert result.returns.mean() > 0.9, (seed, result.returns.mean())  # seen 1.0
    assert (final > 0.85).all(), final
    assert np.nanmean(out.metrics["episode_return"][:, :3]) < 0.7  # seen <= 0.58


def test_memory_chain_is_solved_by_the_transformer():
    config = pjp.PPOConfig.from_yaml(CONFIGS / "memory_chain_transformer.yaml")
    assert config.env_kwargs == {"memory_length": 10} and config.memory_len == 10
    out = train(config)
    final = final_return(out)
    print("MemoryChain (memory 10) transformer, mean return of the last 10 updates:", final)
    # Measured (2 shared CPU cores, 2026-11-25; keys split(key(k), 1)[0], k = 0 .. 3): last 10
    # updates 0.994 / 1.0 / 0.981 / 1.0 (margin 0.081, spread 0.019); greedy 1.0, length 11.
    assert final[0] > 0.9  # random / feed-forward: ~0 (rewards +-1)
    params = jax.tree.map(lambda x: x[0], out.train_state.params)
    result = pjp.evaluate(pjp.Policy(params, config), num_episodes=64, greedy=True)
    assert result.returns.mean() > 0.9 and (result.lengths == 11).all()


def test_pendulum_without_velocity_learns_with_the_gru():
    config = pjp.PPOConfig.from_yaml(CONFIGS / "pendulum_novel_gru.yaml")
    env, env_params = pjp.make_env(config.env_name)
    assert env.observation_space(env_params).shape == (2,)  # cos, sin: no velocity
    out = train(config)
    final = final_return(out)
    print("PendulumNoVel-v1 GRU (max_seq_len 16), mean return of the last 10 updates:", final)
    # Measured (as above, k = 0 / 1 / 2): last 10 updates -273 / -366 / -238 (margin 434, spread
    # 128); first 20 updates -1240 / -1264 / -1228.
    assert final[0] > -800.0  # random ~ -1200; feed-forward ~ -1100 at this budget
    assert np.nanmean(out.metrics["episode_return"][0, :20]) < -1000.0


# --------------------------------------------------------------------- policy
def test_policy_reset_zeroes_where_done():
    config = SMALL
    env, env_params = pjp.make_env(config.env_name)
    params = make_networks(config, env, env_params).init(jax.random.key(0))
    policy = pjp.Policy(params, config)
    assert policy.hidden is None
    obs = jnp.array([[1.0], [0.5], [-1.0]])
    policy.act(obs, jax.random.key(0))
    assert policy.hidden.shape == (3, config.recurrent_size)
    assert (np.abs(policy.hidden) > 0).any(axis=1).all()
    before = np.asarray(policy.hidden)
    policy.reset(np.array([True, False, False]))
    np.testing.assert_array_equal(policy.hidden[0], 0.0)
    np.testing.assert_array_equal(policy.hidden[1:], before[1:])
    with pytest.raises(ValueError, match="done has 2 entries"):
        policy.reset(np.array([True, False]))
    policy.reset()
    assert policy.hidden is None
    # The same observations from the same state give the same outputs after a reset.
    _, first = policy.act(obs, jax.random.key(0), return_model_output=True)
    policy.reset()
    _, again = policy.act(obs, jax.random.key(0), return_model_output=True)
    np.testing.assert_array_equal(first["logits"], again["logits"])
    # One observation: batch of one, state kept between calls.
    policy.reset()
    policy.act(jnp.array([1.0]), jax.random.key(0))
    assert policy.hidden.shape == (1, config.recurrent_size)
