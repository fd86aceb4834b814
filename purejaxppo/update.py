"""Shuffling into minibatches, the minibatch step, and the epoch loop of one PPO update."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from purejaxppo.collectives import all_gather_flat, pmean_flat
from purejaxppo.config import PPOConfig
from purejaxppo.fused import fused_minibatch_grads
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.loops import LoopPlan
from purejaxppo.losses import LossTerms, ppo_loss
from purejaxppo.metrics import LossMetrics
from purejaxppo.networks import Networks
from purejaxppo.networks.custom import param_labels
from purejaxppo.sequences import Batch
from purejaxppo.types import Params, PyTree, TrainState


def make_optimizer(
    max_grad_norm: jax.typing.ArrayLike,
    learning_rate: jax.typing.ArrayLike | Mapping[str, jax.typing.ArrayLike],
    adam_eps: float,
    labels: PyTree | None = None,
    clip_per_group: bool = False,
) -> optax.GradientTransformation:
    """Global-norm clipping and Adam (on raveled params), then steps of size `learning_rate`.

    `learning_rate` is one step size, or a mapping from the `labels` of the param leaves
    ("actor", "critic", "shared": `networks.custom.param_labels`) to step sizes
    (`actor_learning_rate` / `critic_learning_rate`): the gradient clipping is global, the
    step sizes per group, as `optax.multi_transform` of `optax.scale` per label. The
    state's structure does not depend on the (possibly traced) values, so the state built
    with the config's values at init is updated by a transformation rebuilt with the
    traced values of each update.

    With `clip_per_group` (`PPOConfig.grad_clip_per_network`), the gradient of each label
    group is clipped to the norm `max_grad_norm` on its own (`clip_by_group_norm`), as
    MAPPO's separate actor and critic optimizers do; Adam is per parameter, so the rest
    is what two optimizers compute. Raises `ValueError` without `labels`.
    """
    if clip_per_group:
        if labels is None:
            raise ValueError("make_optimizer: clipping per group needs the param labels")
        adam = optax.chain(
            clip_by_group_norm(max_grad_norm, labels),
            optax.flatten(optax.scale_by_adam(eps=adam_eps)),
        )
        return _then_steps(adam, learning_rate, labels)
    # `optax.flatten` runs clipping and Adam on one raveled vector instead of a tree of 12
    # leaves: 12% less time per update on a 2-core CPU (benchmarks/profile_update.py).
    adam = optax.flatten(
        optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.scale_by_adam(eps=adam_eps))
    )
    return _then_steps(adam, learning_rate, labels)


def initial_learning_rates(config: PPOConfig) -> dict[str, float]:
    """The step sizes of `make_optimizer`'s groups at update 0, from the config's
    `learning_rate`, `actor_learning_rate` and `critic_learning_rate` (for building the
    optimizer's state: `train_setup.make_init`)."""
    base = config.learning_rate
    return {
        "shared": base,
        "actor": base if config.actor_learning_rate is None else config.actor_learning_rate,
        "critic": base if config.critic_learning_rate is None else config.critic_learning_rate,
    }


def _then_steps(
    adam: optax.GradientTransformation,
    learning_rate: jax.typing.ArrayLike | Mapping[str, jax.typing.ArrayLike],
    labels: PyTree | None,
) -> optax.GradientTransformation:
    """`adam`, then steps of size `learning_rate` (one, or one per label group)."""
    if not isinstance(learning_rate, Mapping):
        return optax.chain(adam, optax.scale(-learning_rate))
    if labels is None:
        raise ValueError("make_optimizer: per-group learning rates need the param labels")
    steps = optax.multi_transform(
        {name: optax.scale(-rate) for name, rate in learning_rate.items()}, labels
    )
    return optax.chain(adam, steps)


def clip_by_group_norm(
    max_norm: jax.typing.ArrayLike, labels: PyTree
) -> optax.GradientTransformation:
    """Clips the gradient of each label group to the global norm `max_norm` on its own.

    `labels` is a tree like the params with a group name per leaf (`param_labels`: "actor",
    "critic", "shared"). Within a group this is `optax.clip_by_global_norm` (a group whose
    norm is below `max_norm` is unchanged, else scaled to norm `max_norm`). Stateless.
    """

    def update(updates, state, params=None):
        del params
        leaves, treedef = jax.tree.flatten(updates)
        groups = treedef.flatten_up_to(labels)
        sq = {}
        for leaf, group in zip(leaves, groups, strict=True):
            sq[group] = sq.get(group, 0.0) + jnp.sum(jnp.square(leaf))
        scale = {
            group: jnp.where(total < max_norm**2, 1.0, max_norm / jnp.sqrt(total))
            for group, total in sq.items()
        }
        clipped = [
            (leaf * scale[group]).astype(leaf.dtype)
            for leaf, group in zip(leaves, groups, strict=True)
        ]
        return jax.tree.unflatten(treedef, clipped), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def _permutation(key: jax.Array, size: int) -> jax.Array:
    """A random permutation of `[size]` int32 indices.

    One stable sort of random 32-bit keys: half the time of `jax.random.permutation`
    (which sorts in several rounds) at B = 32768 on CPU, where the sort, not the gather,
    is what shuffling costs. Ties (probability ~ B^2 / 2^33) keep index order.
    """
    return jnp.argsort(jax.random.bits(key, (size,), jnp.uint32))


def shuffle_minibatches(key: jax.Array, batch: Batch, num_minibatches: int) -> Batch:
    """Permutes the `[B]` samples and splits them into `[K, M]` (K = num_minibatches)."""
    size = batch.log_prob.shape[0]
    permutation = _permutation(key, size)
    return jax.tree.map(
        lambda x: jnp.take(x, permutation, axis=0).reshape(
            (num_minibatches, size // num_minibatches, *x.shape[1:])
        ),
        batch,
    )


def normalize_advantages(
    advantages: jax.Array, mask: jax.Array | None, axis_name: str
) -> jax.Array:
    """Advantages of S minibatches split over the devices of `axis_name`, each normalised
    with the mean and std of its whole minibatch (every device's share; the samples of
    `mask` only), with one all-reduce for all S (`all_gather_flat`).

    Each device sends its count, mean and sum of squared deviations per minibatch, and
    every device merges them alike (Chan et al. 1979): the numbers depend on the device
    count and each device's samples, not on how the devices are spread over processes.

    Args:
      advantages: float32 `[S, M, L]` (or `[S, M]`), this device's share of S minibatches.
      mask: bool of the same shape (the samples that count), or None (all count).
      axis_name: the mapped axis (inside `shard_map` / `pmap`).

    Returns:
      float32 of the same shape: `(A - mean) / (std + 1e-8)` per minibatch.
    """
    num = advantages.shape[0]
    flat = advantages.reshape((num, -1))
    valid = jnp.ones(flat.shape, bool) if mask is None else mask.reshape((num, -1))
    count = jnp.sum(valid, axis=1, dtype=jnp.float32)
    mean = jnp.sum(jnp.where(valid, flat, 0.0), axis=1) / count
    sq = jnp.sum(jnp.where(valid, jnp.square(flat - mean[:, None]), 0.0), axis=1)
    counts, means, sqs = all_gather_flat((count, mean, sq), axis_name)  # [D, S] each
    total = jnp.sum(counts, axis=0)
    mean = jnp.sum(counts * means, axis=0) / total
    var = (jnp.sum(sqs, axis=0) + jnp.sum(counts * jnp.square(means - mean), axis=0)) / total
    shape = (num,) + (1,) * (advantages.ndim - 1)
    return (advantages - mean.reshape(shape)) / (jnp.sqrt(var).reshape(shape) + 1e-8)


def _normalizes_across(config: PPOConfig, axis_name: str | None) -> bool:
    """Whether advantages are normalised over several devices (`normalize_advantages`);
    on one device (also a one-device data-parallel axis) `ppo_loss` normalises them."""
    return config.norm_adv and axis_name is not None and jax.lax.axis_size(axis_name) > 1


def make_minibatch_grads(
    config: PPOConfig,
    networks: Networks,
    axis_name: str | None = None,
    *,
    norm_adv: bool | None = None,
) -> Callable[..., tuple[Params, LossTerms]]:
    """Builds `grads(params, minibatch, hparams, actor_coef) -> (grads, LossTerms)`.

    The gradient of the PPO-Clip loss (`ppo_loss`) on one minibatch `Batch` of `[M, L]`
    sequences, re-run with `networks.unroll` from their stored initial states (the loss
    averages over all M*L steps, or over the steps of `minibatch.mask` when it is set;
    L = 1 for feed-forward policies).
    With `axis_name` (data-parallel training inside `shard_map`), each device holds `[M/D]`
    sequences of the minibatch: advantages are normalised with whole-minibatch statistics,
    and the gradients and loss terms are averaged over the axis (`lax.pmean`), so every
    device gets the gradient of the whole minibatch (tests/test_parallel.py checks this
    against the single-device gradient). On several devices the advantage statistics and
    the gradients cross in one all-reduce each (`normalize_advantages`, `pmean_flat`).
    `norm_adv=False` leaves the advantages as they are (the caller normalised them;
    default: `config.norm_adv`).

    `config.fused_kernels` ("auto": on a GPU, for the plain MLP actor-critic) computes the
    same gradient with two fused Pallas kernels per agent instead (`purejaxppo.fused`).
    Raises `ValueError` where "on" asks for them and they do not apply.
    """

    def time_major(x):  # [M, L, ...] -> [L, M, ...]
        return jnp.swapaxes(x, 0, 1)

    def flat(x):  # [M, L] -> [L * M], time-major like the unroll's outputs
        return time_major(x).reshape(-1)

    norm_adv = config.norm_adv if norm_adv is None else norm_adv

    def grads_fn(params, minibatch, hparams, actor_coef):
        normalize = norm_adv
        if normalize and _normalizes_across(config, axis_name):
            advantages = normalize_advantages(
                minibatch.advantages[None],
                None if minibatch.mask is None else minibatch.mask[None],
                axis_name,
            )
            minibatch, normalize = minibatch._replace(advantages=advantages[0]), False

        def loss_fn(params):
            _, dist, value = networks.unroll(
                params,
                minibatch.initial_state,
                jax.tree.map(time_major, minibatch.obs),
                time_major(minibatch.resets),
            )
            terms = ppo_loss(
                dist.log_prob(time_major(minibatch.action)).reshape(-1),
                flat(minibatch.log_prob),
                flat(minibatch.advantages),
                value.reshape(-1),
                flat(minibatch.value),
                flat(minibatch.returns),
                dist.entropy().reshape(-1),
                clip_coef=hparams.clip_coef,
                vf_coef=hparams.vf_coef,
                ent_coef=hparams.ent_coef,
                norm_adv=normalize,
                clip_vloss=config.clip_vloss,
                actor_coef=actor_coef,
                axis_name=axis_name,
                mask=None if minibatch.mask is None else flat(minibatch.mask),
            )
            return terms.loss, terms

        grads, terms = jax.grad(loss_fn, has_aux=True)(params)
        if axis_name is not None:
            grads, terms = pmean_flat((grads, terms), axis_name)
        return grads, terms

    if norm_adv != config.norm_adv:  # the fused kernels follow the config
        return grads_fn
    fused = fused_minibatch_grads(config, networks, grads_fn, axis_name)
    return grads_fn if fused is None else fused


def make_update_epochs(
    config: PPOConfig,
    networks: Networks,
    axis_name: str | None,
    plan: LoopPlan,
) -> Callable[..., tuple[TrainState, dict[str, jax.Array]]]:
    """Builds `update_epochs(train_state, batch, key, hparams, learning_rate, actor_coef)`.

    Runs `update_epochs` epochs (a `lax.scan`), each a fresh shuffle into
    `num_minibatches` minibatches and one Adam step per minibatch (a `lax.scan`). When the
    mean approx KL of an epoch exceeds `hparams.target_kl`, the remaining epochs are
    skipped (CleanRL's `--target-kl`). Returns the new train state and the means of
    `LossMetrics` over the minibatch steps that ran, plus `update_epochs_run`.
    With `axis_name`, the batch is this device's share and gradients are averaged over
    the axis (see `make_minibatch_grads`), so all devices keep identical parameters.

    `plan` (the run's `loops.loop_plan`, decided once: `TrainSetup.plan`) lays the loops
    out: "nested" epochs are a scan of `lax.cond`-guarded epochs of minibatch scans; "flat"
    epochs are one scan of `update_epochs * num_minibatches` steps, each gathering its
    minibatch from the epoch's permutation, where steps after an early stop are computed
    and discarded (no `cond`: one host round trip fewer per epoch on a GPU). Same
    shuffles, same Adam steps, same parameters.
    """
    grads_fn = make_minibatch_grads(config, networks, axis_name)
    # Over several devices the epochs normalise the advantages of all their minibatches
    # at once (one all-reduce per epoch, or per update with the "flat" plan).
    normalized_grads_fn = make_minibatch_grads(config, networks, axis_name, norm_adv=False)

    def minibatch_step(train_state, minibatch, hparams, learning_rate, actor_coef):
        if _normalizes_across(config, axis_name):
            grads, terms = normalized_grads_fn(train_state.params, minibatch, hparams, actor_coef)
        else:
            grads, terms = grads_fn(train_state.params, minibatch, hparams, actor_coef)
        tx = make_optimizer(
            hparams.max_grad_norm,
            learning_rate,
            config.adam_eps,
            param_labels(train_state.params),
            config.grad_clip_per_network,
        )
        updates, opt_state = tx.update(grads, train_state.opt_state, train_state.params)
        params = optax.apply_updates(train_state.params, updates)
        metrics = LossMetrics(**terms._asdict(), grad_norm=optax.tree.norm(grads))
        return TrainState(params=params, opt_state=opt_state), metrics._asdict()

    def one_epoch(train_state, batch, key, hparams, learning_rate, actor_coef):
        minibatches = shuffle_minibatches(key, batch, config.num_minibatches)
        if _normalizes_across(config, axis_name):
            advantages = normalize_advantages(minibatches.advantages, minibatches.mask, axis_name)
            minibatches = minibatches._replace(advantages=advantages)

        def body(state, minibatch):
            return minibatch_step(state, minibatch, hparams, learning_rate, actor_coef)

        train_state, metrics = jax.lax.scan(body, train_state, minibatches)
        return train_state, jax.tree.map(jnp.mean, metrics)

    def update_epochs(
        train_state: TrainState,
        batch: Batch,
        key: jax.Array,
        hparams: Hyperparams,
        learning_rate: dict[str, jax.Array],
        actor_coef: jax.Array,
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        zeros = {name: jnp.zeros((), jnp.float32) for name in LossMetrics._fields}

        def body(carry, epoch_key):
            state, stopped, sums, epochs_run = carry

            def run(s):
                return one_epoch(s, batch, epoch_key, hparams, learning_rate, actor_coef)

            state, metrics = jax.lax.cond(stopped, lambda s: (s, zeros), run, state)
            ran = 1.0 - stopped.astype(jnp.float32)
            sums = jax.tree.map(lambda total, m: total + ran * m, sums, metrics)
            stopped = jnp.logical_or(stopped, metrics["approx_kl"] > hparams.target_kl)
            return (state, stopped, sums, epochs_run + ran), None

        init = (train_state, jnp.zeros((), bool), zeros, jnp.zeros((), jnp.float32))
        (train_state, _, sums, epochs_run), _ = jax.lax.scan(
            body, init, jax.random.split(key, config.update_epochs)
        )
        metrics = {name: total / epochs_run for name, total in sums.items()}
        metrics["update_epochs_run"] = epochs_run
        return train_state, metrics

    if plan.epochs == "flat":
        return _make_flat_epochs(config, minibatch_step, plan.epoch_unroll, axis_name)
    return update_epochs


def _make_flat_epochs(
    config: PPOConfig,
    minibatch_step: Callable[..., tuple[TrainState, dict]],
    unroll: int,
    axis_name: str | None,
) -> Callable[..., tuple[TrainState, dict[str, jax.Array]]]:
    """`update_epochs` of the "flat" loop plan (see `make_update_epochs`): one scan of
    `update_epochs * num_minibatches` minibatch steps (`unroll` per iteration), no `cond`;
    over several devices, the advantages of all of them normalised at once."""

    def flat_epochs(
        train_state: TrainState,
        batch: Batch,
        key: jax.Array,
        hparams: Hyperparams,
        learning_rate: dict[str, jax.Array],
        actor_coef: jax.Array,
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        epochs, per_epoch = config.update_epochs, config.num_minibatches
        size = batch.log_prob.shape[0]
        # The permutations `shuffle_minibatches` draws from each epoch's key: [E * K, M].
        indices = jax.vmap(lambda k: _permutation(k, size))(jax.random.split(key, epochs)).reshape(
            (epochs * per_epoch, size // per_epoch)
        )

        normalized = ()  # over several devices: every step's advantages, [E * K, M, L]
        if _normalizes_across(config, axis_name):
            mask = None if batch.mask is None else jnp.take(batch.mask, indices, axis=0)
            advantages = jnp.take(batch.advantages, indices, axis=0)
            normalized = (normalize_advantages(advantages, mask, axis_name),)

        def body(carry, step):
            state, stopped, kls = carry
            index, position, *advantages = step
            minibatch = jax.tree.map(lambda x: jnp.take(x, index, axis=0), batch)
            if advantages:
                minibatch = minibatch._replace(advantages=advantages[0])
            new_state, metrics = minibatch_step(
                state, minibatch, hparams, learning_rate, actor_coef
            )
            state = jax.tree.map(lambda old, new: jnp.where(stopped, old, new), state, new_state)
            kls = kls.at[position].set(metrics["approx_kl"])
            ended = position == per_epoch - 1
            stop_now = jnp.logical_and(ended, jnp.mean(kls) > hparams.target_kl)
            return (state, jnp.logical_or(stopped, stop_now), kls), (metrics, stopped)

        positions = jnp.tile(jnp.arange(per_epoch), epochs)
        init = (train_state, jnp.zeros((), bool), jnp.zeros((per_epoch,), jnp.float32))
        (train_state, _, _), (metrics, skipped) = jax.lax.scan(
            body, init, (indices, positions, *normalized), unroll=unroll
        )
        ran = 1.0 - skipped.reshape((epochs, per_epoch))[:, 0].astype(jnp.float32)
        means = {
            name: jnp.mean(m.reshape((epochs, per_epoch)), axis=1) for name, m in metrics.items()
        }
        sums = {name: jnp.zeros((), jnp.float32) for name in LossMetrics._fields}
        epochs_run = jnp.zeros((), jnp.float32)
        for epoch in range(epochs):
            sums = {
                name: total + jnp.where(ran[epoch] > 0, means[name][epoch], 0.0)
                for name, total in sums.items()
            }
            epochs_run = epochs_run + ran[epoch]
        out = {name: total / epochs_run for name, total in sums.items()}
        out["update_epochs_run"] = epochs_run
        return train_state, out

    return flat_epochs
