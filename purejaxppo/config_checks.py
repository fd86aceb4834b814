"""Checks of `PPOConfig` values: type coercion per field annotation, then one validator
per field group (the `group` declared on each field, see `config.FIELD_GROUPS`).

Every error is a `ValueError` naming the field and the offending value, raised by
`PPOConfig.__post_init__` before anything is traced.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from purejaxppo.errors import bad, did_you_mean, short
from purejaxppo.sink_types import LOGGERS  # `PPOConfig.loggers`: the keys of `SINKS`

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu", "leaky_relu")

#: Observation encoders (`PPOConfig.encoder`), see `purejaxppo.networks`.
ENCODERS = ("mlp", "cnn", "nature", "impala")
# encoder="nature": the whole Nature-DQN torso (Mnih et al. 2015, "Human-level control through
# deep reinforcement learning", Methods): three ReLU convs, then one 512-unit ReLU layer.
NATURE_TORSO = {
    "cnn_channels": (32, 64, 64),
    "cnn_kernel_sizes": (8, 4, 3),
    "cnn_strides": (4, 2, 1),
    "hidden_sizes": (512,),
    "activation": "relu",
}

#: Recurrent cores (`PPOConfig.recurrent`), see `purejaxppo.networks`.
RECURRENT_CORES = ("lstm", "gru", "transformer")
#: `PPOConfig.fused_kernels` values (`purejaxppo.fused`).
FUSED_KERNELS = ("auto", "on", "off")

#: String fields whose words YAML 1.1 reads as booleans (`fused_kernels: off` is False):
#: field -> (the word for false, the word for true); `coerce` turns the boolean back.
BOOL_WORDS = {"fused_kernels": ("off", "on")}

#: How recurrent policies' training sequences are cut (`PPOConfig.sequence_sampling`):
#: fixed chunks (`sequences.make_sequences`) or trajectory windows (`purejaxppo.sequences`).
SEQUENCE_SAMPLINGS = ("chunks", "windows")

#: Convolution implementations (`PPOConfig.conv_impl`), see `purejaxppo.networks.layers`.
CONV_IMPLS = ("auto", "im2col", "xla")

#: Advantage estimators (`PPOConfig.advantage_estimator`), see `purejaxppo.gae`.
ADVANTAGE_ESTIMATORS = ("gae", "n_step")

#: How host envs' copies step (`PPOConfig.host_vectorization`), see `envs.host`.
HOST_VECTORIZATIONS = ("sync", "async")


def coerce(name: str, annotation: Any, value: Any) -> Any:
    """Checks `value` against the field's annotation; converts lossless cases
    (1e6 -> 1000000 for an int field, a scalar -> a 1-tuple, numpy scalars -> Python,
    true / false -> "on" / "off" for the fields of `BOOL_WORDS`).

    Raises:
      ValueError: naming `name` and `value` when the value has the wrong type.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # Optional[float], int | str
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        for kind in inner[1:]:  # e.g. keep_checkpoints: 3 or "all"
            if kind in _SCALARS and kind is not float and isinstance(value, kind):
                return value
        return coerce(name, inner[0], value)
    if annotation is str and name in BOOL_WORDS and isinstance(value, (bool, np.bool_)):
        return BOOL_WORDS[name][int(value)]  # YAML's `on` / `off`
    if annotation in _SCALARS:
        return _SCALARS[annotation](name, value)
    if origin is tuple:  # tuple[int, ...], tuple[str, ...]
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value,)
        if isinstance(value, str) and args[0] is str:
            value = (value,)
        if not isinstance(value, (list, tuple)):
            kind = "strings" if args[0] is str else "integers"
            raise ValueError(f"{name} must be a list of {kind}, got {short(value)}")
        return tuple(coerce(f"{name}[{i}]", args[0], v) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"{name} must be a mapping, got {short(value)}")
        return dict(value)
    raise TypeError(f"unhandled annotation {annotation!r} for {name}")  # programming error


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be true or false, got {short(value)}")


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {short(value)}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)  # accepts 1e6 from YAML / the command line
    raise ValueError(f"{name} must be an integer, got {short(value)}")


