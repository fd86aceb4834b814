"""Configuration: the static `PPOConfig` and the traced `Hyperparams` pytree.

`PPOConfig` holds everything that fixes the shape of the compiled program (sizes, loop
lengths, network shape, env id) plus the default values of the traced hyperparameters.
`Hyperparams` holds the values that may change between runs of one compiled program
(learning rate, coefficients, discounting): `train(key, hparams)` under `jax.vmap` over a
batch of `Hyperparams` compiles once.

Field names follow CleanRL's `ppo.py` (Huang et al. 2022, "The 37 Implementation Details
of PPO") and the PPO paper (Schulman et al. 2017, arXiv:1707.06347).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu", "leaky_relu")

#: Observation encoders (`PPOConfig.encoder`), see `purejaxppo.networks`.
ENCODERS = ("mlp", "cnn", "impala")

#: Recurrent cores (`PPOConfig.recurrent`), see `purejaxppo.networks`.
RECURRENT_CORES = ("lstm", "gru", "transformer")

#: Convolution implementations (`PPOConfig.conv_impl`), see `purejaxppo.networks.layers`.
CONV_IMPLS = ("auto", "im2col", "xla")

#: Logging sinks (`PPOConfig.loggers`), see `purejaxppo.sinks`.
LOGGERS = ("csv", "jsonl", "tensorboard", "wandb", "mlflow")

#: Fields that steer only the driver around the training program (logging, saving,
#: evaluation, videos, datasets): a resumed run may change them, and sweeping them makes
#: no sense.
DRIVER_FIELDS = (
    "log_freq",
    "save_freq",
    "save_minutes",
    "keep_checkpoints",
    "eval_freq",
    "eval_episodes",
    "eval_splits",
    "loggers",
    "video_freq",
    "collect_freq",
    "collect_episodes",
)

#: Fields of `PPOConfig` that are traced (live in `Hyperparams`); all others are static.
TRACED_FIELDS = (
    "learning_rate",
    "actor_learning_rate",
    "critic_learning_rate",
    "end_learning_rate",
    "ent_coef",
    "vf_coef",
    "clip_coef",
    "gamma",
    "gae_lambda",
    "max_grad_norm",
    "target_kl",
)


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Static configuration of a PPO run. Every field has a default.

    Defaults are the CleanRL / PureJaxRL CartPole settings: 4 envs x 128 steps,
    4 epochs x 4 minibatches, Adam (eps 1e-5) with lr 2.5e-4 linearly annealed to 0,
    gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5, grad-norm clip 0.5,
    a 64-64 tanh MLP with orthogonal init.

    Attributes:
      env_name: a gymnax id (e.g. "CartPole-v1"), a probe id ("Probe1-v0" ...) or a
        suite id "<prefix>:<name>" (e.g. "brax:inverted_pendulum"; see `make_env`).
      env_kwargs: keyword arguments for the environment. Keys naming a field of the env's
        `EnvParams` (e.g. `max_steps_in_episode`) override that parameter; the other keys
        go to the env constructor.
      num_envs: N, parallel environments per agent.
      num_steps: T, steps per environment per rollout. One update uses N*T transitions.
      total_timesteps: env steps per agent; num_updates = total_timesteps // (N*T).
      update_epochs: passes over the rollout per update.
      num_minibatches: minibatches per epoch; must divide N*T.
      gamma: discount factor in [0, 1].
      gae_lambda: GAE lambda in [0, 1] (Schulman et al. 2016, arXiv:1506.02438).
      clip_coef: PPO ratio clip epsilon (> 0); also clips the value update if clip_vloss.
      norm_adv: normalise advantages per minibatch (mean 0, std 1).
      clip_vloss: use the clipped value loss of CleanRL / the PPO2 baselines.
      vf_coef: weight of the value loss.
      ent_coef: weight of the entropy bonus.
      max_grad_norm: global gradient-norm clip (> 0).
      learning_rate: Adam step size at the first update.
      actor_learning_rate: step size of the actor's parameters (the actor tower and head,
        `log_std`; a user's actor module); None (default) uses `learning_rate`.
      critic_learning_rate: step size of the critic's parameters; None uses
        `learning_rate`. A shared encoder / core always uses `learning_rate`. Both are
        traced (sweepable), annealed like `learning_rate`, and applied per group after
        the global gradient clipping and Adam (`update.make_optimizer`).
      anneal_lr: anneal the step size linearly, per update, to `end_learning_rate`.
      end_learning_rate: step size the annealing reaches after the last update.
      target_kl: stop the remaining epochs of an update once the epoch's mean approx KL
        exceeds it; None turns early stopping off.
      critic_pretrain_steps: number of updates at the start that train only the critic.
      hidden_sizes: widths of the hidden layers of the actor and of the critic MLP.
      activation: one of "tanh", "relu", "gelu", "silu", "elu", "leaky_relu"; used by
        every hidden layer (dense and convolutional).
      encoder: how observations are encoded before the `hidden_sizes` layers: "mlp"
        (flattened), "cnn" (Nature-DQN conv stack, Mnih et al. 2015) or "impala" (IMPALA
        ResNet, Espeholt et al. 2018, on the image with CoordConv x/y channels appended,
        Liu et al. 2018). "cnn" / "impala" need image observations `[H, W, C]`; dict /
        tuple observations get one encoder per entry (conv for images, MLP for the rest),
        concatenated. See `purejaxppo.networks`.
      cnn_channels: output channels of the "cnn" conv layers (Nature DQN: 32, 64, 64).
      cnn_kernel_sizes: square kernel size of each "cnn" conv layer (Nature DQN: 8, 4, 3).
      cnn_strides: stride of each "cnn" conv layer (Nature DQN: 4, 2, 1); VALID padding.
      impala_channels: channels of the "impala" stages (IMPALA: 16, 32, 32); each stage is
        a 3x3 conv, a 3x3 max-pool with stride 2 and two residual blocks.
      conv_impl: how conv layers compute: "auto" (im2col + matmul on CPU, where XLA's
        convolutions inside `lax.scan` are ~6x slower; `lax.conv` / cuDNN on GPU and TPU),
        "im2col" or "xla". The parameters are the same, so checkpoints move between them.
      share_encoder: one torso (encoder, and the recurrent core if any) shared by the
        actor and critic heads (CleanRL's Atari agent), or separate actor and critic
        towers (false). None (default) shares for recurrent policies and separates for
        feed-forward ones (`shares_encoder` resolves it).
      squash_actions: Box actions from a tanh-squashed Gaussian rescaled to the action
        bounds (needs finite bounds), instead of a Gaussian clipped to them.
      action_mask_key: the entry of a dict observation that holds the action mask
        (PettingZoo / Jumanji convention; default "action_mask"). When the env's
        observation space is a `Dict` with this key, its entry (bool or 0/1, `[n]` for
        `Discrete(n)`, `[sum(nvec)]` for `MultiDiscrete(nvec)`) gives the valid actions of
        each step: invalid ones get probability 0 (their logits are set to -1e9, Huang &
        Ontanon 2020, arXiv:2006.14171), and the encoders do not see the mask. None
        turns masking off (the entry is then encoded like any other). See
        `purejaxppo.networks.apply_action_mask`.
      recurrent: None (feed-forward, the default), "lstm", "gru" or "transformer": a
        recurrent core between the encoder and the heads (LSTM / GRU of `recurrent_size`
        units, or a gated transformer-XL, Parisotto et al. 2019). Its state is carried
        between steps (in `EnvCarry.policy_state`) and reset where the previous step
        ended an episode. Training minibatches are then whole env sequences (split by
        environment, not by time), each re-run from its stored initial hidden state.
      recurrent_size: units of the recurrent core (LSTM: the state holds cell and hidden,
        2 * recurrent_size numbers per env).
      transformer_layers: layers of the "transformer" core.
      transformer_heads: attention heads per layer (must divide transformer_dim).
      transformer_dim: model width D of the "transformer" core (its output size).
      memory_len: M, past steps per layer the "transformer" core attends to (kept in its
        state, masked at episode boundaries so no attention crosses a reset).
      max_seq_len: with `recurrent`, None trains on whole rollout sequences (`num_steps`
        long); an integer L cuts each into num_steps / L chunks of L steps (truncated
        BPTT, AgileRL's `max_seq_len`), each starting from the hidden state stored at its
        first step. Must divide num_steps; `num_minibatches` must divide the number of
        sequences, num_envs * num_steps / L.
      adam_eps: Adam epsilon.
      normalize_observations: normalise the float vector observations by their running
        mean and variance (`purejaxppo.normalize`; Welford / Chan et al. 1979 parallel
        merge), then clip to +-`obs_clip`. The statistics are the params' `obs_norm`
        collection: updated after each update from its rollout, saved in checkpoints,
        applied by `Policy`, `evaluate` and the export (which take raw observations).
      normalize_rewards: divide rewards by the running std of the discounted return (as
        gymnasium / CleanRL `NormalizeReward`), then clip to +-`reward_clip`; the
        statistics are the params' `reward_norm` collection. Episode returns are logged raw.
      obs_clip, reward_clip: clip bounds (> 0; `inf` turns clipping off).
      log_freq: updates per jitted segment in `purejaxppo train` (how often progress and
        metrics are reported); the numbers do not depend on it.
      save_freq: updates between checkpoints in `purejaxppo train` (orbax, atomic, under
        `<run_dir>/checkpoints/last`); 0: none by update count (see `save_minutes`).
      save_minutes: wall-clock minutes between checkpoints in `purejaxppo train` (checked
        after every segment of `log_freq` updates; 0 turns it off). The run also saves
        every `save_freq` updates and at the end.
      keep_checkpoints: newest checkpoints of each kind kept on disk (>= 1); resuming
        from a damaged newest one falls back to the one before it, with a warning.
      eval_freq: updates between evaluations in `purejaxppo train` (0: off). Each
        evaluation runs `eval_episodes` episodes per split (sampled actions), logs the mean
        return as the column `eval/<split>/return` of metrics.csv, and keeps the checkpoint
        with the best return on the first split as `checkpoints/best`.
      eval_episodes: episodes per split and evaluation.
      eval_splits: named validation splits (the seed's `validators`): split name ->
        `EnvParams` overrides on top of the training env's, e.g.
        `{"long_pole": {"length": 1.0}}`; empty means one split "train" with the training
        env itself.
      seed: PRNG seed used by the command line (`jax.random.key(seed)`), in [0, 2**32).
      info_metrics: keys of the env's `info` dict to log: each is reduced in the scan to
        the mean over the episodes that ended during an update of `info[key]` at their
        last step (metric `info/<key>`; NaN when none ended). Unknown keys raise
        ValueError when the training function is built.
      action_histogram: Discrete actions: also log `action_frac/<i>`, the fraction of the
        rollout's actions equal to i (one metric per action).
      loggers: sinks of `purejaxppo train` (`purejaxppo.sinks`): any of "csv" (always
        written: metrics.csv), "jsonl", "tensorboard", "wandb", "mlflow".
      video_freq: updates between recorded greedy episodes in `purejaxppo train`
        (`run_dir/videos/update_<n>.gif`, sent to the sinks); 0: off.
      collect_freq: updates between trajectory collections in `purejaxppo train`
        (`collect_episodes` episodes to `run_dir/datasets/update_<n>.npz`); 0: off.
      collect_episodes: episodes per collection with `collect_freq`.

    Raises:
      ValueError: naming the field and value, for a wrong type, an out-of-range value
        or impossible sizes (e.g. num_envs*num_steps not divisible by num_minibatches).
    """

    env_name: str = "CartPole-v1"
    env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    num_envs: int = 4
    num_steps: int = 128
    total_timesteps: int = 500_000
    update_epochs: int = 4
    num_minibatches: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    norm_adv: bool = True
    clip_vloss: bool = True
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5
    learning_rate: float = 2.5e-4
    actor_learning_rate: float | None = None
    critic_learning_rate: float | None = None
    anneal_lr: bool = True
    end_learning_rate: float = 0.0
    target_kl: float | None = None
    critic_pretrain_steps: int = 0
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    encoder: str = "mlp"
    cnn_channels: tuple[int, ...] = (32, 64, 64)
    cnn_kernel_sizes: tuple[int, ...] = (8, 4, 3)
    cnn_strides: tuple[int, ...] = (4, 2, 1)
    impala_channels: tuple[int, ...] = (16, 32, 32)
    conv_impl: str = "auto"
    share_encoder: bool | None = None
    squash_actions: bool = False
    action_mask_key: str | None = "action_mask"
    recurrent: str | None = None
    recurrent_size: int = 64
    transformer_layers: int = 2
    transformer_heads: int = 2
    transformer_dim: int = 64
    memory_len: int = 10
    max_seq_len: int | None = None
    adam_eps: float = 1e-5
    normalize_observations: bool = False
    normalize_rewards: bool = False
    obs_clip: float = 10.0
    reward_clip: float = 10.0
    log_freq: int = 10
    save_freq: int = 0
    save_minutes: float = 10.0
    keep_checkpoints: int = 3
    eval_freq: int = 0
    eval_episodes: int = 32
    eval_splits: dict[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 0
    info_metrics: tuple[str, ...] = ()
    action_histogram: bool = False
    loggers: tuple[str, ...] = ("csv",)
    video_freq: int = 0
    collect_freq: int = 0
    collect_episodes: int = 10

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = _coerce(field.name, _resolved_type(field), getattr(self, field.name))
            object.__setattr__(self, field.name, value)
        _validate(self)

    def __hash__(self) -> int:
        # The dict fields make the generated hash fail; hash the canonical YAML form.
        import json

        return hash(json.dumps(self.to_dict(), sort_keys=True, default=repr))

    # ----------------------------------------------------------------- derived sizes
    @property
    def shares_encoder(self) -> bool:
        """`share_encoder` resolved: None shares for recurrent policies only."""
        if self.share_encoder is None:
            return self.recurrent is not None
        return self.share_encoder

    @property
    def batch_size(self) -> int:
        """Transitions per update: num_envs * num_steps."""
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch: batch_size // num_minibatches."""
        return self.batch_size // self.num_minibatches

    @property
    def seq_len(self) -> int:
        """Steps per training sequence of a recurrent policy: max_seq_len or num_steps."""
        return self.num_steps if self.max_seq_len is None else self.max_seq_len

    @property
    def num_sequences(self) -> int:
        """Training sequences per recurrent rollout: num_envs * num_steps // seq_len."""
        return self.num_envs * (self.num_steps // self.seq_len)

    @property
    def num_updates(self) -> int:
        """Updates per run: total_timesteps // batch_size."""
        return self.total_timesteps // self.batch_size

    # ----------------------------------------------------------------- conversions
    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PPOConfig:
        """Builds a config from a mapping; unknown keys raise ValueError with close names."""
        if not isinstance(values, Mapping):
            raise ValueError(f"config must be a mapping of field names, got {values!r}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ValueError(f"unknown config field {key!r}{hint}")
        return cls(**dict(values))

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> PPOConfig:
        """Reads a YAML mapping of field names (see `configs/`), then applies overrides."""
        values = load_yaml(Path(path).read_text(), source=str(path)) or {}
        if not isinstance(values, dict):
            raise ValueError(f"config file {path} must hold a mapping, got {values!r}")
        return cls.from_dict({**values, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict (tuples as lists) suitable for YAML / JSON."""
        out = dataclasses.asdict(self)
        for name, value in out.items():
            if isinstance(value, tuple):  # hidden_sizes, cnn_channels, ...
                out[name] = list(value)
        return out

    def replace(self, **changes: Any) -> PPOConfig:
        """Returns a copy with fields changed (validated like the constructor)."""
        return PPOConfig.from_dict({**self.to_dict(), **changes})


@struct.dataclass
class Hyperparams:
    """Traced hyperparameters: a pytree of float32 scalars (or `[S]` batches under vmap).

    `target_kl` is `inf` when early stopping is off; `actor_learning_rate` /
    `critic_learning_rate` are NaN when unset (then `learning_rate` applies). Build one with `from_config`, change
    values with `.replace(...)`, and stack several with `Hyperparams.stack`.
    """

    learning_rate: jax.Array
    actor_learning_rate: jax.Array
    critic_learning_rate: jax.Array
    end_learning_rate: jax.Array
    ent_coef: jax.Array
    vf_coef: jax.Array
    clip_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    max_grad_norm: jax.Array
    target_kl: jax.Array

    @classmethod
    def from_config(cls, config: PPOConfig) -> Hyperparams:
        """The config's traced fields as float32 scalars."""
        values = {name: getattr(config, name) for name in TRACED_FIELDS}
        if values["target_kl"] is None:
            values["target_kl"] = math.inf
        for name in ("actor_learning_rate", "critic_learning_rate"):
            if values[name] is None:
                values[name] = math.nan
        return cls(**{k: jnp.asarray(v, jnp.float32) for k, v in values.items()})

    @staticmethod
    def stack(hparams: typing.Sequence[Hyperparams]) -> Hyperparams:
        """Stacks S scalar `Hyperparams` into one with `[S]` leaves (for `jax.vmap`)."""
        return jax.tree.map(lambda *xs: jnp.stack(xs), *hparams)


# --------------------------------------------------------------------- YAML
class DuplicateKeyError(ValueError):
    """A YAML mapping gives the same key twice."""


def load_yaml(text: str, source: str = "<string>") -> Any:
    """Parses YAML like `yaml.safe_load`, but strictly: a mapping with a key given twice
    is an error (PyYAML silently keeps the last value).

    Raises:
      ValueError: naming `source` and the line (1-based) of a syntax error or of the
        duplicate key.
    """
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
            if first is not None:
                raise DuplicateKeyError(
                    f"{source}, line {line}: duplicate key {key!r} (first given on line {first})"
                )
            seen[key] = line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = " ".join(str(p) for p in (err.context, err.problem) if p)
        raise ValueError(f"{source}{where}: invalid YAML: {what}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{source}: invalid YAML: {err}") from None


# --------------------------------------------------------------------- validation
def _resolved_type(field: dataclasses.Field) -> Any:
    hints = typing.get_type_hints(PPOConfig)
    return hints[field.name]


def _coerce(name: str, annotation: Any, value: Any) -> Any:
    """Checks `value` against the field's annotation; converts lossless cases."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # Optional[float]
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(name, inner[0], value)
    if annotation is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise ValueError(f"{name} must be true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)  # accepts 1e6 from YAML / the command line
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if annotation is float:
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be a number, got {value!r}")
        if isinstance(value, (int, float, np.integer, np.floating)):
            if not math.isfinite(float(value)):
                raise ValueError(f"{name} must be finite, got {value!r}")
            return float(value)
        raise ValueError(f"{name} must be a number, got {value!r}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{name} must be a string, got {value!r}")
    if origin is tuple:  # tuple[int, ...], tuple[str, ...]
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value,)
        if isinstance(value, str) and args[0] is str:
            value = (value,)
        if not isinstance(value, (list, tuple)):
            kind = "strings" if args[0] is str else "integers"
            raise ValueError(f"{name} must be a list of {kind}, got {value!r}")
        return tuple(_coerce(f"{name}[{i}]", args[0], v) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"{name} must be a mapping, got {value!r}")
        return dict(value)
    raise TypeError(f"unhandled annotation {annotation!r} for {name}")  # programming error


def _validate(c: PPOConfig) -> None:
    def bad(field: str, value: Any, why: str) -> ValueError:
        return ValueError(f"{field}={value!r}: {why}")

    for name in ("num_envs", "num_steps", "total_timesteps", "update_epochs"):
        if getattr(c, name) < 1:
            raise bad(name, getattr(c, name), "must be >= 1")
    if c.num_minibatches < 1:
        raise bad("num_minibatches", c.num_minibatches, "must be >= 1")
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
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(c, name) <= 1.0:
            raise bad(name, getattr(c, name), "must be in [0, 1]")
    for name in ("clip_coef", "learning_rate", "max_grad_norm", "adam_eps"):
        if getattr(c, name) <= 0:
            raise bad(name, getattr(c, name), "must be > 0")
    for name in ("vf_coef", "ent_coef", "end_learning_rate"):
        if getattr(c, name) < 0:
            raise bad(name, getattr(c, name), "must be >= 0")
    for name in ("actor_learning_rate", "critic_learning_rate"):
        if getattr(c, name) is not None and getattr(c, name) <= 0:
            raise bad(name, getattr(c, name), "must be > 0 or None (use learning_rate)")
    if c.target_kl is not None and c.target_kl <= 0:
        raise bad("target_kl", c.target_kl, "must be > 0 or None (off)")
    if not 0 <= c.critic_pretrain_steps < c.num_updates:
        raise bad(
            "critic_pretrain_steps",
            c.critic_pretrain_steps,
            f"must be in [0, num_updates={c.num_updates})",
        )
    if not c.hidden_sizes or any(h < 1 for h in c.hidden_sizes):
        raise bad("hidden_sizes", list(c.hidden_sizes), "must be a non-empty list of sizes >= 1")
    if c.activation not in ACTIVATIONS:
        close = difflib.get_close_matches(c.activation, ACTIVATIONS, n=2)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise bad("activation", c.activation, f"must be one of {ACTIVATIONS}{hint}")
    if c.encoder not in ENCODERS:
        close = difflib.get_close_matches(c.encoder, ENCODERS, n=2)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise bad("encoder", c.encoder, f"must be one of {ENCODERS}{hint}")
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
    if c.action_mask_key is not None and not c.action_mask_key:
        raise bad("action_mask_key", c.action_mask_key, "must be a non-empty key or null (off)")
    if c.recurrent is not None and c.recurrent not in RECURRENT_CORES:
        close = difflib.get_close_matches(c.recurrent, RECURRENT_CORES, n=2)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise bad("recurrent", c.recurrent, f"must be null or one of {RECURRENT_CORES}{hint}")
    if c.conv_impl not in CONV_IMPLS:
        raise bad("conv_impl", c.conv_impl, f"must be one of {CONV_IMPLS}")
    for name in ("transformer_layers", "transformer_heads", "transformer_dim", "memory_len"):
        if getattr(c, name) < 1:
            raise bad(name, getattr(c, name), "must be >= 1")
    if c.transformer_dim % c.transformer_heads:
        raise bad(
            "transformer_dim",
            c.transformer_dim,
            f"must be divisible by transformer_heads={c.transformer_heads}",
        )
    if c.recurrent_size < 1:
        raise bad("recurrent_size", c.recurrent_size, "must be >= 1")
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
    if c.recurrent is not None and c.num_sequences % c.num_minibatches:
        raise bad(
            "num_minibatches",
            c.num_minibatches,
            f"must divide the number of sequences of a recurrent rollout, num_envs*num_steps/"
            f"max_seq_len = {c.num_envs}*{c.num_steps}/{c.seq_len} = {c.num_sequences}",
        )
    for name in ("obs_clip", "reward_clip"):
        if not getattr(c, name) > 0:
            raise bad(name, getattr(c, name), "must be > 0 (inf: no clipping)")
    if c.log_freq < 1:
        raise bad("log_freq", c.log_freq, "must be >= 1")
    if c.save_freq < 0:
        raise bad("save_freq", c.save_freq, "must be >= 0 (0: only by time and at the end)")
    if c.save_minutes < 0:
        raise bad("save_minutes", c.save_minutes, "must be >= 0 (0: off)")
    if c.keep_checkpoints < 1:
        raise bad("keep_checkpoints", c.keep_checkpoints, "must be >= 1")
    if not 0 <= c.seed < 2**32:
        raise bad("seed", c.seed, "must be in [0, 2**32) = [0, 4294967295]")
    if c.eval_freq < 0:
        raise bad("eval_freq", c.eval_freq, "must be >= 0 (0: off)")
    if c.eval_episodes < 1:
        raise bad("eval_episodes", c.eval_episodes, "must be >= 1")
    for name, overrides in c.eval_splits.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise bad("eval_splits", c.eval_splits, f"split name {name!r} must be a plain string")
        if not isinstance(overrides, Mapping):
            raise bad(
                "eval_splits", c.eval_splits, f"split {name!r} must map to EnvParams overrides"
            )
    if not c.env_name:
        raise bad("env_name", c.env_name, "must not be empty")
    for name in c.loggers:
        if name not in LOGGERS:
            close = difflib.get_close_matches(name, LOGGERS, n=2)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise bad("loggers", list(c.loggers), f"{name!r} is not one of {LOGGERS}{hint}")
    if len(set(c.info_metrics)) != len(c.info_metrics) or not all(c.info_metrics):
        raise bad("info_metrics", list(c.info_metrics), "must be distinct non-empty keys")
    for name in ("video_freq", "collect_freq"):
        if getattr(c, name) < 0:
            raise bad(name, getattr(c, name), "must be >= 0 (0: off)")
    if c.collect_episodes < 1:
        raise bad("collect_episodes", c.collect_episodes, "must be >= 1")
    for key in c.env_kwargs:
        if not isinstance(key, str):
            raise bad("env_kwargs", c.env_kwargs, "keys must be strings")
