"""Configuration: the static `PPOConfig` and the traced `Hyperparams` pytree.

`PPOConfig` holds everything that fixes the shape of the compiled program (sizes, loop
lengths, network shape, env id) plus the default values of the traced hyperparameters.
`Hyperparams` holds the values that may change between runs of one compiled program
(learning rate, coefficients, discounting): `train(key, hparams)` under `jax.vmap` over a
batch of `Hyperparams` compiles once.

Traced or static is declared once, on the field (`traced(...)` / `static(...)`, as
rejax's `algorithm.py` does), together with the field's group (Stoix's config groups:
env / system / loss / optim / network / recurrent / normalize / metrics / driver).
`TRACED_FIELDS`, `Hyperparams`, `DRIVER_FIELDS`, `FIELD_GROUPS` and the validation
(`config_checks.VALIDATORS`, one validator per group) are derived from it.

Field names follow CleanRL's `ppo.py` (Huang et al. 2022, "The 37 Implementation Details
of PPO") and the PPO paper (Schulman et al. 2017, arXiv:1707.06347).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from purejaxppo.config_checks import (
    ACTIVATIONS,
    ADVANTAGE_ESTIMATORS,
    CONV_IMPLS,
    ENCODERS,
    LOGGERS,
    RECURRENT_CORES,
    VALIDATORS,
    coerce,
)
from purejaxppo.config_yaml import DuplicateKeyError, load_yaml, load_yaml_file
from purejaxppo.errors import short
from purejaxppo.peer_names import field_hint

__all__ = [
    "ACTIVATIONS",
    "ADVANTAGE_ESTIMATORS",
    "CONV_IMPLS",
    "DRIVER_FIELDS",
    "ENCODERS",
    "FIELD_GROUPS",
    "LOGGERS",
    "RECURRENT_CORES",
    "TRACED_FIELDS",
    "DuplicateKeyError",
    "PPOConfig",
    "field_group",
    "is_traced",
    "load_yaml",
    "load_yaml_file",
    "static",
    "traced",
]


def static(default: Any = dataclasses.MISSING, group: str = "", *, factory: Any = None) -> Any:
    """A static `PPOConfig` field (it fixes the compiled program) of `group`."""
    if group not in VALIDATORS:
        raise ValueError(f"group={group!r}: must be one of {tuple(VALIDATORS)}")
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"group": group})
    return dataclasses.field(default=default, metadata={"group": group})


def traced(default: float | None, group: str, *, none_as: float | None = None) -> Any:
    """A traced `PPOConfig` field: a float32 leaf of `Hyperparams`, sweepable without a
    recompile. `none_as` is its traced value when the config holds None (off / unset)."""
    if group not in VALIDATORS:
        raise ValueError(f"group={group!r}: must be one of {tuple(VALIDATORS)}")
    meta = {"group": group, "traced": True, "none_as": none_as}
    return dataclasses.field(default=default, metadata=meta)


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
      multi_agent: None (single-agent PPO), "ippo" or "mappo" for a multi-agent env
        ("jaxmarl:<id>"): one policy shared by all agents, agents as extra rows of the
        batch; "mappo" gives the critic the env's world state (`purejaxppo.kinds.agents`).
      host_vectorization: "sync" (default) or "async": how a `gymnasium:` env's N copies
        step, in this process or one subprocess each (gymnasium's `AsyncVectorEnv`).
      reset_ratio: None (default: gymnax's auto-reset, one reset computed per env per
        step) or R >= 1 dividing num_envs (per device): optimistic resets, N / R resets
        per step shared by the envs whose episodes ended (Craftax's
        OptimisticResetVecEnvWrapper; `purejaxppo.envs.resets`). Pays where a reset costs
        about as much as a step (Craftax). JAX envs whose `step` is gymnax's or a suite
        adapter's only; not with `multi_agent` or host envs.
      num_envs: N, parallel environments per agent.
      num_steps: T, steps per environment per rollout. One update uses N*T transitions.
      total_timesteps: env steps per agent; num_updates = total_timesteps // (N*T).
      update_epochs: passes over the rollout per update (>= 1; its keys and, with the
        "unrolled" loop layout, its minibatch orders enter the memory estimate,
        `purejaxppo.memory`).
      num_minibatches: minibatches per epoch; must divide N*T.
      loop_layout: "auto" (default: "compact" on CPU, "unrolled" on GPU / TPU),
        "compact" or "unrolled": how the update's loops compile (`purejaxppo.loops`:
        unrolled rollout steps, GAE as a prefix scan and one flat scan of minibatch steps
        without `cond`s save a host round trip per loop iteration on a GPU; the rollout's
        values from one critic pass after its scan). The same math; "unrolled" differs
        from "compact" by float32 rounding in GAE and in the batched values.
      fused_kernels: "auto" (default: on a GPU, for the plain MLP actor-critic), "on" or
        "off": the minibatch gradient as two fused Pallas kernels per agent
        (`purejaxppo.fused`; the same math, TF32 matmuls like XLA's on a GPU). True /
        False (YAML's reading of a bare `on` / `off`) are "on" / "off".
      gamma: discount factor in [0, 1].
      gae_lambda: GAE lambda in [0, 1] (Schulman et al. 2016, arXiv:1506.02438).
      advantage_estimator: "gae" (default) or "n_step": n-step bootstrapped returns of at
        most `n_step` rewards (MetaBox's PPO_Agent; formula in `gae.n_step_advantages`).
      n_step: rewards summed before bootstrapping with advantage_estimator "n_step".
      clip_coef: PPO ratio clip epsilon (> 0); also clips the value update if clip_vloss.
      norm_adv: normalise advantages per minibatch (mean 0, std 1).
      clip_vloss: use the clipped value loss of CleanRL / the PPO2 baselines.
      vf_coef: weight of the value loss.
      ent_coef: weight of the entropy bonus.
      max_grad_norm: global gradient-norm clip (> 0).
      grad_clip_per_network: clip the actor's and the critic's gradients each to the norm
        `max_grad_norm` on its own, as the two optimizers of MAPPO's reference code do
        (Yu et al. 2022's on-policy, JaxMARL's mappo_*.py); false (default) clips the
        norm of the whole gradient (CleanRL). Needs separate towers: `share_encoder:
        true` is refused (`ValueError`); a custom network's other parameters are a third
        group.
      learning_rate: Adam step size at the first update.
      actor_learning_rate: step size of the actor's parameters (the actor tower and head,
        `log_std`; a user's actor module); None (default) uses `learning_rate`.
      critic_learning_rate: step size of the critic's parameters; None uses
        `learning_rate`. A shared encoder / core always uses `learning_rate`. Both are
        traced (sweepable), annealed like `learning_rate`, and applied per group after
        the global gradient clipping and Adam (`update.make_optimizer`). 0 freezes that
        tower; negative values raise `ValueError`.
      anneal_lr: anneal the step size linearly, per update, to `end_learning_rate`.
      end_learning_rate: step size the annealing reaches after the last update.
      target_kl: stop the remaining epochs of an update once the epoch's mean approx KL
        exceeds it; None turns early stopping off.
      critic_pretrain_steps: number of updates at the start that train only the critic.
      hidden_sizes: widths of the hidden layers of the actor and of the critic MLP.
      head_hidden_sizes: hidden layers of the actor and critic heads, after the encoder
        (and core): AgileRL's `head_config`. None (default): none for feed-forward
        policies, one of `hidden_sizes[-1]` units on a recurrent core; [] linear heads.
      latent_dim: None (default) or the width each observation input's encoder is
        projected to (one more dense layer + activation) before the inputs'
        features are concatenated (AgileRL's multi-input `latent_dim`).
      activation: one of "tanh", "relu", "gelu", "silu", "elu", "leaky_relu"; used by
        every hidden layer (dense and convolutional).
      encoder: how observations are encoded before the `hidden_sizes` layers: "mlp"
        (flattened), "cnn" (Nature-DQN conv stack, Mnih et al. 2015), "nature" (that
        stack fixed to Nature DQN's layers: convs 32 8x8/4, 64 4x4/2, 64 3x3/1, then
        `hidden_sizes` [512] with relu, which it requires; the same network and
        parameter names as "cnn" with those settings, for 84x84x4 Atari frames, uint8
        rescaled to [0, 1]) or "impala" (IMPALA ResNet, Espeholt et al. 2018, on the
        image with CoordConv x/y channels appended, Liu et al. 2018). "cnn" / "nature" /
        "impala" need image observations `[H, W, C]`; dict /
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
        feed-forward ones and for MAPPO (`shares_encoder` resolves it).
      squash_actions: Box actions from a tanh-squashed Gaussian rescaled to the action
        bounds (needs finite bounds), instead of a Gaussian clipped to them.
      log_std_init: initial value of the state-independent Gaussian `log_std` (Box
        actions), so the initial std is exp(log_std_init) (AgileRL's `action_std_init`).
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
      recurrent_layers: stacked "lstm" / "gru" cells (default 1), each feeding the next;
        the state concatenates the layers' states, layer 0 first.
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
      sequence_sampling: with `recurrent`, "chunks" (default: the fixed chunks above) or
        "windows": each update draws num_envs * num_steps / L windows of up to L steps
        (L = max_seq_len or num_steps), each within one trajectory (never across an
        episode end), padded and masked out of the loss (`purejaxppo.sequences`; DTI's
        trajectory minibatches).
      window_prob_from_end: DTI's `prob_go_from_end`, in [0, 1]: a trajectory longer than
        `max_seq_len` gives a full window that ends at its last step with this probability
        (else at a uniformly drawn step); a shorter one is always one whole window.
      adam_eps: Adam epsilon.
      normalize_observations: normalise the observations (an array, integer ones cast
        to float32, or the float vectors of a dict / tuple) by their running mean and
        variance (`purejaxppo.normalize`; Welford / Chan et al. 1979 parallel
        merge), then clip to +-`obs_clip`. The statistics are the params' `obs_norm`
        collection: updated after each update from its rollout, saved in checkpoints,
        applied by `Policy`, `evaluate` and the export (which take raw observations).
      normalize_rewards: divide rewards by the running std of the discounted return (as
        gymnasium / CleanRL `NormalizeReward`), then clip to +-`reward_clip`; the
        statistics are the params' `reward_norm` collection. Episode returns are logged raw.
      obs_clip, reward_clip: clip bounds (> 0; `inf` turns clipping off).
      normalize_timing: when the statistics move. "update": once per update from its
        whole rollout (above). "step": at every env step, as SB3's `VecNormalize`; the
        rollout stores the normalised observations and the update learns on them
        (`rollout.make_normalizing_rollout`; data-parallel: merged over the devices at
        every step). Not with `learn` on your own transitions.
      log_freq: updates per jitted segment in `purejaxppo train` (how often progress and
        metrics are reported); the numbers do not depend on it.
      save_freq: updates between checkpoints in `purejaxppo train` (orbax, atomic, under
        `<run_dir>/checkpoints/last`); 0: none by update count (see `save_minutes`).
      save_minutes: wall-clock minutes between checkpoints in `purejaxppo train` (checked
        after every segment of `log_freq` updates; 0 turns it off). The run also saves
        every `save_freq` updates and at the end.
      keep_checkpoints: newest checkpoints of each kind kept on disk (>= 1), or "all"
        (the run's checkpoint series: `list_checkpoints`, `Policy.load(run_dir, step=)`,
        `purejaxppo eval RUN --all-steps`); resuming from a damaged newest one falls back
        to the one before it, with a warning.
      eval_freq: updates between evaluations in `purejaxppo train` (0: off). Each
        evaluation runs `eval_episodes` episodes per split (sampled actions), logs the mean
        return as the column `eval/<split>/return` of metrics.csv, and keeps the checkpoint
        with the best return on `best_split` (default: the first split) as
        `checkpoints/best`.
      eval_episodes: episodes per split and evaluation.
      eval_splits: named validation splits (the seed's `validators`): split name ->
        `EnvParams` overrides on top of the training env's, e.g.
        `{"long_pole": {"length": 1.0}}`, or another env id with the same spaces,
        `{"other": {"env_name": "Probe5-v0"}}` (+ `env_kwargs`); empty means one split
        "train" with the training env itself. `best_split` chooses `best`.
      best_split: the eval split whose mean return chooses `checkpoints/best` (None: the
        first split). A name not in `eval_splits` ("train" when that is empty) raises
        ValueError naming it and the known splits.
      seed: PRNG seed used by the command line (`jax.random.key(seed)`), in [0, 2**32).
      info_metrics: keys of the env's `info` dict to log: each is reduced in the scan to
        the mean over the episodes that ended during an update of `info[key]` at their
        last step (metric `info/<key>`; NaN when none ended). Unknown keys raise
        ValueError when the training function is built.
      action_histogram: Discrete actions: also log `action_frac/<i>`, the fraction of the
        rollout's actions equal to i (one metric per action).
      loggers: sinks of `purejaxppo train` (`purejaxppo.sinks`): any of "csv" (always
        written: metrics.csv), "jsonl", "tensorboard", "wandb", "mlflow".
      upload_checkpoints: with the "wandb" logger, upload `best/` (each time it improves)
        and the final checkpoint as W&B model artifacts (`sinks.WandbSink`, duo_ai's
        `store_model_checkpoint`); `train` without "wandb" in `loggers` raises a
        `ValueError` before training.
      name: the run's name: `purejaxppo train` without `--run-dir` writes to
        `runs/<name>` (a suffix keeps it unique), and W&B / MLflow show it. A plain
        directory name (no "/", not "." or ".."); None (default): "<env>-<time>-seed<s>".
      video_freq: updates between recorded greedy episodes in `purejaxppo train`
        (`run_dir/videos/update_<n>.gif`, sent to the sinks); 0: off.
      collect_freq: updates between trajectory collections in `purejaxppo train`
        (`collect_episodes` episodes to `run_dir/datasets/update_<n>.npz`); 0: off.
      collect_episodes: episodes per collection with `collect_freq`.
      init_from: warm start: a run directory whose newest checkpoint (or `init_step`)
        gives the initial `init_parts` of every run of this config (`warm_start.py`;
        `make_train(config, init_params=...)` from Python). None: from scratch.
      init_parts: what `init_from` gives: any of "params" (the network's weights),
        "normalization" (the `obs_norm` / `reward_norm` statistics) and "optimizer"
        (Adam's moments and count); default params and normalization.
      init_step: the update step of `init_from`'s checkpoint (None: its newest; the
        command line records the step it took).

    Raises:
      ValueError: naming the field and value, for a wrong type, an out-of-range value
        or impossible sizes (e.g. num_envs*num_steps not divisible by num_minibatches).
    """

    env_name: str = static("CartPole-v1", "env")
    env_kwargs: dict[str, Any] = static(group="env", factory=dict)
    multi_agent: str | None = static(None, "env")
    host_vectorization: str = static("sync", "env")
    reset_ratio: int | None = static(None, "env")
    num_envs: int = static(4, "system")
    num_steps: int = static(128, "system")
    total_timesteps: int = static(512_000, "system")
    update_epochs: int = static(4, "system")
    num_minibatches: int = static(4, "system")
    loop_layout: str = static("auto", "system")
    fused_kernels: str = static("auto", "system")
    gamma: float = traced(0.99, "loss")
    gae_lambda: float = traced(0.95, "loss")
    advantage_estimator: str = static("gae", "loss")
    n_step: int = static(5, "loss")
    clip_coef: float = traced(0.2, "loss")
    norm_adv: bool = static(True, "loss")
    clip_vloss: bool = static(True, "loss")
    vf_coef: float = traced(0.5, "loss")
    ent_coef: float = traced(0.01, "loss")
    max_grad_norm: float = traced(0.5, "optim")
    grad_clip_per_network: bool = static(False, "optim")
    learning_rate: float = traced(2.5e-4, "optim")
    actor_learning_rate: float | None = traced(None, "optim", none_as=math.nan)
    critic_learning_rate: float | None = traced(None, "optim", none_as=math.nan)
    anneal_lr: bool = static(True, "optim")
    end_learning_rate: float = traced(0.0, "optim")
    target_kl: float | None = traced(None, "loss", none_as=math.inf)
    critic_pretrain_steps: int = static(0, "loss")
    hidden_sizes: tuple[int, ...] = static((64, 64), "network")
    head_hidden_sizes: tuple[int, ...] | None = static(None, "network")
    latent_dim: int | None = static(None, "network")
    activation: str = static("tanh", "network")
    encoder: str = static("mlp", "network")
    cnn_channels: tuple[int, ...] = static((32, 64, 64), "network")
    cnn_kernel_sizes: tuple[int, ...] = static((8, 4, 3), "network")
    cnn_strides: tuple[int, ...] = static((4, 2, 1), "network")
    impala_channels: tuple[int, ...] = static((16, 32, 32), "network")
    conv_impl: str = static("auto", "network")
    share_encoder: bool | None = static(None, "network")
    squash_actions: bool = static(False, "network")
    log_std_init: float = static(0.0, "network")
    action_mask_key: str | None = static("action_mask", "network")
    recurrent: str | None = static(None, "recurrent")
    recurrent_size: int = static(64, "recurrent")
    recurrent_layers: int = static(1, "recurrent")
    transformer_layers: int = static(2, "recurrent")
    transformer_heads: int = static(2, "recurrent")
    transformer_dim: int = static(64, "recurrent")
    memory_len: int = static(10, "recurrent")
    max_seq_len: int | None = static(None, "recurrent")
    sequence_sampling: str = static("chunks", "recurrent")
    window_prob_from_end: float = static(0.1, "recurrent")
    adam_eps: float = static(1e-5, "optim")
    normalize_observations: bool = static(False, "normalize")
    normalize_rewards: bool = static(False, "normalize")
    obs_clip: float = static(10.0, "normalize")
    reward_clip: float = static(10.0, "normalize")
    normalize_timing: str = static("update", "normalize")
    log_freq: int = static(10, "driver")
    save_freq: int = static(0, "driver")
    save_minutes: float = static(10.0, "driver")
    keep_checkpoints: int | str = static(3, "driver")
    eval_freq: int = static(0, "driver")
    eval_episodes: int = static(32, "driver")
    eval_splits: dict[str, Any] = static(group="driver", factory=dict)
    best_split: str | None = static(None, "driver")
    seed: int = static(0, "system")
    info_metrics: tuple[str, ...] = static((), "metrics")
    action_histogram: bool = static(False, "metrics")
    loggers: tuple[str, ...] = static(("csv",), "driver")
    upload_checkpoints: bool = static(False, "driver")
    name: str | None = static(None, "driver")
    video_freq: int = static(0, "driver")
    collect_freq: int = static(0, "driver")
    collect_episodes: int = static(10, "driver")
    # warm start: `purejaxppo.warm_start`
    init_from: str | None = static(None, "driver")
    init_parts: tuple[str, ...] = static(("params", "normalization"), "driver")
    init_step: int | None = static(None, "driver")

    def __new__(cls, *args: Any, **kwargs: Any) -> PPOConfig:
        # A mistyped keyword gets the closest field names, not a bare TypeError.
        names = _FIELD_NAMES or [f.name for f in dataclasses.fields(cls)]
        for key in kwargs:
            if key not in names:
                raise TypeError(f"PPOConfig got an unknown field {key!r}{field_hint(key, names)}")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(PPOConfig)
        for field in dataclasses.fields(self):
            value = coerce(field.name, hints[field.name], getattr(self, field.name))
            object.__setattr__(self, field.name, value)
        for check in VALIDATORS.values():
            check(self)

    def __hash__(self) -> int:
        # The dict fields make the generated hash fail; hash the canonical YAML form.
        import json

        return hash(json.dumps(self.to_dict(), sort_keys=True, default=repr))

    # ----------------------------------------------------------------- derived sizes
    @property
    def shares_encoder(self) -> bool:
        """`share_encoder` resolved: None shares for recurrent policies only (not under
        MAPPO, whose actor and critic see different inputs)."""
        if self.share_encoder is None:
            return self.recurrent is not None and self.multi_agent != "mappo"
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
            raise ValueError(f"config must be a mapping of field names, got {short(values)}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                raise ValueError(f"unknown config field {key!r}{field_hint(key, names)}")
        return cls(**dict(values))

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> PPOConfig:
        """Reads a YAML mapping of field names (see `configs/`), then applies overrides."""
        values = load_yaml_file(path) or {}
        if not isinstance(values, dict):
            raise ValueError(f"config file {path} must hold a mapping, got {short(values)}")
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


_FIELDS = {f.name: f for f in dataclasses.fields(PPOConfig)}
_FIELD_NAMES: list[str] = list(_FIELDS)


def is_traced(name: str) -> bool:
    """Whether the `PPOConfig` field `name` is traced (a `Hyperparams` leaf)."""
    return bool(_FIELDS[name].metadata.get("traced", False))


def field_group(name: str) -> str:
    """The group of the `PPOConfig` field `name` (a key of `FIELD_GROUPS`)."""
    return _FIELDS[name].metadata["group"]


#: Fields of `PPOConfig` that are traced (live in `Hyperparams`); all others are static.
TRACED_FIELDS: tuple[str, ...] = tuple(n for n in _FIELD_NAMES if is_traced(n))

#: Field names of each group, in declaration order (the group declared on each field).
FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(n for n in _FIELD_NAMES if field_group(n) == group) for group in VALIDATORS
}

#: Fields that steer only the driver around the training program (logging, saving,
#: evaluation, videos, datasets): a resumed run may change them, and sweeping them makes
#: no sense. The "driver" group.
DRIVER_FIELDS: tuple[str, ...] = FIELD_GROUPS["driver"]
