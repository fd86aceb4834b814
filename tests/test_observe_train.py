"""#13 in the training function: metrics streamed out of one jit, richer statistics.

One vmapped compile for the module (2 seeds x 6 updates of a tiny CartPole config)."""

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.train import make_train_fns

CONFIG = pjp.PPOConfig(
    num_envs=4,
    num_steps=16,
    total_timesteps=4 * 16 * 6,  # 6 updates
    update_epochs=1,
    num_minibatches=2,
    hidden_sizes=(16,),
    action_histogram=True,
    info_metrics=("discount",),
)
EVERY = 2


@pytest.fixture(scope="module")
def streamed():
    calls = []
    train = pjp.make_train(
        CONFIG, callback=lambda run, update, m: calls.append((run, update, m)), callback_every=EVERY
    )
    out = jax.jit(jax.vmap(train))(jax.random.split(jax.random.key(0), 2))
    jax.effects_barrier()
    return out, calls


def test_callback_delivers_every_kth_update_per_run(streamed):
    out, calls = streamed
    num_updates = CONFIG.num_updates
    for run in (0, 1):
        mine = [(update, m) for r, update, m in calls if r == run]
        # 6 updates, k = 2: updates 2, 4, 6, in order.
        assert [u for u, _ in mine] == list(range(EVERY, num_updates + 1, EVERY))
        for update, metrics in mine:
            assert set(metrics) == set(out.metrics)
            for name, value in metrics.items():
                np.testing.assert_array_equal(
                    np.float32(value), np.asarray(out.metrics[name])[run, update - 1], err_msg=name
                )
    assert len(calls) == 2 * (num_updates // EVERY)


def test_run_index_argument_overrides_the_row(streamed):
    calls = []
    config = CONFIG.replace(total_timesteps=4 * 16 * 2, action_histogram=False, info_metrics=[])
    train = pjp.make_train(config, callback=lambda r, u, m: calls.append((r, u)))
    out = jax.jit(train)(jax.random.key(1), None, 7)
    jax.effects_barrier()
    assert calls == [(7, 1), (7, 2)]
    assert out.metrics["episode_return"].shape == (2,)


def test_default_program_has_no_callback():
    key = jax.random.key(0)
    plain = str(jax.make_jaxpr(pjp.make_train(CONFIG))(key))
    explicit = str(jax.make_jaxpr(pjp.make_train(CONFIG, callback=None, callback_every=3))(key))
    assert plain == explicit
    assert "callback" not in plain
    streaming = str(jax.make_jaxpr(pjp.make_train(CONFIG, callback=print))(key))
    assert "callback" in streaming


def test_richer_statistics(streamed):
    out, _ = streamed
    m = {k: np.asarray(v) for k, v in out.metrics.items()}
    names = make_train_fns(CONFIG).metric_names
    assert list(m) == list(names) or set(m) == set(names)
    assert names[: len(pjp.METRICS)] == pjp.METRICS
    assert names[len(pjp.METRICS) :] == ("action_frac/0", "action_frac/1", "info/discount")
    assert m["value_mean"].shape == (2, CONFIG.num_updates)
    # returns = advantages + values, so their means add up.
    np.testing.assert_allclose(m["return_mean"], m["advantage_mean"] + m["value_mean"], atol=1e-4)
    # Discrete(2): fractions add to 1; the action mean is the fraction of action 1.
    np.testing.assert_allclose(m["action_frac/0"] + m["action_frac/1"], 1.0, atol=1e-6)
    np.testing.assert_allclose(m["action_mean"], m["action_frac/1"], atol=1e-6)
    p = m["action_frac/1"]
    np.testing.assert_allclose(m["action_std"], np.sqrt(p * (1 - p)), atol=1e-4)
    assert np.all(m["log_prob_mean"] < 0) and np.all(m["grad_norm"] > 0)
    # CartPole's info["discount"] is 0 at a termination: episodes that ended by falling.
    ended = ~np.isnan(m["episode_return"])
    assert np.all(m["info/discount"][ended] == 0.0)


def test_bad_observability_config():
    with pytest.raises(ValueError, match="nope.*not in the info dict"):
        make_train_fns(CONFIG.replace(info_metrics=["nope"]))
    with pytest.raises(ValueError, match="action_histogram.*Discrete"):
        make_train_fns(CONFIG.replace(env_name="Pendulum-v1"))
    with pytest.raises(ValueError, match="callback_every"):
        pjp.make_train(CONFIG, callback=print, callback_every=0)
    with pytest.raises(ValueError, match="did you mean tensorboard"):
        CONFIG.replace(loggers=["tensorbord"])
    with pytest.raises(ValueError, match="video_freq"):
        CONFIG.replace(video_freq=-1)
    assert CONFIG.replace(loggers="jsonl").loggers == ("jsonl",)
