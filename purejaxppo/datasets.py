"""Trajectory datasets: a policy's episodes written as `.npz` chunks and a Minari dataset.

`collect(policy, num_episodes, out)` plays episodes with a jitted `lax.scan` of
`chunk_steps` steps at a time (one compiled program, called repeatedly with the carry), and
flushes finished episodes to disk every `flush_steps` steps, so memory stays bounded
however many steps are collected: the device holds one chunk `[chunk_steps, E]`, the host
the running episodes of one group of E parallel envs plus one flush.

Layout of `out/` (a new directory):
  `episodes_00000.npz`, ...: the episodes, concatenated over steps. Per step `[S]`:
    `obs` (dict observations: `obs/<key>`), `action`, `reward`, `terminated`,
    `truncated`, `log_prob` (of the action taken, under the policy), `value` (V(obs)),
    `episode_id`, and `info/<key>` for the requested info keys; per episode `[E]`:
    `final_obs` (the observation the last step led to), `episode_ids`, `episode_return`,
    `episode_length`.
  `metadata.json`: env id, config, counts, the key scheme. Written last (atomically):
    a directory without it is a partial dataset (an interrupted `collect`), which
    `load_episodes` refuses and a new `collect` into it names as partial. While `collect`
    runs, `collect.partial` marks the directory; it is removed once metadata.json is in
    place.
  `minari/<dataset_id>` (with `minari_id`): a Minari dataset (the `minari` extra), which
    `minari.load_dataset(dataset_id)` reads with `MINARI_DATASETS_PATH=out/minari`.
    Minari's observations have L + 1 entries per episode (the final observation last);
    its infos `log_prob` / `value` too, entry t for the action at observation t, 0 for
    the final observation.

Keys: episodes run in groups of at most `parallel` envs, each env one episode. Group 0
uses `key`, group g > 0 `jax.random.fold_in(key, g)`; within a group the keys are split
exactly as `policy.evaluate` splits them, so `collect(policy, n, out, key)` with
n <= parallel plays the same episodes as `evaluate(policy, num_episodes=n, key=key)`.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.envs.spaces import episode_limit
from purejaxppo.networks import select_action


class CollectResult(NamedTuple):
    """What `collect` returns."""

    out: Path  # the output directory
    num_episodes: int
    num_steps: int  # transitions written
    returns: np.ndarray  # float32 [num_episodes], in episode-id order
    lengths: np.ndarray  # int32 [num_episodes]
    files: list[Path]  # the .npz chunks
    minari_id: str | None
    complete: bool = True  # False after a `stop`: `out` is partial (counts: what it holds)


def _flatten(tree: Any, prefix: str) -> dict[str, np.ndarray]:
    """{"obs": x} or {"obs/key": x, ...} for dict / tuple observations."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    out = {}
    for path, leaf in leaves:
        parts = [str(getattr(p, "key", getattr(p, "idx", p))) for p in path]
        out["/".join([prefix, *parts])] = np.asarray(leaf)
    return out


def make_chunk_runner(networks: Any, env: Any, env_params: Any, info_keys: Sequence[str] = ()):
    """Jitted `(start(params, key, E), chunk(params, carry, keys [C], temperature))`.

    `start` resets E envs (keys as `policy.make_episode_runner`); `chunk` plays C steps of
    all E envs and returns the new carry and the per-step records `[C, E]` (obs, action,
    reward, terminated, truncated, log_prob, value, final_obs, active, infos).
    """
    from purejaxppo.envs.kinds import check
    from purejaxppo.host_episodes import make_host_chunk_runner

    kind = check("collect", getattr(env, "name", repr(env)), env)
    if not kind.in_program:  # a host env: the same records from a Python loop
        return make_host_chunk_runner(env, networks, select_action, tuple(info_keys))

    def start(key, num_envs):
        reset_key, scan_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), env_params
        )
        carry = (obs, state, jnp.ones((num_envs,), bool), networks.initial_state(num_envs))
        return carry, scan_key

    def chunk(params, carry, keys, temperature):
        def step(carry, step_key):
            obs, state, active, policy_state = carry
            num_envs = active.shape[0]
            act_key, env_key = jax.random.split(step_key)
            policy_state, dist, value = networks.step(
                params, policy_state, obs, jnp.zeros((num_envs,), bool)
            )
            action, _ = select_action(networks.action_spec, dist, value, act_key, temperature)
            log_prob = dist.log_prob(action)
            next_obs, next_state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(env_key, num_envs), state, action, env_params)
            record = {
                "obs": obs,
                "action": action,
                "reward": reward.astype(jnp.float32),
                "terminated": terminated,
                "truncated": truncated,
                "log_prob": log_prob.astype(jnp.float32),
                "value": value.astype(jnp.float32),
                "final_obs": info["final_observation"],
                "active": active,
                "info": {key: info[key] for key in info_keys},
            }
            still = jnp.logical_and(active, ~jnp.logical_or(terminated, truncated))
            return (next_obs, next_state, still, policy_state), record

        return jax.lax.scan(step, carry, keys)

    return jax.jit(start, static_argnums=1), jax.jit(chunk)


