"""Host (gymnasium) environments and `learn()` (issue #12 part 2)."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.envs import make_env
from purejaxppo.envs.host import is_host_env
from purejaxppo.envs.rows import vmapped_envs
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete
from purejaxppo.envs.suites.gymnasium import convert_space
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.rollout import make_rollout
from purejaxppo.train import make_train_fns

GYM_CARTPOLE = "gymnasium:CartPole-v1"


def test_host_env_steps_like_gymnasium_with_terminated_truncated_and_final_obs():
    """A scripted episode, the wrapper against gymnasium's own envs step by step: with a
    time limit of 12 steps, env 0 (pushed left / right in turn) is truncated at step 12,
    env 1 (pushed right every step) lets the pole fall earlier (terminated). At an episode
    end `final_obs` is the env's last observation and `obs` the next episode's first."""
    env, params = make_env(GYM_CARTPOLE, {"max_episode_steps": 12})
    assert params is None and is_host_env(env) and env.max_steps_in_episode == 12
    vec = env.make_vec(2)
    refs = [gymnasium.make("CartPole-v1", max_episode_steps=12) for _ in range(2)]
    obs = vec.reset(seed=3)
    np.testing.assert_array_equal(
        obs, np.stack([r.reset(seed=3 + i)[0] for i, r in enumerate(refs)])
    )
    ended = {"terminated": [], "truncated": []}
    for t in range(14):
        action = np.array([t % 2, 1])
        obs, reward, terminated, truncated, final_obs = vec.step(action)
        assert obs.dtype == np.float32 and reward.dtype == np.float32
        for i, ref in enumerate(refs):
            r_obs, r_reward, r_term, r_trunc, _ = ref.step(int(action[i]))
            assert (terminated[i], truncated[i], reward[i]) == (r_term, r_trunc, r_reward)
            np.testing.assert_array_equal(final_obs[i], r_obs)  # before any reset
            if r_term or r_trunc:
                ended["terminated" if r_term else "truncated"].append((t, i))
                np.testing.assert_array_equal(obs[i], ref.reset()[0])  # same RNG stream
            else:
                np.testing.assert_array_equal(obs[i], r_obs)
    assert (11, 0) in ended["truncated"]  # the time limit, kept apart from terminated
    assert [i for _, i in ended["terminated"]] == [1] and ended["terminated"][0][0] < 11
    vec.close()


def test_spaces_convert_to_gymnax():
    s = gymnasium.spaces
    box = convert_space(s.Box(-1.0, 1.0, (3,), np.float64))
    assert box.shape == (3,) and np.dtype(box.dtype) == np.float32
    assert convert_space(s.Discrete(5)).n == 5
    assert isinstance(convert_space(s.MultiDiscrete([2, 3])), MultiDiscrete)
    assert isinstance(convert_space(s.MultiBinary(4)), MultiBinary)
    nested = convert_space(s.Dict({"a": s.Box(0, 1, (2,)), "b": s.Discrete(3)}))
    assert set(nested.spaces) == {"a", "b"}
    with pytest.raises(ValueError, match="start"):
        convert_space(s.Discrete(3, start=1))
    with pytest.raises(ValueError, match="not supported"):
        convert_space(s.Text(5))
    env, _ = make_env(GYM_CARTPOLE)
    assert env.action_space().n == 2 and env.observation_space().shape == (4,)
    networks = pjp.make_networks(pjp.PPOConfig(env_name=GYM_CARTPOLE), env)
    assert networks.action_spec.kind == "discrete" and networks.action_spec.num_actions == 2


def test_bad_input_raises_before_compiling():
    with pytest.raises(ValueError, match="CartPole-v1"):  # close matches listed
        make_env("gymnasium:CartPol-v1")
    with pytest.raises(ValueError, match=r"gymnasium:CartPole-v1.*'bogus'"):
        make_env(GYM_CARTPOLE, {"bogus": 1})
    config = pjp.PPOConfig(env_name=GYM_CARTPOLE, num_envs=2, num_steps=8, total_timesteps=32)
    with pytest.raises(ValueError, match=r"gymnasium:CartPole-v1.*share one vector env"):
        pjp.sweep(config, seeds=2, devices=2)  # its runs share one vector env
    with pytest.raises(ValueError, match=r"gymnasium:CartPole-v1.*make_data_parallel_train"):
        pjp.make_data_parallel_train(config)


def test_runs_batched_in_one_program_train_what_each_trains_alone():
    """`jax.vmap(train)` over 3 keys steps ONE vector env of 3 x 2 copies (run r's envs
    seeded from run r's keys): each run's metrics are those of `train(key_r)` alone, and
    `jax.jit(train)` is `train`."""
    config = pjp.PPOConfig(env_name=GYM_CARTPOLE, num_envs=2, num_steps=16, total_timesteps=96)
    env, _ = make_env(GYM_CARTPOLE)
    fns = make_train_fns(config, env)
    keys = jax.random.split(jax.random.key(0), 3)
    batched = jax.jit(jax.vmap(fns.train))(keys)
    assert sorted(env._vecs) == [6]  # one vector env of 3 runs x 2 envs
    for r in range(3):
        alone = fns.train(keys[r])
        for name in ("episode_return", "episode_length", "v_loss", "entropy"):
            np.testing.assert_allclose(
                batched.metrics[name][r], alone.metrics[name], rtol=1e-4, err_msg=name
            )
    assert sorted(env._vecs) == [2, 6]
    jitted = jax.jit(fns.train)(keys[2])
    jax.tree.map(np.testing.assert_array_equal, jitted.metrics, alone.metrics)


def test_learn_equals_the_jitted_update_bitwise():
    """`learn` on a rollout of gymnax CartPole equals `TrainFns.update` on the same data."""
    config = pjp.PPOConfig(
        env_name="CartPole-v1", num_envs=4, num_steps=16, total_timesteps=4 * 16 * 10
    )
    fns = make_train_fns(config)
    env, env_params = make_env(config.env_name)
    rollout = make_rollout(vmapped_envs(env, env_params), fns.networks, config.num_steps)
    hparams = Hyperparams.from_config(config)
    runner = jax.jit(fns.init)(jax.random.key(1))
    runner = runner.replace(update_step=jnp.int32(3))  # annealing and the step count matter

    @jax.jit
    def both(runner):
        new_runner, metrics = fns.update(runner, hparams)
        _, rollout_key, epochs_key = jax.random.split(runner.key, 3)
        carry, traj, _ = rollout(runner.train_state.params, runner.env, rollout_key)
        train_state, learned = pjp.learn(
            runner.train_state,
            traj,
            carry.obs,
            epochs_key,
            hparams,
            config=config,
            networks=fns.networks,
            update_step=runner.update_step,
        )
        return new_runner.train_state, metrics, train_state, learned, traj

    expected, metrics, got, learned, traj = both(runner)
    jax.tree.map(np.testing.assert_array_equal, expected, got)
    for name, value in learned.items():
        np.testing.assert_array_equal(value, metrics[name], err_msg=name)
    with pytest.raises(ValueError, match="num_steps"):
        short = jax.tree.map(lambda x: x[:3], traj)
        pjp.learn(runner.train_state, short, None, runner.key, config=config, networks=fns.networks)


def test_gymnasium_cartpole_learns():
    """PPO on gymnasium's CartPole-v1 through `make_train`: mean return >= 100 quickly."""
    config = pjp.PPOConfig.from_yaml("configs/gymnasium_cartpole.yaml").replace(
        total_timesteps=16 * 32 * 120, learning_rate=1e-3, anneal_lr=False
    )
    calls = []
    out = pjp.make_train(config, callback=lambda *a: calls.append(a[1]), callback_every=40)(
        jax.random.key(0)
    )
    jax.effects_barrier()  # the callbacks of the compiled program have all arrived
    returns = np.asarray(out.metrics["episode_return"])
    assert set(out.metrics) == set(pjp.METRICS)
    assert calls == [40, 80, 120]
    assert out.metrics["env_steps"][-1] == 16 * 32 * 120
    best = np.nanmax(np.convolve(np.nan_to_num(returns), np.ones(5) / 5, mode="valid"))
    # Measured (2 shared CPU cores, 2026-11-25; keys 0 / 1 / 2 / 3): best 5-update mean 381 /
    # 434 / 454 / 293; random play ~22. The old threshold 150 sat 143 below the worst seed,
    # within one spread (161); 100 leaves 193.
    assert best >= 100, (best, returns[-20:])
