"""`PPOConfig.loop_layout` (`purejaxppo.loops`): the GPU layout computes what the CPU one does.

"compact" is the CPU default the golden tests pin; "unrolled" (GPU default) must give the
same parameters bitwise where only the loops differ (flat epochs, rollout unroll) and to
float32 rounding where GAE's summation order differs (the prefix scan). "unrolled" takes
the rollout's values from a critic pass after the scan, the in-loop values to a matmul's
rounding.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo import loops
from purejaxppo._xla_flag import LEVEL3_OPTIONS
from purejaxppo.gae import gae_advantages
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.learning import learning_rates
from purejaxppo.loops import LoopPlan, loop_plan
from purejaxppo.rollout import critic_apart, make_rollout
from purejaxppo.sequences import Batch
from purejaxppo.train_setup import prepare
from purejaxppo.types import Transition
from purejaxppo.update import make_update_epochs

COMPACT = loop_plan("compact")
FLAT = LoopPlan("test", 1, "scan", "flat", 1)
FLAT_UNROLLED = LoopPlan("test", 1, "scan", "flat", 2)


def test_auto_picks_by_backend_and_rejects_unknown_names():
    assert loop_plan("auto", backend="cpu").layout == "compact"
    assert loop_plan("auto", backend="gpu").layout == "unrolled"
    assert loop_plan("auto", backend="tpu").gae == "associative"
    assert loop_plan("auto").layout == "compact"  # the tests run on CPU
    with pytest.raises(ValueError, match="loop_layout='fast'"):
        loop_plan("fast")
    with pytest.raises(ValueError, match="loop_layout"):
        pjp.PPOConfig(loop_layout="fast").validate()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_associative_gae_equals_the_scan_to_rounding(seed):
    keys = jax.random.split(jax.random.key(seed), 5)
    steps = 128
    reward = jax.random.normal(keys[0], (steps,))
    value = jax.random.normal(keys[1], (steps,))
    next_value = jax.random.normal(keys[2], (steps,))
    terminated = jax.random.uniform(keys[3], (steps,)) < 0.05
    truncated = jax.random.uniform(keys[4], (steps,)) < 0.05
    args = (reward, value, next_value, terminated, truncated, 0.99, 0.95)
    adv_scan, ret_scan = gae_advantages(*args)
    adv_assoc, ret_assoc = gae_advantages(*args, method="associative")
    np.testing.assert_allclose(adv_assoc, adv_scan, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret_assoc, ret_scan, rtol=1e-5, atol=1e-5)
    assert not np.allclose(adv_scan, 0.0)  # a real signal, not two zero vectors
    with pytest.raises(ValueError, match="method='fast'"):
        gae_advantages(*args, method="fast")


def _epochs_inputs(target_kl):
    config = pjp.PPOConfig(update_epochs=3, num_minibatches=4, target_kl=target_kl)
    fns = pjp.make_train_fns(config)
    runner = fns.init(jax.random.key(0))
    size, keys = 64, jax.random.split(jax.random.key(1), 6)
    batch = Batch(
        obs=jax.random.normal(keys[0], (size, 1, 4)),
        action=jax.random.randint(keys[1], (size, 1), 0, 2),
        log_prob=jnp.full((size, 1), -1.5),
        value=jax.random.normal(keys[2], (size, 1)),
        advantages=jax.random.normal(keys[3], (size, 1)) * 3.0,
        returns=jax.random.normal(keys[4], (size, 1)),
        initial_state=(),
        resets=jnp.zeros((size, 1), bool),
    )
    hparams = Hyperparams.from_config(config)
    rates = learning_rates(config, jnp.asarray(0), hparams)
    return config, fns, runner.train_state, batch, hparams, rates


@pytest.mark.parametrize("target_kl", [None, 1e-4])
@pytest.mark.parametrize("plan", [FLAT, FLAT_UNROLLED], ids=["flat", "flat_unroll2"])
def test_flat_epochs_equal_nested_epochs(target_kl, plan):
    """Bitwise without unrolling; to rounding with (XLA fuses unrolled steps otherwise).
    Both compiled at XLA's level 3 (`LEVEL3_OPTIONS`): at level 2, purejaxppo's CPU
    default, LLVM vectorises the two loop nests' sums differently (1 ulp apart)."""
    config, fns, state, batch, hparams, rates = _epochs_inputs(target_kl)
    key = jax.random.key(7)
    outs = {}
    for name, p in (("nested", COMPACT), ("flat", plan)):
        epochs = jax.jit(
            make_update_epochs(config, fns.networks, None, p), compiler_options=LEVEL3_OPTIONS
        )
        outs[name] = epochs(state, batch, key, hparams, rates, jnp.float32(1.0))
    (nested_state, nested_m), (flat_state, flat_m) = outs["nested"], outs["flat"]
    for a, b in zip(jax.tree.leaves(nested_state), jax.tree.leaves(flat_state), strict=True):
        if plan.epoch_unroll == 1:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        else:  # unrolled steps fuse differently: float32 rounding
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-8)
    expected_epochs = 3.0 if target_kl is None else 1.0  # log_prob -1.5: KL >> 1e-4
    assert float(nested_m["update_epochs_run"]) == expected_epochs
    for name, value in nested_m.items():
        np.testing.assert_allclose(flat_m[name], value, rtol=1e-5, atol=1e-7, err_msg=name)
    # the update really moved the parameters (the equality is not of two no-ops)
    moved = [
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(
            jax.tree.leaves(state.params), jax.tree.leaves(flat_state.params), strict=True
        )
    ]
    assert max(moved) > 1e-4