class _Writer:
    """Accumulates finished episodes and writes them as .npz chunks (+ Minari)."""

    def __init__(self, out: Path, flush_steps: int, minari: Any):
        self.out, self.flush_steps, self.minari = out, flush_steps, minari
        self.pending: list[dict[str, Any]] = []
        self.pending_steps = 0
        self.files: list[Path] = []

    def add(self, episode: dict[str, Any]) -> None:
        self.pending.append(episode)
        self.pending_steps += len(episode["reward"])
        if self.pending_steps >= self.flush_steps:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        episodes, self.pending, self.pending_steps = self.pending, [], 0
        arrays: dict[str, np.ndarray] = {}
        step_keys = [k for k in episodes[0] if k not in ("final_obs", "id")]
        for key in step_keys:
            arrays.update(_flatten(np.concatenate([e[key] for e in episodes]), key))
        arrays.update(
            _flatten(
                jax.tree.map(lambda *xs: np.stack(xs), *[e["final_obs"] for e in episodes]),
                "final_obs",
            )
        )
        ids = np.array([e["id"] for e in episodes], np.int64)
        arrays["episode_id"] = np.concatenate(
            [np.full(len(e["reward"]), e["id"], np.int64) for e in episodes]
        )
        arrays["episode_ids"] = ids
        arrays["episode_return"] = np.array([e["reward"].sum() for e in episodes], np.float32)
        arrays["episode_length"] = np.array([len(e["reward"]) for e in episodes], np.int32)
        path = self.out / f"episodes_{len(self.files):05d}.npz"
        np.savez(path, **arrays)
        self.files.append(path)
        if self.minari is not None:
            self.minari.add(episodes)


def check_output(out: str | Path, minari_id: str | None, num_episodes: int) -> Path:
    """Checks the arguments of `collect` before anything runs.

    Raises:
      ValueError: num_episodes < 1, `out` exists (nothing is overwritten; a partial
        dataset of an interrupted collect is named as such), or a Minari id that is not
        "namespace/name-vN" / "name-vN".
      ImportError: `minari_id` without the `minari` extra.
    """
    if num_episodes < 1:
        raise ValueError(f"collect: num_episodes={num_episodes!r} must be >= 1")
    out = Path(out)
    if out.exists():
        if is_partial(out):
            raise ValueError(
                f"collect: {out} is a partial dataset (an interrupted collect: no "
                f"{METADATA}); delete it and collect again, or give a new directory "
                "(nothing overwritten)"
            )
        raise ValueError(f"collect: {out} exists; give a new directory (nothing overwritten)")
    if minari_id is not None:
        import re

        if not re.fullmatch(r"([\w.-]+/)?[\w.-]+-v\d+", minari_id):
            raise ValueError(f"collect: minari_id={minari_id!r} must look like 'namespace/name-v0'")
        from purejaxppo.sinks import require

        require("minari", "minari")
    return out


