"""The minibatch gradient of the plain MLP actor-critic as two fused GPU kernels.

`PPOConfig.fused_kernels` ("auto", "on", "off"). With thousands of vmapped agents on a
GPU, the epochs take most of an update, and XLA's gradient (`update.make_minibatch_grads`)
writes every hidden activation `[M, H]` of every agent to GPU memory and reads it back for
the backward pass. Here the actor's forward pass, its loss terms (policy loss, entropy)
and its backward pass run in one Pallas (Triton) program per agent, with the activations
in registers; a second kernel does the same for the critic (value loss). The training
program's `vmap` over agents becomes the kernels' grid. Measured on one H200 with the
standard CartPole workload: 1.39x the update speed of XLA's gradient at 4096 agents, 1.35x
at 1024, the same with one agent (docs/guides/gpu-design.md, "Fused gradient kernels").

The math is `losses.ppo_loss`'s (Schulman et al. 2017, eq. 7 and 9, as CleanRL's
`ppo.py`): the same loss terms, the same gradient; float32 matmuls in TF32, like XLA's
default on a GPU, so parameters differ from XLA's by rounding (on a CPU, where the kernels
run in Pallas' interpret mode, by about 3e-8 after 48 Adam steps:
`tests/test_fused.py`). Clipping and Adam stay the library's (`update.make_optimizer`).

Covered: CleanRL's `Agent`. Separate "mlp" towers on one flat observation of at most 16
features, hidden sizes that are powers of two >= 16, tanh or relu, linear heads, one
`Discrete` action of at most 16 choices, no recurrent core, no observation normalisation,
no data-parallel axis, and minibatches of `M` single steps (`M` a power of two >= 16)
without a mask. `unsupported` names what else a config asks for; "auto" then keeps XLA's
gradient, "on" raises. The observation and the heads are padded to `PAD` columns (Triton's
smallest matmul): zero weights, and -1e9 biases on the padded logits, whose softmax
probability is exactly 0, so the padding's gradients are 0 and are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.config_checks import FUSED_KERNELS
from purejaxppo.losses import LossTerms, ppo_loss

__all__ = [
    "AUTO_MAX_HIDDEN",
    "AUTO_MAX_MINIBATCH",
    "FUSED_KERNELS",
    "PAD",
    "fused_minibatch_grads",
    "unsupported",
]

#: Columns the observation and the heads are padded to (Triton's smallest matmul side).
PAD = 16
#: The largest hidden layer and minibatch "auto" takes the kernels for: the sizes they were
#: measured to win at (64-64 MLP, 128 steps per minibatch). A program keeps its `[M, H]`
#: activations in registers, which spill beyond; "on" takes any size.
AUTO_MAX_HIDDEN = 64
AUTO_MAX_MINIBATCH = 128
_ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu}


def unsupported(networks: Any, axis_name: str | None = None) -> str | None:
    """None when the fused kernels compute `networks`' gradient, else what stops them.

    Args:
      networks: `networks.Networks` of `make_networks` (their flax `module` is inspected:
        encoder, towers, heads, core; and their `action_spec` and `normalization`).
      axis_name: the data-parallel axis of `update.make_minibatch_grads`, or None.

    Returns:
      None, or the reasons joined by ", " (e.g. "a recurrent core, continuous actions").
    """
    module = networks.module
    if axis_name is not None:
        return "a data-parallel axis"
    if module is None or type(module).__name__ != "ActorCritic":
        return "not the built-in actor-critic"
    enc, first = module.encoder_settings, module.inputs[0]
    checks = {
        "a recurrent core": networks.stateful or module.core_settings.kind is not None,
        "a shared encoder": module.shared,
        "continuous actions": module.continuous,
        "not one Discrete action": networks.action_spec.kind != "discrete",
        "more than 16 actions": networks.action_spec.num_actions > PAD,
        "observation normalisation": networks.normalization is not None,
        "a dict or tuple observation": len(module.inputs) != 1 or first.path != (),
        "tower inputs": module.tower_inputs is not None,
        "an encoded observation (one-hot, rescaled or image)": bool(first.one_hot)
        or first.image
        or first.rescaled,
        "an observation of more than 16 features": math.prod(first.shape) > PAD,
        "an encoder other than mlp": enc.kind != "mlp" or enc.latent_dim is not None,
        "head hidden layers": tuple(module.head_hidden_sizes) != (),
        f"activation {enc.activation!r} (tanh or relu)": enc.activation not in _ACTIVATIONS,
        f"hidden sizes {tuple(enc.hidden_sizes)} (powers of two >= 16)": not enc.hidden_sizes
        or any(h < PAD or h & (h - 1) for h in enc.hidden_sizes),
    }
    return ", ".join(reason for reason, bad in checks.items() if bad) or None


def fused_minibatch_grads(
    config: Any,
    networks: Any,
    fallback: Callable,
    axis_name: str | None = None,
    interpret: bool | None = None,
) -> Callable | None:
    """The fused kernels' `grads(params, minibatch, hparams, actor_coef) -> (grads,
    LossTerms)` (the signature of `update.make_minibatch_grads`), or None for XLA's.

    `grads` takes one agent's flax `params`, a `sequences.Batch` of `[M, 1]` single steps
    (float32 observations `[M, 1, D]` with D <= 16, int32 actions `[M, 1]`), the traced
    `Hyperparams` (clip_coef, vf_coef, ent_coef) and `actor_coef` (float32 scalar), and
    returns float32 gradients shaped like `params` and `LossTerms` of float32 scalars;
    `vmap` it over agents (each agent is one program of the kernels' grid). `fallback`
    is XLA's `grads` with the same signature.

    `config.fused_kernels`: "off" -> None; "auto" -> the kernels on a GPU when `networks`
    are covered (`unsupported`) and no hidden layer is wider than `AUTO_MAX_HIDDEN`, else
    None; "on" -> the kernels on any platform (Pallas' interpret mode off a GPU: slow, for
    tests). A minibatch the kernels do not take (a mask, sequences longer than one step,
    `M` not a power of two >= 16) goes to `fallback` under "auto", as does one of more
    than `AUTO_MAX_MINIBATCH` steps. `interpret` (default: off a GPU) runs the kernels in
    Pallas' interpret mode; False lowers them to Triton on any platform (tests lower them
    for CUDA on a CPU).

    Raises:
      ValueError: `fused_kernels` "on" with networks the kernels do not cover (when
        built), or with a minibatch they do not take (when traced).
    """
    mode = config.fused_kernels
    if mode == "off":
        return None
    gpu = jax.default_backend() == "gpu"
    reason = unsupported(networks, axis_name)
    if reason is not None:
        if mode == "on":
            raise ValueError(
                f"fused_kernels='on': the fused gradient kernels do not cover {reason}; "
                "set fused_kernels: auto (XLA's gradient where they do not) or off"
            )
        return None
    if mode == "auto" and (
        not gpu or max(networks.module.encoder_settings.hidden_sizes) > AUTO_MAX_HIDDEN
    ):
        return None
    return _make_grads(config, networks, fallback, not gpu if interpret is None else interpret)


def _make_grads(config: Any, networks: Any, fallback: Callable, interpret: bool) -> Callable:
    statics = (
        config.norm_adv,
        config.clip_vloss,
        _ACTIVATIONS[networks.module.encoder_settings.activation],
    )
    num_actions = networks.action_spec.num_actions

    def grads_fn(params, minibatch, hparams, actor_coef):
        size, length = minibatch.log_prob.shape
        if length != 1 or minibatch.mask is not None or size < PAD or size & (size - 1):
            if config.fused_kernels == "on":
                raise ValueError(
                    f"fused_kernels='on': the fused gradient kernels take minibatches of "
                    f"single steps, a power of two >= {PAD} of them, without a mask; got "
                    f"[{size}, {length}] (mask: {minibatch.mask is not None})"
                )
            return fallback(params, minibatch, hparams, actor_coef)
        if config.fused_kernels == "auto" and size > AUTO_MAX_MINIBATCH:
            return fallback(params, minibatch, hparams, actor_coef)
        obs = minibatch.obs.reshape((size, -1)).astype(jnp.float32)
        data = (
            _pad_to(obs, (size, PAD)),
            minibatch.action.reshape(size).astype(jnp.int32),
            *(
                x.reshape(size)
                for x in (
                    minibatch.log_prob,
                    minibatch.advantages,
                    minibatch.value,
                    minibatch.returns,
                )
            ),
        )
        coefs = _pack([hparams.clip_coef, hparams.vf_coef, hparams.ent_coef, actor_coef])
        p = params["params"]
        grads, out = {}, {}
        for name, loss_fn, outputs in (
            ("actor", _actor_loss, num_actions),
            ("critic", _critic_loss, 1),
        ):
            tower, head = _padded_tower(p, name)
            (g_tower, g_head), out[name] = _kernel_grads(
                loss_fn, tower, head, data, coefs, statics, interpret
            )
            grads.update(_unpadded(p, name, g_tower, g_head, outputs))
        pg_loss, entropy, approx_kl, clipfrac = (out["actor"][i] for i in range(4))
        v_loss = out["critic"][0]
        loss = actor_coef * (pg_loss - hparams.ent_coef * entropy) + hparams.vf_coef * v_loss
        grads = jax.tree.map(lambda g, x: g.astype(x.dtype), {"params": grads}, params)
        terms = LossTerms(
            loss=loss,
            pg_loss=pg_loss,
            v_loss=v_loss,
            entropy=entropy,
            approx_kl=approx_kl,
            clipfrac=clipfrac,
        )
        return grads, terms

    return grads_fn


def _pad_to(x: jax.Array, shape: tuple[int, ...], value: float = 0.0) -> jax.Array:
    widths = [(0, n - m) for m, n in zip(x.shape, shape, strict=True)]
    return jnp.pad(x, widths, constant_values=value)


def _padded_tower(p: dict, name: str) -> tuple[list[dict], dict]:
    """The `name` tower's dense layers (first kernel `[PAD, H]`) and head (`[H, PAD]`)."""
    layers = p[f"{name}_encoder"]["obs_mlp"]
    tower = [dict(layers[f"dense_{i}"]) for i in range(len(layers))]
    tower[0]["kernel"] = _pad_to(tower[0]["kernel"], (PAD, tower[0]["kernel"].shape[1]))
    out = p[f"{name}_head"]["out"]
    head = {
        "kernel": _pad_to(out["kernel"], (out["kernel"].shape[0], PAD)),
        "bias": _pad_to(out["bias"], (PAD,), -1e9 if name == "actor" else 0.0),
    }
    return tower, head


def _unpadded(p: dict, name: str, tower: list[dict], head: dict, outputs: int) -> dict:
    """Gradients of the padded tower and head in the shape of `p`'s entries for `name`."""
    mlp = {f"dense_{i}": dict(layer) for i, layer in enumerate(tower)}
    rows = p[f"{name}_encoder"]["obs_mlp"]["dense_0"]["kernel"].shape[0]
    mlp["dense_0"]["kernel"] = mlp["dense_0"]["kernel"][:rows]
    out = {"kernel": head["kernel"][:, :outputs], "bias": head["bias"][:outputs]}
    return {f"{name}_encoder": {"obs_mlp": mlp}, f"{name}_head": {"out": out}}


def _column(vector: jax.Array, index: int) -> jax.Array:
    """`vector[index]` without a slice (Triton's lowering has none)."""
    return jnp.sum(jnp.where(jnp.arange(vector.shape[0]) == index, vector, 0.0))


def _pack(values: list[jax.Array]) -> jax.Array:
    """Scalars into a float32 `[PAD]` vector (entry i = values[i], then zeros)."""
    out = jnp.zeros((PAD,), jnp.float32)
    for i, value in enumerate(values):
        out = jnp.where(jnp.arange(PAD) == i, jnp.asarray(value, jnp.float32), out)
    return out


def _tower(layers: list[dict], obs: jax.Array, activation: Callable) -> jax.Array:
    x = obs
    for layer in layers:
        x = activation(x @ layer["kernel"] + layer["bias"][None, :])
    return x


def _actor_loss(tower, head, data, coefs, norm_adv, clip_vloss, activation):
    """actor_coef * (policy loss - ent_coef * entropy), and [pg_loss, entropy, approx_kl,
    clipfrac] packed. Inside a kernel: no gathers, no slices, no negated constants (none
    lowers to Triton), so the action's log-probability is a masked sum."""
    obs, action, old_log_prob, adv, old_value, returns = data
    columns = jnp.arange(PAD)[None, :]
    logits = _tower(tower, obs, activation) @ head["kernel"] + head["bias"][None, :]
    logp_all = jax.nn.log_softmax(logits, axis=1)
    log_prob = jnp.sum(jnp.where(columns == action[:, None], logp_all, 0.0), axis=1)
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=1)
    clip_coef, _, ent_coef, actor_coef = (_column(coefs, i) for i in range(4))
    terms = ppo_loss(
        log_prob,
        old_log_prob,
        adv,
        old_value,
        old_value,
        returns,
        entropy,
        clip_coef=clip_coef,
        vf_coef=0.0,
        ent_coef=ent_coef,
        norm_adv=norm_adv,
        clip_vloss=clip_vloss,
    )
    loss = actor_coef * (terms.pg_loss + (-1.0) * ent_coef * terms.entropy)
    return loss, _pack([terms.pg_loss, terms.entropy, terms.approx_kl, terms.clipfrac])


def _critic_loss(tower, head, data, coefs, norm_adv, clip_vloss, activation):
    """vf_coef * value loss, and [v_loss] packed (the value is column 0 of the head)."""
    obs, _, old_log_prob, adv, old_value, returns = data
    columns = jnp.arange(PAD)[None, :]
    out = _tower(tower, obs, activation) @ head["kernel"] + head["bias"][None, :]
    value = jnp.sum(jnp.where(columns == 0, out, 0.0), axis=1)
    clip_coef, vf_coef = _column(coefs, 0), _column(coefs, 1)
    terms = ppo_loss(
        old_log_prob,
        old_log_prob,
        adv,
        value,
        old_value,
        returns,
        adv * 0.0,
        clip_coef=clip_coef,
        vf_coef=vf_coef,
        ent_coef=0.0,
        norm_adv=norm_adv,
        clip_vloss=clip_vloss,
    )
    return vf_coef * terms.v_loss, _pack([terms.v_loss])


def _kernel_grads(loss_fn, tower, head, data, coefs, statics, interpret):
    """One Pallas program: `loss_fn`'s gradient for (`tower`, `head`), and its packed
    terms `[PAD]`. Under `vmap` (agents, seeds) the program becomes a grid of them."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    leaves, treedef = jax.tree.flatten((tower, head))
    inputs = [*data, coefs, *leaves]

    def kernel(*refs):
        values = [ref[...] for ref in refs[: len(inputs)]]
        data_in, coefs_in = values[: len(data)], values[len(data)]
        params_in = jax.tree.unflatten(treedef, values[len(data) + 1 :])

        def loss(params):
            return loss_fn(*params, data_in, coefs_in, *statics)

        grads, terms = jax.grad(loss, has_aux=True)(params_in)
        outs = refs[len(inputs) :]
        for ref, grad in zip(outs[:-1], jax.tree.leaves(grads), strict=True):
            ref[...] = grad
        outs[-1][...] = terms

    out_shape = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves]
    out_shape.append(jax.ShapeDtypeStruct((PAD,), jnp.float32))
    outs = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        # 4 warps: the fewest register spills (benchmarks/experiments/minibatch_step.py)
        compiler_params=plt.CompilerParams(num_warps=4, num_stages=1),
        interpret=interpret,
    )(*inputs)
    return jax.tree.unflatten(treedef, outs[:-1]), outs[-1]
