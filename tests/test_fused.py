"""`PPOConfig.fused_kernels` (`purejaxppo.fused`): the fused gradient kernels of the GPU.

On a CPU the kernels run in Pallas' interpret mode ("on"): a short vmapped training run
gives the parameters and loss terms of XLA's gradient ("off") up to float32 rounding. The
kernels are also lowered for CUDA on this CPU, which is where a JAX upgrade that Triton's
lowering no longer takes would fail (the GPU compiles that lowering). Networks the kernels
do not cover keep XLA's gradient under "auto" and raise under "on".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import purejaxppo as pjp
from purejaxppo.envs import make_env
from purejaxppo.fused import fused_minibatch_grads, unsupported
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.sequences import Batch
from purejaxppo.update import make_minibatch_grads


def networks_for(env_id: str = "CartPole-v1", **fields):
    config = pjp.PPOConfig(env_name=env_id, **fields)
    return config, pjp.make_networks(config, *make_env(env_id))


def minibatch(size: int, key: jax.Array | None = None) -> Batch:
    k = jax.random.split(jax.random.key(1) if key is None else key, 5)

    def steps(x):  # [M] -> [M, L=1]
        return x[:, None]

    return Batch(
        obs=jax.random.normal(k[0], (size, 1, 4)),
        action=steps(jax.random.randint(k[1], (size,), 0, 2)),
        log_prob=steps(jnp.full((size,), jnp.log(0.5))),
        value=steps(jax.random.normal(k[2], (size,))),
        advantages=steps(jax.random.normal(k[3], (size,))),
        returns=steps(jax.random.normal(k[4], (size,))),
        initial_state=(),
        resets=jnp.zeros((size, 1), bool),
    )


def test_the_default_agent_is_covered_and_others_say_what_is_not():
    assert unsupported(networks_for()[1]) is None
    assert unsupported(networks_for(activation="relu", hidden_sizes=(32, 16))[1]) is None
    assert unsupported(networks_for()[1], axis_name="devices") == "a data-parallel axis"
    assert "continuous actions" in unsupported(networks_for("Pendulum-v1")[1])
    assert "a recurrent core" in unsupported(networks_for(recurrent="gru")[1])
    assert "powers of two" in unsupported(networks_for(hidden_sizes=(48, 64))[1])
    assert "activation 'gelu'" in unsupported(networks_for(activation="gelu")[1])
    assert "observation normalisation" in unsupported(networks_for(normalize_observations=True)[1])


def test_modes_pick_the_kernels_and_on_names_what_they_do_not_cover():
    fallback = object()
    for mode, expected in (("off", None), ("auto", None)):  # auto: XLA's on a CPU
        config, networks = networks_for(fused_kernels=mode)
        assert fused_minibatch_grads(config, networks, fallback) is expected
    config, networks = networks_for(fused_kernels="on")
    assert callable(fused_minibatch_grads(config, networks, fallback))
    config, networks = networks_for("Pendulum-v1", fused_kernels="on")
    with pytest.raises(ValueError, match="fused_kernels='on'.*continuous actions"):
        fused_minibatch_grads(config, networks, fallback)
    with pytest.raises(ValueError, match="fused_kernels"):
        pjp.PPOConfig(fused_kernels="yes").validate()


def test_on_rejects_a_minibatch_the_kernels_do_not_take():
    config, networks = networks_for(fused_kernels="on")
    grads = make_minibatch_grads(config, networks)
    params = networks.init(jax.random.key(0))
    hparams = Hyperparams.from_config(config)
    with pytest.raises(ValueError, match=r"power of two >= 16.*\[24, 1\]"):
        grads(params, minibatch(24), hparams, 1.0)


def test_one_minibatch_gradient_equals_xla_to_rounding():
    # The same loss and gradient, term by term, in float32 (measured: 2e-8 at most).
    config, networks = networks_for(fused_kernels="on")
    xla = make_minibatch_grads(config.replace(fused_kernels="off"), networks)
    fused = make_minibatch_grads(config, networks)
    params = networks.init(jax.random.key(0))
    hparams = Hyperparams.from_config(config)
    batch = minibatch(32)
    want_grads, want_terms = jax.jit(xla)(params, batch, hparams, 1.0)
    got_grads, got_terms = jax.jit(fused)(params, batch, hparams, 1.0)
    assert jax.tree.structure(got_grads) == jax.tree.structure(want_grads)
    for got, want in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads), strict=True):
        assert got.shape == want.shape
        assert jnp.max(jnp.abs(got - want)) < 1e-6 * (1.0 + jnp.max(jnp.abs(want)))
    for name, got, want in zip(want_terms._fields, got_terms, want_terms, strict=True):
        assert abs(float(got) - float(want)) < 1e-6, name
    assert max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(want_grads)) > 1e-3


def test_vmapped_training_with_the_kernels_learns_what_xla_learns():
    # 2 seeds x 3 updates x 16 Adam steps in the CPU's "compact" loop layout (the kernels
    # replace the minibatch gradient in either layout; "unrolled", the GPU's, took 35 s to
    # compile each of the two programs on a 2-core CPU): measured 3e-8 largest parameter
    # difference (float32 rounding), params of size ~1.
    def train(mode):
        config = pjp.PPOConfig(
            total_timesteps=4 * 128 * 3, loop_layout="compact", fused_kernels=mode
        )
        keys = jax.random.split(jax.random.key(0), 2)
        return jax.jit(jax.vmap(pjp.make_train(config)))(keys)

    xla, fused = train("off"), train("on")
    diffs = jax.tree.map(
        lambda a, b: float(jnp.max(jnp.abs(a - b))),
        xla.train_state.params,
        fused.train_state.params,
    )
    assert max(jax.tree.leaves(diffs)) < 1e-5
    moved = jax.tree.map(
        lambda a, b: float(jnp.max(jnp.abs(a - b))),
        xla.train_state.params,
        jax.vmap(pjp.make_networks(pjp.PPOConfig(), *make_env("CartPole-v1")).init)(
            jax.random.split(jax.random.key(0), 2)
        ),
    )
    assert max(jax.tree.leaves(moved)) > 1e-3  # the runs trained (not two copies of init)


def test_the_kernels_lower_to_triton_for_cuda_under_vmap():
    config, networks = networks_for(fused_kernels="on")
    xla = make_minibatch_grads(config.replace(fused_kernels="off"), networks)
    grads = fused_minibatch_grads(config, networks, xla, interpret=False)
    params = jax.vmap(networks.init)(jax.random.split(jax.random.key(0), 3))
    batch = jax.vmap(minibatch, in_axes=(None, 0))(64, jax.random.split(jax.random.key(1), 3))
    hparams = Hyperparams.from_config(config)
    program = jax.jit(jax.vmap(grads, in_axes=(0, 0, None, None)))
    lowered = program.trace(params, batch, hparams, 1.0).lower(lowering_platforms=("cuda",))
    # Two kernels (actor, critic), each one Triton call whose grid is the vmapped agents.
    assert lowered.as_text().count("__gpu$xla.gpu.triton") == 2


def test_the_minibatch_step_experiment_times_forms_of_the_same_math():
    # benchmarks/experiments/minibatch_step.py on a CPU (the fused form interpreted): the
    # stacked towers compute `sep`'s loss, the library's fused kernels its XLA gradient's.
    from benchmarks.experiments import minibatch_step

    argv = ["--agents", "4", "--reps", "1", "--interpret", "--forms", "sep", "stack"]
    rows = {r["form"]: r for r in minibatch_step.main([*argv, "xla", "fused"])}
    assert all(r["ms_per_minibatch_step"] > 0 for r in rows.values())
    assert abs(rows["stack"]["final_loss_mean"] - rows["sep"]["final_loss_mean"]) < 1e-5
    assert abs(rows["fused"]["final_loss_mean"] - rows["xla"]["final_loss_mean"]) < 1e-5


def test_auto_on_a_gpu_takes_the_kernels_only_where_they_were_measured_to_win(monkeypatch):
    import purejaxppo.fused as fused

    monkeypatch.setattr(fused.jax, "default_backend", lambda: "gpu")
    config, networks = networks_for()
    assert fused_minibatch_grads(*networks_for(hidden_sizes=(128, 128)), object()) is None

    def xla(params, batch, hparams, actor_coef):
        return "xla"

    grads = fused_minibatch_grads(config, networks, xla)
    assert callable(grads)
    params = networks.init(jax.random.key(0))
    hparams = Hyperparams.from_config(config)
    assert grads(params, minibatch(256), hparams, 1.0) == "xla"  # > AUTO_MAX_MINIBATCH
    assert grads(params, minibatch(24), hparams, 1.0) == "xla"  # not a power of two


def test_make_minibatch_grads_on_a_gpu_takes_the_kernels_by_default(monkeypatch):
    # What `train`, `--num-seeds` and `sweep` build (they all call make_minibatch_grads).
    import purejaxppo.fused as fused

    config, networks = networks_for()
    assert "_make_grads" not in make_minibatch_grads(config, networks).__qualname__  # CPU
    monkeypatch.setattr(fused.jax, "default_backend", lambda: "gpu")
    assert "_make_grads" in make_minibatch_grads(config, networks).__qualname__
    off = config.replace(fused_kernels="off")
    assert "_make_grads" not in make_minibatch_grads(off, networks).__qualname__