def _as_float(name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number, got {short(value)}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        if not math.isfinite(float(value)):
            raise ValueError(f"{name} must be finite, got {short(value)}")
        return float(value)
    raise ValueError(f"{name} must be a number, got {short(value)}")


def _as_str(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"{name} must be a string, got {short(value)}")


_SCALARS: dict[Any, Callable[[str, Any], Any]] = {
    bool: _as_bool,
    int: _as_int,
    float: _as_float,
    str: _as_str,
}


# --------------------------------------------------------------------- validators
def _at_least(c: Any, names: Sequence[str], low: float, why: str) -> None:
    for name in names:
        if getattr(c, name) < low:
            raise bad(name, getattr(c, name), why)


def _one_of(name: str, value: Any, choices: Sequence[str], prefix: str = "") -> None:
    if value not in choices:
        hint = did_you_mean(value, choices, n=2)
        raise bad(name, value, f"must be {prefix}one of {tuple(choices)}{hint}")


def check_env(c: Any) -> None:
    """env_name, env_kwargs, multi_agent, host_vectorization."""
    if not c.env_name:
        raise bad("env_name", c.env_name, "must not be empty")
    _one_of("host_vectorization", c.host_vectorization, HOST_VECTORIZATIONS)
    if c.host_vectorization == "async" and not c.env_name.startswith("gymnasium:"):
        why = "async vectorization applies to gymnasium: ids only"
        raise bad("host_vectorization", c.host_vectorization, f"{why} (env_name={c.env_name!r})")
    for key in c.env_kwargs:
        if not isinstance(key, str):
            raise bad("env_kwargs", c.env_kwargs, "keys must be strings")
    if c.multi_agent is not None:
        _one_of("multi_agent", c.multi_agent, ("ippo", "mappo"), prefix="null or ")


def check_system(c: Any) -> None:
    """Sizes and loop lengths (num_envs, num_steps, total_timesteps, ...), seed,
    reset_ratio."""
    _at_least(c, ("num_envs", "num_steps", "total_timesteps", "update_epochs"), 1, "must be >= 1")
    _at_least(c, ("num_minibatches",), 1, "must be >= 1")
    _one_of("loop_layout", c.loop_layout, ("auto", "compact", "unrolled"))
    _one_of("fused_kernels", c.fused_kernels, FUSED_KERNELS)
    if c.batch_size % c.num_minibatches:
        raise bad(
            "num_minibatches",
            c.num_minibatches,
            f"must divide num_envs*num_steps = {c.num_envs}*{c.num_steps} = {c.batch_size}",
        )
    if c.total_timesteps < c.batch_size:
        raise bad(
            "total_timesteps",
            c.total_timesteps,
            f"must be at least num_envs*num_steps = {c.batch_size} (one update)",
        )
    if c.total_timesteps // c.batch_size >= 2**31:
        raise bad(
            "total_timesteps",
            c.total_timesteps,
            f"gives {c.total_timesteps // c.batch_size:.3g} updates of {c.batch_size} steps; "
            "must be < 2**31 updates (the int32 update counter)",
        )
    if not 0 <= c.seed < 2**32:
        raise bad("seed", c.seed, "must be in [0, 2**32) = [0, 4294967295]")
    if c.reset_ratio is not None:
        if isinstance(c.reset_ratio, bool) or not isinstance(c.reset_ratio, int):
            raise bad("reset_ratio", c.reset_ratio, "must be null or an integer >= 1")
        if c.reset_ratio < 1 or c.num_envs % c.reset_ratio:
            raise bad(
                "reset_ratio",
                c.reset_ratio,
                f"must be null or an integer >= 1 dividing num_envs={c.num_envs}",
            )
        if c.multi_agent is not None:
            raise bad("reset_ratio", c.reset_ratio, "optimistic resets are single-agent only")


def check_loss(c: Any) -> None:
    """Discounting, clipping and loss weights; critic pre-training."""
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(c, name) <= 1.0:
            raise bad(name, getattr(c, name), "must be in [0, 1]")
    for name in ("clip_coef",):
        if getattr(c, name) <= 0:
            raise bad(name, getattr(c, name), "must be > 0")
    _at_least(c, ("vf_coef", "ent_coef"), 0, "must be >= 0")
    _one_of("advantage_estimator", c.advantage_estimator, ADVANTAGE_ESTIMATORS)
    _at_least(c, ("n_step",), 1, "must be >= 1")
    if c.target_kl is not None and c.target_kl <= 0:
        raise bad("target_kl", c.target_kl, "must be > 0 or None (off)")
    if not 0 <= c.critic_pretrain_steps < c.num_updates:
        raise bad(
            "critic_pretrain_steps",
            c.critic_pretrain_steps,
            f"must be in [0, num_updates={c.num_updates})",
        )


def check_optim(c: Any) -> None:
    """Step sizes, their annealing, gradient clipping, Adam epsilon."""
    for name in ("learning_rate", "max_grad_norm", "adam_eps"):
        if getattr(c, name) <= 0:
            raise bad(name, getattr(c, name), "must be > 0")
    _at_least(c, ("end_learning_rate",), 0, "must be >= 0")
    if c.grad_clip_per_network and c.shares_encoder:
        raise bad(
            "grad_clip_per_network",
            True,
            "clips the actor's and the critic's gradients separately, but the actor and "
            "critic share an encoder (share_encoder resolves to true: set "
            "share_encoder: false)",
        )
    for name in ("actor_learning_rate", "critic_learning_rate"):
        # 0 is allowed: it freezes that tower (a traced value, e.g. per sweep / PBT member).
        if getattr(c, name) is not None and not getattr(c, name) >= 0:
            raise bad(
                name, getattr(c, name), "must be > 0, 0 (freezes it) or None (use learning_rate)"
            )


def check_network(c: Any) -> None:
    """Layer sizes, activation, encoder, conv stacks, action masking."""
    if not c.hidden_sizes or any(h < 1 for h in c.hidden_sizes):
        raise bad("hidden_sizes", list(c.hidden_sizes), "must be a non-empty list of sizes >= 1")
    _one_of("activation", c.activation, ACTIVATIONS)
    _one_of("encoder", c.encoder, ENCODERS)
    for name in ("cnn_channels", "cnn_kernel_sizes", "cnn_strides", "impala_channels"):
        sizes = getattr(c, name)
        if not sizes or any(s < 1 for s in sizes):
            raise bad(name, list(sizes), "must be a non-empty list of integers >= 1")
    for name in ("cnn_kernel_sizes", "cnn_strides"):
        if len(getattr(c, name)) != len(c.cnn_channels):
            raise bad(
                name,
                list(getattr(c, name)),
                f"must have one entry per conv layer, like cnn_channels={list(c.cnn_channels)}",
            )
    if c.encoder == "nature":
        for name, want in NATURE_TORSO.items():
            got = getattr(c, name)
            if (tuple(got) if name != "activation" else got) != want:
                raise bad(
                    name,
                    list(got) if name != "activation" else got,
                    f"encoder='nature' is the Nature DQN torso (Mnih et al. 2015): convs 32 "
                    f"8x8/4, 64 4x4/2, 64 3x3/1, then 512 units, relu; set {name}: "
                    f"{list(want) if name != 'activation' else want} (hidden_sizes: [512], "
                    "activation: relu), or use encoder='cnn' to change the stack",
                )
    if c.conv_impl not in CONV_IMPLS:
        raise bad("conv_impl", c.conv_impl, f"must be one of {CONV_IMPLS}")
    if c.head_hidden_sizes is not None and any(h < 1 for h in c.head_hidden_sizes):
        raise bad(
            "head_hidden_sizes",
            list(c.head_hidden_sizes),
            "must be null (the default heads) or a list of sizes >= 1 ([] for linear heads)",
        )
    if c.latent_dim is not None and c.latent_dim < 1:
        raise bad("latent_dim", c.latent_dim, "must be null (no projection) or >= 1")
    if c.action_mask_key is not None and not c.action_mask_key:
        raise bad("action_mask_key", c.action_mask_key, "must be a non-empty key or null (off)")


def check_recurrent(c: Any) -> None:
    """The recurrent core and its sequence lengths."""
    if c.recurrent is not None:
        _one_of("recurrent", c.recurrent, RECURRENT_CORES, prefix="null or ")
    names = ("transformer_layers", "transformer_heads", "transformer_dim", "memory_len")
    _at_least(c, names, 1, "must be >= 1")
    if c.transformer_dim % c.transformer_heads:
        raise bad(
            "transformer_dim",
            c.transformer_dim,
            f"must be divisible by transformer_heads={c.transformer_heads}",
        )
    _at_least(c, ("recurrent_size", "recurrent_layers"), 1, "must be >= 1")
    if c.recurrent_layers > 1 and c.recurrent not in ("lstm", "gru"):
        raise bad(
            "recurrent_layers",
            c.recurrent_layers,
            f"stacks lstm / gru cells; recurrent={c.recurrent!r} (the transformer core has "
            "transformer_layers)",
        )
    if c.max_seq_len is not None:
        if c.max_seq_len < 1 or c.num_steps % c.max_seq_len:
            raise bad(
                "max_seq_len", c.max_seq_len, f"must be >= 1 and divide num_steps={c.num_steps}"
            )
        if c.recurrent is None:
            raise bad(
                "max_seq_len",
                c.max_seq_len,
                f"needs a recurrent core (recurrent: one of {RECURRENT_CORES})",
            )
    _one_of("sequence_sampling", c.sequence_sampling, SEQUENCE_SAMPLINGS)
    if c.sequence_sampling == "windows" and c.recurrent is None:
        raise bad(
            "sequence_sampling",
            c.sequence_sampling,
            "needs a recurrent core (a feed-forward policy trains on single transitions)",
        )
    if not 0.0 <= c.window_prob_from_end <= 1.0:
        raise bad("window_prob_from_end", c.window_prob_from_end, "must be in [0, 1]")
    if c.recurrent is not None and c.num_sequences % c.num_minibatches:
        raise bad(
            "num_minibatches",
            c.num_minibatches,
            f"must divide the number of sequences of a recurrent rollout, num_envs*num_steps/"
            f"max_seq_len = {c.num_envs}*{c.num_steps}/{c.seq_len} = {c.num_sequences}",
        )


def check_normalize(c: Any) -> None:
    """Observation / reward normalisation clip bounds and timing."""
    for name in ("obs_clip", "reward_clip"):
        if not getattr(c, name) > 0:
            raise bad(name, getattr(c, name), "must be > 0 (inf: no clipping)")
    _one_of("normalize_timing", c.normalize_timing, NORMALIZE_TIMINGS)


#: When the normalisation statistics move (`PPOConfig.normalize_timing`).
NORMALIZE_TIMINGS = ("update", "step")


def check_metrics(c: Any) -> None:
    """Extra metrics of the compiled program (info keys, action histogram)."""
    if len(set(c.info_metrics)) != len(c.info_metrics) or not all(c.info_metrics):
        raise bad("info_metrics", list(c.info_metrics), "must be distinct non-empty keys")


#: What a warm start (`init_from`) may take from the source run.
INIT_PARTS = ("params", "normalization", "optimizer")


def check_driver(c: Any) -> None:
    """Logging, saving, evaluation, videos and datasets of the driver."""
    _at_least(c, ("log_freq",), 1, "must be >= 1")
    if c.save_freq < 0:
        raise bad("save_freq", c.save_freq, "must be >= 0 (0: only by time and at the end)")
    _at_least(c, ("save_minutes", "eval_freq"), 0, "must be >= 0 (0: off)")
    _at_least(c, ("eval_episodes",), 1, "must be >= 1")
    if c.keep_checkpoints != "all" and not (
        isinstance(c.keep_checkpoints, int) and c.keep_checkpoints >= 1
    ):
        raise bad("keep_checkpoints", c.keep_checkpoints, 'must be >= 1 or "all"')
    unknown = [p for p in c.init_parts if p not in INIT_PARTS]
    if unknown or not c.init_parts or len(set(c.init_parts)) != len(c.init_parts):
        hint = did_you_mean(unknown[0], INIT_PARTS) if unknown else ""
        raise bad(
            "init_parts", list(c.init_parts), f"must be distinct entries of {INIT_PARTS}{hint}"
        )
    if c.init_step is not None and c.init_step < 0:
        raise bad("init_step", c.init_step, "must be >= 0 (None: the newest checkpoint)")
    for name, overrides in c.eval_splits.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise bad("eval_splits", c.eval_splits, f"split name {name!r} must be a plain string")
        if not isinstance(overrides, Mapping):
            raise bad(
                "eval_splits", c.eval_splits, f"split {name!r} must map to EnvParams overrides"
            )
        if not isinstance(overrides.get("env_name", "-"), str) or not isinstance(
            overrides.get("env_kwargs", {}), Mapping
        ):
            why = f"split {name!r}: env_name must be an env id, env_kwargs a mapping"
            raise bad("eval_splits", c.eval_splits, why)
    known = list(c.eval_splits) or ["train"]
    if c.best_split is not None and c.best_split not in known:
        hint = did_you_mean(str(c.best_split), known)
        raise bad("best_split", c.best_split, f"not an eval split; the splits are {known}{hint}")
    for name in c.loggers:
        if name not in LOGGERS:
            hint = did_you_mean(name, LOGGERS, n=2)
            raise bad("loggers", list(c.loggers), f"{name!r} is not one of {LOGGERS}{hint}")
    _at_least(c, ("video_freq", "collect_freq"), 0, "must be >= 0 (0: off)")
    _at_least(c, ("collect_episodes",), 1, "must be >= 1")
    if c.name is not None and (
        not isinstance(c.name, str) or c.name in ("", ".", "..") or "/" in c.name or "\\" in c.name
    ):
        raise bad("name", c.name, "must be a plain directory name (no '/', not '.' or '..')")


#: The validator of each field group, in the order they run (sizes first: later checks
#: use `batch_size`, `num_updates`, `num_sequences`).
VALIDATORS: dict[str, Callable[[Any], None]] = {
    "system": check_system,
    "env": check_env,
    "loss": check_loss,
    "optim": check_optim,
    "network": check_network,
    "recurrent": check_recurrent,
    "normalize": check_normalize,
    "metrics": check_metrics,
    "driver": check_driver,
}