def test_unrolled_training_follows_compact_training():
    """20 updates of CartPole: the GPU layout's run is the CPU layout's run, to rounding."""
    outs = {}
    for layout in ("compact", "unrolled"):
        config = pjp.PPOConfig(total_timesteps=4 * 128 * 20, loop_layout=layout)
        outs[layout] = jax.jit(pjp.make_train(config))(jax.random.key(0))
    _assert_runs_agree(outs["compact"], outs["unrolled"])


def _assert_runs_agree(reference, other):
    """Two training runs' returns and final params agree to float32 rounding, and the
    reference learned something (the agreement is not of two runs that stood still)."""
    np.testing.assert_allclose(
        other.metrics["episode_return"], reference.metrics["episode_return"], rtol=1e-5
    )
    for a, b in zip(
        jax.tree.leaves(reference.train_state.params),
        jax.tree.leaves(other.train_state.params),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5)
    assert float(reference.metrics["episode_return"][-1]) > 30.0


def _rollouts(config, steps=64):
    """One rollout of `config`'s envs from a fresh init, values in the scan and after it."""
    setup = prepare(config)
    runner = pjp.make_train_fns(config).init(jax.random.key(0))
    outs = {}
    for batched in (False, True):
        rollout = jax.jit(make_rollout(setup.rows, setup.networks, steps, 1, batched))
        outs[batched] = rollout(runner.train_state.params, runner.env, jax.random.key(3))
    return setup.networks, outs[False], outs[True]


def test_batched_values_are_the_in_loop_values():
    """The critic pass after the scan computes V(obs_t) of every step: the same numbers
    (to a matmul's rounding), and everything else bitwise."""
    networks, (carry_a, loop, stats_a), (carry_b, batched, stats_b) = _rollouts(pjp.PPOConfig())
    assert critic_apart(networks) and loop_plan("unrolled").batched_values
    assert not loop_plan("compact").batched_values  # the CPU's runs stay bitwise
    for name in Transition._fields:
        if name != "value":
            for a, b in zip(
                jax.tree.leaves(getattr(loop, name)),
                jax.tree.leaves(getattr(batched, name)),
                strict=True,
            ):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    assert batched.value.shape == loop.value.shape == (64, 4)
    np.testing.assert_allclose(batched.value, loop.value, rtol=1e-6, atol=1e-6)
    assert float(jnp.std(loop.value)) > 1e-3  # values of different observations
    assert bool(loop.terminated.any())  # the rollout crossed episode resets
    after_a, after_b = jax.tree.leaves((carry_a, stats_a)), jax.tree.leaves((carry_b, stats_b))
    for a, b in zip(after_a, after_b, strict=True):
        if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _dots_in_loops(compiled_text: str) -> int:
    """Matmuls XLA left inside `while` bodies (with the computations they call)."""
    computations = {}
    for block in re.split(r"\n(?=\S)", compiled_text):
        header = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s", block)
        if header:
            computations[header.group(1)] = block

    def dots(name, seen):
        if name in seen or name not in computations:
            return 0
        seen.add(name)
        text = computations[name]
        called = re.findall(r"\b(?:calls|to_apply|body|condition)=%?([\w.\-]+)", text)
        return text.count(" dot(") + sum(dots(c, seen) for c in called)

    bodies = re.findall(r"\bbody=%?([\w.\-]+)", compiled_text)
    return sum(dots(body, set()) for body in set(bodies))


def test_batched_values_take_the_critic_out_of_the_compiled_scan():
    """XLA drops the unused critic from the scan body: the loop keeps the actor's 3
    matmuls, not the 6 of both towers (what makes the batched values pay on a GPU)."""
    config = pjp.PPOConfig()
    setup = prepare(config)
    runner = pjp.make_train_fns(config).init(jax.random.key(0))
    counts = {}
    for batched in (False, True):
        rollout = jax.jit(make_rollout(setup.rows, setup.networks, 16, 1, batched))
        compiled = rollout.lower(runner.train_state.params, runner.env, jax.random.key(3))
        counts[batched] = _dots_in_loops(compiled.compile().as_text())
    assert counts == {False: 6, True: 3}


@pytest.mark.parametrize(
    "overrides",
    [{"share_encoder": True}, {"recurrent": "gru"}],
    ids=["shared_torso", "recurrent"],
)
def test_batched_values_only_where_the_critic_stands_apart(overrides):
    """A shared torso or a recurrent core keeps the values in the scan (`critic_apart`);
    the batched pass is still the same function where it is asked for."""
    networks, (_, loop, _), (_, batched, _) = _rollouts(pjp.PPOConfig(**overrides), steps=16)
    assert not critic_apart(networks)
    np.testing.assert_allclose(batched.value, loop.value, rtol=1e-5, atol=1e-6)


def test_training_with_batched_values_follows_in_loop_values(monkeypatch):
    """20 updates of CartPole: values after the scan (the GPU default) against values
    computed inside it (the CPU default), to rounding."""
    outs = {}
    for batched in (False, True):
        monkeypatch.setattr(loops, "COMPACT_BATCHED_VALUES", batched)
        config = pjp.PPOConfig(total_timesteps=4 * 128 * 20)
        outs[batched] = jax.jit(pjp.make_train(config))(jax.random.key(0))
    _assert_runs_agree(outs[False], outs[True])
