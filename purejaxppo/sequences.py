"""The training sequences of one update, cut from a rollout `[T, N]`
(`PPOConfig.sequence_sampling`): fixed chunks (`make_sequences`, "chunks") or trajectory
windows (`trajectory_minibatches`, "windows"), each a `Batch` of sequences `[K, L]` that
`update.make_update_epochs` shuffles into minibatches. Feed-forward policies train on
chunks of one step (every transition its own sequence).

Chunks: sequence k = c * N + n is env n's steps `[c * L, (c + 1) * L)`, starting from the
policy state the rollout stored at its first step.

Trajectory windows never cross an episode end. `"windows"` trains a recurrent or
transformer policy on windows drawn from the rollout's trajectories instead of the fixed
chunks, following decision-transformer-interpretability's (DTI)
`Memory.get_trajectory_minibatches(timesteps, prob_go_from_end=0.1)`: every window holds
`timesteps` consecutive steps of one trajectory; a trajectory of at most `timesteps` steps
is one whole window (padded), a longer one gives a full window that ends at the
trajectory's end with probability `prob_go_from_end`, otherwise at a uniformly random
step with `timesteps` steps of the trajectory up to it.

A trajectory is a maximal run of one env's steps between episode ends and the rollout's
edges: it starts at t = 0 and wherever `reset[t, n]` (the previous step ended the
episode), and ends at the step before the next start or at t = T - 1.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from purejaxppo.types import PyTree, Transition

__all__ = [
    "Batch",
    "Windows",
    "batch_of",
    "make_sequences",
    "trajectory_minibatches",
    "window_indices",
]


class Batch(NamedTuple):
    """Training sequences `[K, L]` (K sequences of L steps), or
    `[num_minibatches, K / num_minibatches, L]` after shuffling (whole sequences).

    Feed-forward policies train on sequences of L = 1 step: every transition is its own
    sequence, so minibatches are uniform samples of transitions (CleanRL's PPO). `mask` is
    None for chunks (`make_sequences`: every step counts) and marks the steps of trajectory
    windows (`trajectory_minibatches`: padded steps are left out of the loss).
    """

    obs: jax.Array  # [K, L, *obs_shape] (or a dict / tuple of such arrays)
    action: jax.Array  # [K, L] int32, [K, L, K'] int32 or [K, L, A] float32
    log_prob: jax.Array  # [K, L] float32, log pi_old
    value: jax.Array  # [K, L] float32, V_old
    advantages: jax.Array  # [K, L] float32
    returns: jax.Array  # [K, L] float32, value targets
    initial_state: PyTree  # [K, ...] policy state entering each sequence's first step
    resets: jax.Array  # [K, L] bool; the previous step ended the episode (state restarts)
    mask: jax.Array | None = None  # [K, L] bool, the step counts in the loss; None: all do


def make_sequences(
    traj: Transition, advantages: jax.Array, returns: jax.Array, seq_len: int
) -> Batch:
    """Cuts a rollout `[T, N]` into K = N * T / L training sequences `[K, L]`.

    Sequence k = c * N + n is env n's steps `[c * L, (c + 1) * L)` (L = `seq_len`; L = T
    keeps the rollout's sequences whole, L = 1 makes every transition a sequence), starting
    from the policy state the rollout stored at its first step (`traj.policy_state[c * L,
    n]`, before that step's reset) with the rollout's reset flags.

    Args:
      traj: `Transition` with leading axes `[T, N]`.
      advantages, returns: float32 `[T, N]`.
      seq_len: L, must divide T.
    """
    num_steps, num_envs = traj.reward.shape
    chunks = num_steps // seq_len

    def split(x):  # [T, N, ...] -> [C, L, N, ...] -> [C, N, L, ...] -> [K, L, ...]
        x = jnp.moveaxis(x.reshape((chunks, seq_len, num_envs, *x.shape[2:])), 1, 2)
        return x.reshape((chunks * num_envs, seq_len, *x.shape[3:]))

    def first_steps(x):  # [T, N, ...] -> [C, N, ...] -> [K, ...]
        x = x[::seq_len]
        return x.reshape((chunks * num_envs, *x.shape[2:]))

    return batch_of(traj, advantages, returns, split, first_steps)


def batch_of(
    traj: Transition,
    advantages: jax.Array,
    returns: jax.Array,
    cut: Callable[[jax.Array], jax.Array],
    first_step: Callable[[jax.Array], jax.Array],
    mask: jax.Array | None = None,
) -> Batch:
    """The `Batch` of sequences that `cut` takes out of every `[T, N, ...]` leaf (giving
    `[K, L, ...]`), with the policy state at each sequence's first step (`first_step`:
    `[T, N, ...]` -> `[K, ...]`) and `mask` (`[K, L]` bool, None: every step counts).
    `make_sequences` cuts chunks, `trajectory_minibatches` trajectory windows."""
    return Batch(
        obs=jax.tree.map(cut, traj.obs),
        action=cut(traj.action),
        log_prob=cut(traj.log_prob),
        value=cut(traj.value),
        advantages=cut(advantages),
        returns=cut(returns),
        initial_state=jax.tree.map(first_step, traj.policy_state),
        resets=cut(traj.reset),
        mask=mask,
    )


class Windows(NamedTuple):
    """Where K windows of L steps lie in a rollout `[T, N]`."""

    time: jax.Array  # [K, L] int32, step t of each window step (padding repeats the last)
    env: jax.Array  # [K] int32, env n of each window
    mask: jax.Array  # [K, L] bool, a step of the window (False: padding)


def _count(value: Any) -> int | None:
    """`value` as an int if it is one (a Python int, a numpy integer, a 0-d integer
    array; not a bool, a float or a tracer), else None."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, jax.core.Tracer):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _check(timesteps: Any, num_windows: Any, prob_go_from_end: Any) -> tuple[int, int, Any]:
    """`(timesteps, num_windows, prob_go_from_end)`, the counts as ints, after checking
    the three arguments; a concrete `prob_go_from_end` (a Python or numpy real, a 0-d
    array) must lie in [0, 1] (an integer 0 / 1 comes back as a float: `bernoulli` takes
    floats only), a traced one is not looked at."""
    steps, windows = _count(timesteps), _count(num_windows)
    if steps is None or steps < 1:
        raise ValueError(f"timesteps={timesteps!r}: must be an int >= 1 (steps per window)")
    if windows is None or windows < 1:
        raise ValueError(f"num_windows={num_windows!r}: must be an int >= 1")
    if not isinstance(prob_go_from_end, jax.core.Tracer):
        array = np.asarray(prob_go_from_end)
        real = array.ndim == 0 and (  # not a bool, a string, None, complex
            np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
        )
        if not (real and 0.0 <= float(array) <= 1.0):  # NaN fails the range too
            raise ValueError(
                f"prob_go_from_end={prob_go_from_end!r}: must be a number in [0, 1] (a "
                "float, a numpy scalar or a 0-d array; or a traced float32 scalar)"
            )
        if np.issubdtype(array.dtype, np.integer):
            prob_go_from_end = float(array)
    return steps, windows, prob_go_from_end


def _check_rollout(traj: Transition, advantages: ArrayLike, returns: ArrayLike) -> None:
    """Every array that windows gather has leading axes `[T, N]` (of `traj.reset`), and
    `reset`, `log_prob`, `value`, `advantages`, `returns` are exactly `[T, N]`: a
    transposed or cut array would otherwise be gathered with clamped indices. Shapes
    only, so the check also holds (and costs nothing) under `jax.jit`."""
    reset_shape = np.shape(traj.reset)
    if len(reset_shape) != 2:
        raise ValueError(f"traj.reset has shape {reset_shape}: expected [T, N]")
    lead = tuple(int(d) for d in reset_shape)
    exact = {
        "traj.log_prob": traj.log_prob,
        "traj.value": traj.value,
        "advantages": advantages,
        "returns": returns,
    }
    leading = {"traj.action": traj.action}  # [T, N] or [T, N, K]
    for group, tree in (("traj.obs", traj.obs), ("traj.policy_state", traj.policy_state)):
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            leading[group + jax.tree_util.keystr(path)] = leaf
    for name, x in exact.items():
        if tuple(np.shape(x)) != lead:
            raise ValueError(
                f"{name} has shape {np.shape(x)}: expected [T, N] = {lead}, as traj.reset"
            )
    for name, x in leading.items():
        if tuple(np.shape(x))[:2] != lead:
            raise ValueError(
                f"{name} has shape {np.shape(x)}: expected leading axes [T, N] = {lead}, "
                "as traj.reset"
            )


def window_indices(
    key: jax.Array,
    resets: ArrayLike,
    *,
    timesteps: int,
    num_windows: int,
    prob_go_from_end: float = 0.1,
) -> Windows:
    """Draws K = `num_windows` windows of L = `timesteps` steps from a rollout's trajectories.

    Each window picks its trajectory by a uniformly drawn step of the rollout (so a
    trajectory is picked in proportion to its length, as the steps of fixed chunks are).
    As in DTI (decision-transformer-interpretability, `Memory.get_trajectory_minibatches`):
    a trajectory `[first, last]` of at most L steps is taken whole (the window ends at its
    end); a longer one gives a full window of L steps that ends at `last` with probability
    `prob_go_from_end`, else at a uniformly random step of `[first + L - 1, last]` (DTI's
    draw leaves `last` out of this range; here it is in, so `prob_go_from_end = 0` still
    trains every step). The window's steps `[max(end - L + 1, first), end]` are
    left-aligned, with the rest of the L slots padding (mask False, indices repeating the
    end step). Padding comes after the window's steps, so a causal policy unrolled over the
    window computes the same outputs on them as without it; DTI pads on the left instead.
    This draws the windows jittably with static shapes.

    Args:
      key: typed PRNG key.
      resets: bool `[T, N]`, the previous step ended env n's episode at step t
        (`Transition.reset`); a trajectory starts at t = 0 and at every reset.
      timesteps: L, steps per window (a Python int >= 1; L > T is allowed, all padding).
      num_windows: K, windows to draw (a Python int >= 1).
      prob_go_from_end: probability that a window of a trajectory longer than L ends at
        the trajectory's end, in [0, 1] (a float, or a traced float32 scalar, then
        unchecked); a shorter trajectory's window always does.

    Returns:
      `Windows`: time int32 `[K, L]`, env int32 `[K]`, mask bool `[K, L]`.

    Raises:
      ValueError: `timesteps` or `num_windows` not an int >= 1 (numpy integers are
        ints), a concrete `prob_go_from_end` (Python / numpy real, 0-d array) not a number
        in [0, 1], or `resets` not of rank 2.
    """
    timesteps, num_windows, prob_go_from_end = _check(timesteps, num_windows, prob_go_from_end)
    resets = jnp.asarray(resets, bool)
    if resets.ndim != 2:
        raise ValueError(f"resets has shape {resets.shape}: expected [T, N]")
    num_steps, num_envs = resets.shape
    starts = resets.at[0].set(True).T.reshape(-1)  # [N * T], env-major: flat f = n * T + t
    count = jnp.cumsum(starts, dtype=jnp.int32)  # trajectories starting at or before f
    key_step, key_end, key_inner = jax.random.split(key, 3)
    step = jax.random.randint(key_step, (num_windows,), 0, num_steps * num_envs)
    first = jnp.searchsorted(count, count[step], side="left").astype(jnp.int32)
    last = jnp.searchsorted(count, count[step] + 1, side="left").astype(jnp.int32) - 1
    from_end = jax.random.bernoulli(key_end, prob_go_from_end, (num_windows,))
    whole = last - first + 1 <= timesteps  # the trajectory fits in one window
    full_end = first + timesteps - 1  # the first step a full window can end at
    inner = jax.random.randint(key_inner, (num_windows,), jnp.minimum(full_end, last), last + 1)
    end = jnp.where(jnp.logical_or(whole, from_end), last, inner)
    begin = jnp.maximum(end - timesteps + 1, first)
    slots = begin[:, None] + jnp.arange(timesteps, dtype=jnp.int32)  # [K, L]
    flat = jnp.minimum(slots, end[:, None])
    return Windows(time=flat % num_steps, env=first // num_steps, mask=slots <= end[:, None])


def trajectory_minibatches(
    key: jax.Array,
    traj: Transition,
    advantages: ArrayLike,
    returns: ArrayLike,
    *,
    timesteps: int,
    num_windows: int,
    prob_go_from_end: float = 0.1,
) -> Batch:
    """K training windows `[K, L]` of a rollout `[T, N]`, each within one trajectory.

    DTI's `get_trajectory_minibatches(timesteps, prob_go_from_end=0.1)` (see
    `window_indices` for how windows are drawn and padded), as a pure, jittable function
    of a rollout: the `Batch` that `update.make_update_epochs` shuffles into minibatches,
    with `mask` marking the window steps. Each window starts from the policy state the
    rollout stored at its first step (`traj.policy_state[t, n]`, before that step's
    reset) with the rollout's reset flags, so `Networks.unroll` over the window reproduces
    the rollout's log-probs and values on its valid steps; padded steps are copies of the
    window's last step and must be masked out of the loss (`losses.ppo_loss(mask=...)`).

    Args:
      key: typed PRNG key.
      traj: `Transition` with leading axes `[T, N]` (obs, action, log_prob, value, reset
        bool `[T, N]`, policy_state `[T, N, ...]` leaves).
      advantages, returns: float32 `[T, N]`.
      timesteps: L, steps per window (Python int >= 1).
      num_windows: K, windows to draw (Python int >= 1).
      prob_go_from_end: probability that a window of a trajectory longer than L ends at
        the trajectory's end, in [0, 1] (see `window_indices`).

    Returns:
      `Batch` of `[K, L]` leaves (obs `[K, L, *obs_shape]`, initial_state `[K, ...]`) with
      mask bool `[K, L]`.

    Raises:
      ValueError: bad `timesteps`, `num_windows` or `prob_go_from_end` (naming the value);
        `traj.reset` not `[T, N]`; `advantages`, `returns`, `traj.log_prob` or
        `traj.value` not exactly `[T, N]`, or `traj.obs` / `traj.action` /
        `traj.policy_state` leaves whose leading axes are not `[T, N]` (naming the field,
        its shape and the expected axes; shapes only, so also under `jax.jit`).
    """
    _check_rollout(traj, advantages, returns)
    windows = window_indices(
        key,
        traj.reset,
        timesteps=timesteps,
        num_windows=num_windows,
        prob_go_from_end=prob_go_from_end,
    )
    env = windows.env[:, None]

    def gather(x):  # [T, N, ...] -> [K, L, ...]
        return jnp.asarray(x)[windows.time, env]

    def first_step(x):  # [T, N, ...] -> [K, ...]
        return jnp.asarray(x)[windows.time[:, 0], windows.env]

    return batch_of(traj, advantages, returns, gather, first_step, windows.mask)