def collect(
    policy: Any,
    num_episodes: int,
    out: str | Path,
    key: jax.Array | None = None,
    *,
    greedy: bool = False,
    temperature: float | None = None,
    params: Any = None,
    minari_id: str | None = None,
    info_keys: Sequence[str] = (),
    parallel: int = 64,
    chunk_steps: int = 256,
    flush_steps: int = 100_000,
    max_steps: int | None = None,
    chunk_runner: tuple | None = None,
    stop: Callable[[], bool] | None = None,
) -> CollectResult:
    """Plays `num_episodes` episodes of `policy` and writes them to the new directory `out`.

    Args:
      policy: a `purejaxppo.Policy` (its env and env params).
      num_episodes: episodes to write (>= 1).
      out: a directory that must not exist yet (see the module docstring for its files).
      key: PRNG key (default `jax.random.key(0)`); see the module docstring.
      greedy: argmax / mean actions instead of sampling (`evaluate`'s `greedy`).
      temperature: sampling temperature (`networks.select_action`: 0 greedy, 1 the
        policy's own distribution); default 0 with `greedy`, else 1.
      params: params to play instead of the policy's.
      minari_id: also write a Minari dataset with this id under `out/minari`.
      info_keys: keys of the env's info dict to store per step (`info/<key>`).
      parallel: most envs stepped at once (one episode each).
      chunk_steps: steps per jitted call (device memory: chunk_steps x parallel steps).
      flush_steps: finished-episode steps kept on the host before writing a chunk file.
      max_steps: longest episode (default the env's `max_steps_in_episode`); episodes
        still running then are written truncated at max_steps.
      chunk_runner: a `make_chunk_runner(...)` pair to reuse (compiles once across
        calls, as training-time collection does).
      stop: asked after every chunk; once True, the finished episodes are written and
        `collect` returns `complete=False`: `out` stays partial (`load_episodes` refuses it).

    Returns:
      `CollectResult` (returns / lengths per episode, the files written), in episode-id
      order; after a `stop`, of the finished episodes only.

    Raises:
      ValueError / ImportError: see `check_output`; unknown info keys; a negative
        `temperature`, or one other than 0 with `greedy`.
    """
    temperature = _temperature(greedy, temperature)
    out = check_output(out, minari_id, num_episodes)
    env, env_params = policy.env, policy.env_params
    if chunk_runner is None:  # refuses what the env's kind cannot collect
        chunk_runner = make_chunk_runner(policy.networks, env, env_params, tuple(info_keys))
    _check_info_keys(env, env_params, info_keys)
    if max_steps is None:
        max_steps = episode_limit(env, env_params)
    key = jax.random.key(0) if key is None else key
    params = policy.get_params() if params is None else params
    temperature = jnp.float32(temperature)

    _start_partial(out)
    meta = {
        "env_name": policy.config.env_name,
        "num_episodes": num_episodes,
        "greedy": greedy,
        "temperature": float(temperature),
        "parallel": parallel,
        "key_scheme": "group 0: key; group g > 0: fold_in(key, g); as evaluate within a group",
        "config": policy.config.to_dict(),
    }
    minari = None
    if minari_id is not None:
        from purejaxppo.minari_writer import MinariWriter

        minari = MinariWriter(out / "minari", minari_id, env, env_params, meta)
    writer = _Writer(out, flush_steps, minari)
    play = _Play(chunk_runner, params, key, temperature, parallel, chunk_steps, max_steps)
    returns, lengths, written = play.all(num_episodes, writer, stop)
    writer.flush()
    if written.all():
        _finish(out, {**meta, "num_steps": int(lengths.sum()), "files": len(writer.files)})
    return CollectResult(
        out=out,
        num_episodes=int(written.sum()),
        num_steps=int(lengths.sum()),
        returns=returns[written],
        lengths=lengths[written],
        files=writer.files,
        minari_id=minari_id,
        complete=bool(written.all()),
    )


class _Play(NamedTuple):
    """What every group of `collect` plays with (see `collect`'s Args)."""

    chunk_runner: tuple
    params: Any
    key: jax.Array
    temperature: jax.Array
    parallel: int
    chunk_steps: int
    max_steps: int

    def all(
        self, num_episodes: int, writer: _Writer, stop: Callable[[], bool] | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Plays the groups of `num_episodes` episodes into `writer` until done or `stop`;
        returns, lengths and written flags `[num_episodes]` (a stop leaves some False)."""
        returns, lengths = np.zeros(num_episodes, np.float32), np.zeros(num_episodes, np.int32)
        written = np.zeros(num_episodes, bool)
        done_episodes = group = 0
        while done_episodes < num_episodes:
            size = min(self.parallel, num_episodes - done_episodes)
            group_key = self.key if group == 0 else jax.random.fold_in(self.key, group)
            for episode in _play_group(
                self.chunk_runner, self.params, group_key, size, self.max_steps,
                self.chunk_steps, self.temperature, done_episodes,
            ):  # fmt: skip
                if episode is None and stop is not None and stop():  # after a chunk
                    return returns, lengths, written
                if episode is None:
                    continue
                returns[episode["id"]] = episode["reward"].sum()
                lengths[episode["id"]] = len(episode["reward"])
                written[episode["id"]] = True
                writer.add(episode)
            done_episodes += size
            group += 1
        return returns, lengths, written


def _temperature(greedy: bool, temperature: float | None) -> float:
    """`collect`'s sampling temperature: `temperature`, else 0 with `greedy`, else 1."""
    if temperature is None:
        return 0.0 if greedy else 1.0
    if temperature < 0 or (greedy and temperature != 0):
        raise ValueError(
            f"collect: temperature={temperature}: must be >= 0 (and 0 with greedy=True)"
        )
    return float(temperature)


def _check_info_keys(env: Any, env_params: Any, info_keys: Sequence[str]) -> None:
    """Raises ValueError naming the `info_keys` that the env's info dict lacks."""
    if info_keys:
        from purejaxppo.envs.rows import info_keys_of

        unknown = sorted(set(info_keys) - set(info_keys_of(env, env_params)))
        if unknown:
            raise ValueError(f"collect: info keys {unknown} not in the env's info dict")


def _start_partial(out: Path) -> None:
    """Creates `out` marked partial (`PARTIAL`) until `_finish` writes its metadata."""
    out.mkdir(parents=True)
    (out / PARTIAL).write_text(
        f"purejaxppo collect is writing this directory; without {METADATA} it is partial "
        "(an interrupted collect): delete it and collect again\n"
    )


def _finish(out: Path, meta: dict[str, Any]) -> None:
    """Writes `metadata.json` atomically (the dataset is complete from then on) and
    removes the partial marker."""
    staged = out / f"{METADATA}.tmp"
    staged.write_text(json.dumps(meta))
    os.replace(staged, out / METADATA)
    (out / PARTIAL).unlink()


def _play_group(
    chunk_runner, params, group_key, size, max_steps, chunk_steps, temperature, first_id
) -> Iterator[dict[str, Any] | None]:
    """Plays `size` episodes at once (ids `first_id`..) in jitted chunks of `chunk_steps`
    steps; yields each episode (`_join`) as it ends, or truncated at `max_steps`, and None
    after every chunk (where the caller may stop; chunks run `run_responsively`)."""
    from purejaxppo.drivers.segments import run_responsively

    start, chunk = chunk_runner
    carry, scan_key = start(group_key, size)
    try:
        step_keys = jax.random.split(scan_key, max_steps)
        running: list[list[dict[str, Any]]] = [[] for _ in range(size)]
        finished = np.zeros(size, bool)
        for begin in range(0, max_steps, chunk_steps):
            keys = step_keys[begin : begin + chunk_steps]
            carry, records = run_responsively(
                lambda carry=carry, keys=keys: _fetched(chunk(params, carry, keys, temperature))
            )
            for e in np.flatnonzero(~finished):
                mask = records["active"][:, e]
                if mask.any():
                    running[e].append(jax.tree.map(lambda x, e=e, m=mask: x[:, e][m], records))
                ended = bool(mask.any()) and _ended_last(records, e)
                last_chunk = begin + chunk_steps >= max_steps
                if ended or (last_chunk and not finished[e]):
                    finished[e] = True
                    yield _join(running[e], first_id + e)
                    running[e] = []
            yield None
            if finished.all():
                break
    finally:
        if hasattr(carry, "close"):  # a host env's copies (`host_episodes`)
            carry.close()


def _fetched(result: tuple[Any, Any]) -> tuple[Any, Any]:
    """A chunk's `(carry, records)` with the records on the host (the carry stays)."""
    return result[0], jax.device_get(result[1])


def _ended_last(records: dict[str, Any], e: int) -> bool:
    """Env e's last active step in this chunk ended its episode."""
    active = records["active"][:, e]
    last = np.flatnonzero(active)[-1]
    return bool(records["terminated"][last, e] or records["truncated"][last, e])


def _join(pieces: list[dict[str, Any]], episode_id: int) -> dict[str, Any]:
    joined = jax.tree.map(lambda *xs: np.concatenate(xs), *pieces)
    final_obs = jax.tree.map(lambda x: x[-1], joined.pop("final_obs"))
    joined.pop("active")
    info = joined.pop("info")
    for name, values in info.items():
        joined[f"info/{name}"] = values
    return {**joined, "final_obs": final_obs, "id": episode_id}


#: The file `collect` writes last: a directory without it is a partial dataset.
METADATA = "metadata.json"
#: The marker of a directory `collect` is writing (removed after `METADATA`).
PARTIAL = "collect.partial"


def is_partial(out: str | Path) -> bool:
    """True when `out` holds what an interrupted `collect` left: its `collect.partial`
    marker or `episodes_*.npz` chunks, and no `metadata.json`."""
    out = Path(out)
    if not out.is_dir() or (out / METADATA).is_file():
        return False
    return (out / PARTIAL).is_file() or any(out.glob("episodes_*.npz"))


def load_episodes(out: str | Path) -> dict[str, np.ndarray]:
    """All episodes of a complete `collect` directory: its `.npz` chunks concatenated
    (sorted by file); per step `[S, ...]`, per episode `[E]` (see the module docstring).

    Raises:
      ValueError: `out` is no collect dataset; a partial one (no `metadata.json`: an
        interrupted collect), naming it and how to redo it; chunk files or episodes
        that do not match the counts of its `metadata.json`; a truncated or damaged
        chunk file, naming it.
    """
    out = Path(out)
    files = sorted(out.glob("episodes_*.npz"))
    if not (out / METADATA).is_file():
        if is_partial(out):
            raise ValueError(
                f"load_episodes: {out} is a partial dataset ({len(files)} episodes_*.npz "
                f"chunk(s), no {METADATA}: the collect writing it was interrupted); delete "
                "it and collect again (purejaxppo collect RUN_DIR --episodes N --out DIR)"
            )
        raise ValueError(f"load_episodes: no collect dataset in {out} (no {METADATA})")
    try:
        meta = json.loads((out / METADATA).read_text())
        num_episodes, num_files = int(meta["num_episodes"]), int(meta["files"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"load_episodes: {out / METADATA} is damaged ({type(err).__name__}: {err})"
        ) from None
    if len(files) != num_files:
        raise ValueError(
            f"load_episodes: {out} holds {len(files)} episodes_*.npz files; its {METADATA} "
            f"says collect wrote {num_files} (files were removed or added since)"
        )
    parts = [_read_chunk(f) for f in files]
    episodes = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    found = len(np.unique(episodes["episode_ids"]))
    if found != num_episodes or len(episodes["episode_ids"]) != num_episodes:
        raise ValueError(
            f"load_episodes: {out} holds {len(episodes['episode_ids'])} episodes ({found} "
            f"distinct ids); its {METADATA} says {num_episodes}"
        )
    return episodes


def _read_chunk(path: Path) -> dict[str, np.ndarray]:
    """The arrays of one chunk file; a ValueError naming it when it does not read back."""
    try:
        with np.load(path) as chunk:
            return {key: chunk[key] for key in chunk.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as err:
        raise ValueError(
            f"load_episodes: {path} is truncated or damaged ({type(err).__name__}: {err}); "
            f"collect the dataset of {path.parent} again"
        ) from None
