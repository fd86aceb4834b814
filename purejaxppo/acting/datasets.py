"""Trajectory datasets: a policy's episodes written as `.npz` chunks and a Minari dataset.

`collect(policy, num_episodes, out)` plays episodes with a jitted `lax.scan` of
`chunk_steps` steps at a time (one compiled program, called repeatedly with the carry), and
flushes finished episodes to disk every `flush_steps` steps, so memory stays bounded
however many steps are collected: the device holds one chunk `[chunk_steps, E]`, the host
the running episodes of one group of E parallel envs plus one flush.

Layout of `out/` (a new directory; the files are written by `dataset_files`):
  `episodes_00000.npz`, ...: the episodes, concatenated over steps. Per step `[S]`:
    `obs` (dict observations: `obs/<key>`), `action`, `reward`, `terminated`,
    `truncated`, `log_prob` (of the action taken, under the policy), `value` (V(obs)),
    `episode_id`, and `info/<key>` for the requested info keys; per episode `[E]`:
    `final_obs` (the observation the last step led to), `episode_ids`, `episode_return`,
    `episode_length`. Each chunk is written atomically.
  `metadata.json`: env id, config, counts, the key scheme. Written last (atomically):
    a directory without it is a partial dataset (an interrupted `collect`), which
    `load_episodes` refuses and `collect(..., resume=True)` (`purejaxppo collect
    --resume OUT`) continues. While `collect` runs, `collect.partial` marks the
    directory (it holds the settings a resume must repeat); it is removed once
    metadata.json is in place.
  `minari/<dataset_id>` (with `minari_id`): a Minari dataset (the `minari` extra), which
    `minari.load_dataset(dataset_id)` reads with `MINARI_DATASETS_PATH=out/minari`.
    Minari's observations have L + 1 entries per episode (the final observation last);
    its infos `log_prob` / `value` too, entry t for the action at observation t, 0 for
    the final observation.

Multi-agent JaxMARL runs (IPPO / MAPPO, A agents): `obs` (MAPPO: `obs/world_state` too),
`action`, `log_prob`, `value`, `agent_reward` (each agent's) are `[S, A, ...]`; `reward`
`[S]` the team reward (`JaxMARLEnv.team_reward`: `episode_return` is `evaluate`'s team
return), `terminated` / `truncated` `[S]` the episode's end (JaxMARL's `__all__`);
`final_obs` `[E, A, ...]`. No Minari dataset (refused).

EnvPool Atari: an episode is the whole game (every life), as evaluation and videos play
it, whatever `episodic_life` / `reward_clip` do to the learning signal: `reward` is the
raw (unclipped) game reward, so an episode's rewards sum to its score; `terminated` marks
the game's end only (a lost life under `episodic_life` is no end: ask for
`info_keys=("terminated",)` to store those per-life flags as `info/terminated`). A
stateful policy's state starts afresh after each lost life, as its learner's did.

Keys: episodes run in groups of at most `parallel` envs, each env one episode. Group 0
uses `key`, group g > 0 `jax.random.fold_in(key, g)`; within a group the keys are split
exactly as `policy.evaluate` splits them, so `collect(policy, n, out, key)` with
n <= parallel plays the same episodes as `evaluate(policy, num_episodes=n, key=key)`.
Each group depends on its key alone, so a resume skips the groups whose episodes are all
on disk and replays the others, writing only the episodes not yet written: the resumed
dataset holds the same episodes, in the same order, as an uninterrupted collect.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.acting.episodes import check_info_keys, make_rows_chunk_runner
from purejaxppo.acting.host import make_host_chunk_runner
from purejaxppo.acting_checks import check_count, check_flag, check_key
from purejaxppo.dataset_files import (
    METADATA,
    PARTIAL,
    ChunkWriter,
    PartialDataset,
    check_output,
    episodes_of_chunk,
    finish,
    is_partial,
    join_pieces,
    load_episodes,
    read_partial,
    start_partial,
)
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.guards import check_temperature
from purejaxppo.networks import Networks
from purejaxppo.types import Env, EnvParams, Params

if TYPE_CHECKING:
    from purejaxppo.policy import Policy

__all__ = [
    "METADATA",
    "PARTIAL",
    "CollectResult",
    "check_output",
    "collect",
    "is_partial",
    "load_episodes",
    "make_chunk_runner",
]

_Writer = ChunkWriter  # the name tests patch


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


def make_chunk_runner(
    networks: Networks, env: Env, env_params: EnvParams, info_keys: Sequence[str] = ()
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Jitted `(start(key, E), chunk(params, carry, keys [C], temperature))`.

    `start` resets E envs (keys as `evaluation.make_episode_runner`); `chunk` plays C steps of
    all E envs and returns the new carry and the per-step records `[C, E]` (obs, action,
    reward, terminated, truncated, log_prob, value, final_obs, active, infos). EnvPool
    Atari: an episode is the game (the module docstring; `envs.episodes.atari_games`).

    Multi-agent JaxMARL envs: the agents on an axis after the env's, `reward` the team
    reward and `agent_reward` each agent's. The env plays in the one episode loop
    (`acting.episodes.make_rows_chunk_runner`); a host env on the host
    (`acting.host.make_host_chunk_runner`).

    Raises:
      ValueError: a kind of env that cannot collect (`kinds`' table); `info_keys`
        that the env's info dict lacks.
    """
    from purejaxppo.kinds import resolve_acting

    setup = resolve_acting("collect", env, env_params, networks)
    if setup.rows is None:  # the host loop
        return make_host_chunk_runner(setup.env, networks, tuple(info_keys))
    check_info_keys(setup.rows, setup.env, env_params, networks, tuple(info_keys))
    return make_rows_chunk_runner(setup.rows, networks, setup.episodes, tuple(info_keys))


def collect(
    policy: Policy,
    num_episodes: int,
    out: str | Path,
    key: jax.Array | None = None,
    *,
    greedy: bool = False,
    temperature: float | None = None,
    params: Params | None = None,
    minari_id: str | None = None,
    info_keys: Sequence[str] = (),
    parallel: int = 64,
    chunk_steps: int = 256,
    flush_steps: int = 100_000,
    max_steps: int | None = None,
    chunk_runner: tuple | None = None,
    stop: Callable[[], bool] | None = None,
    resume: bool = False,
    request: dict[str, Any] | None = None,
) -> CollectResult:
    """Plays `num_episodes` episodes of `policy` and writes them to the new directory `out`.

    Args:
      policy: a `purejaxppo.Policy` (its env and env params).
      num_episodes: episodes to write (>= 1).
      out: a directory that must not exist yet (see the module docstring for its files);
        with `resume`, the partial dataset of an interrupted collect.
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
      resume: continue the partial dataset `out` of a collect with the same policy,
        params, key and arguments (`flush_steps` aside): the episodes its chunk files
        lack are played, so it ends as an uninterrupted collect's (module docstring).
      request: JSON-able values kept in the partial marker (`purejaxppo collect` keeps its
        arguments there for `--resume`: `dataset_files.read_request`).

    Multi-agent JaxMARL runs: `obs`, `action`, `agent_reward` (each agent's), `log_prob`,
    `value` per step `[S, A, ...]` (an agent axis after the step axis); `reward` (the team
    reward), `terminated`, `truncated` (the episode's: JaxMARL's `__all__`) `[S]`; returns
    are team returns, as `evaluate`'s (module docstring).

    Returns:
      `CollectResult` (returns / lengths per episode, the files written), in episode-id
      order; after a `stop`, of the finished episodes only.

    Raises:
      ValueError / ImportError: see `check_output`; unknown info keys; `minari_id` for a
        multi-agent env (one line: the .npz chunks hold its episodes); a `temperature`
        that is not a finite number >= 0, or one other than 0 with `greedy`; with
        `resume`, what `dataset_files.read_partial` refuses (settings that differ, naming
        them); `num_episodes` or `max_steps` not an int >= 1 (numpy integers are ints).
      TypeError: `greedy` not a bool; `key` not one PRNG key.
    """
    num_episodes, max_steps, greedy, key, temperature = _arguments(
        num_episodes, max_steps, greedy, key, temperature
    )
    env, env_params = policy.env, policy.env_params
    _check_minari(policy.config.env_name, env, minari_id)
    out = check_output(out, minari_id, num_episodes, resume=resume)
    if chunk_runner is None:  # refuses what the env's kind cannot collect, unknown info keys
        chunk_runner = make_chunk_runner(policy.networks, env, env_params, tuple(info_keys))
    if max_steps is None:
        max_steps = episode_limit(env, env_params)
    params = policy.get_params() if params is None else params
    meta = _metadata(policy, num_episodes, greedy, temperature, parallel)
    settings = dict(meta, chunk_steps=chunk_steps, max_steps=max_steps, minari_id=minari_id)
    settings.update(info_keys=list(info_keys), key=_key_record(key), params=_fingerprint(params))
    partial = _open(out, settings, num_episodes, resume=resume, request=request)
    minari = _minari_writer(out, minari_id, policy, meta, partial.files)
    writer = _Writer(out, flush_steps, minari, partial.files)
    temperature = jnp.float32(temperature)
    play = _Play(chunk_runner, params, key, temperature, parallel, chunk_steps, max_steps)
    returns, lengths, written = play.all(writer, stop, partial)
    writer.flush()
    if written.all():
        finish(out, {**meta, "num_steps": int(lengths.sum()), "files": len(writer.files)})
    return CollectResult(
        out=out,
        num_episodes=int(written.sum()),
        num_steps=int(lengths[written].sum()),
        returns=returns[written],
        lengths=lengths[written],
        files=writer.files,
        minari_id=minari_id,
        complete=bool(written.all()),
    )


def _metadata(
    policy: Any, num_episodes: int, greedy: bool, temperature: float, parallel: int
) -> dict[str, Any]:
    """What `metadata.json` says of a collect (with its counts, once complete)."""
    return {
        "env_name": policy.config.env_name,
        "num_episodes": num_episodes,
        "greedy": greedy,
        "temperature": temperature,
        "parallel": parallel,
        "key_scheme": "group 0: key; group g > 0: fold_in(key, g); as evaluate within a group",
        "config": policy.config.to_dict(),
    }


def _check_minari(env_id: str, env: Any, minari_id: str | None) -> None:
    """Refuses a Minari dataset (`minari_id`) of a multi-agent env in one line, before
    anything is written: Minari's episodes are one agent's."""
    from purejaxppo.kinds import AGENTS, check

    if minari_id is not None and check("collect", env_id, env) is AGENTS:
        raise ValueError(
            f"env_name={env_id!r} ({AGENTS.title}): collect's Minari dataset (minari_id, "
            "--minari-id) is not supported for this kind of env (a Minari episode is one "
            "agent's); collect without it: the .npz chunks hold every agent "
            "(`[S, A, ...]`, load_episodes)"
        )


def _minari_writer(
    out: Path, minari_id: str | None, policy: Any, meta: dict[str, Any], files: list[Path]
) -> Any:
    """The `MinariWriter` of `out/minari` (None without `minari_id`); a resume's made
    anew from the chunk `files` already written (`_rebuild_minari`)."""
    if minari_id is None:
        return None
    from purejaxppo.minari_writer import MinariWriter

    minari = MinariWriter(out / "minari", minari_id, policy.env, policy.env_params, meta)
    if files:
        _rebuild_minari(minari, files, policy.env, policy.env_params)
    return minari


def _open(
    out: Path, settings: dict[str, Any], num_episodes: int, *, resume: bool, request: Any
) -> PartialDataset:
    """What `out` holds already: a resume's finished chunks (`read_partial`, checking
    `settings`), else nothing (`out` created, marked partial with `settings`)."""
    if resume:
        return read_partial(out, settings, num_episodes)
    start_partial(out, settings, request)
    return PartialDataset(
        files=[],
        written=np.zeros(num_episodes, bool),
        returns=np.zeros(num_episodes, np.float32),
        lengths=np.zeros(num_episodes, np.int32),
    )


def _key_record(key: jax.Array) -> dict[str, Any]:
    """A typed PRNG key as JSON: its implementation's name and its data."""
    return {
        "impl": str(jax.random.key_impl(key)),
        "data": np.asarray(jax.random.key_data(key)).tolist(),
    }


def _fingerprint(params: Any) -> str:
    """SHA-256 of the params' leaves (shapes, dtypes, bytes) in tree order."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(params)):
        leaf = np.ascontiguousarray(leaf)
        digest.update(f"{leaf.shape}{leaf.dtype}".encode())
        digest.update(leaf.tobytes())
    return digest.hexdigest()


def _rebuild_minari(minari: Any, files: list[Path], env: Any, env_params: Any) -> None:
    """A resume's Minari dataset: made anew from the chunk files already written, one
    `add` per file, as the interrupted collect added them (its own copy may be cut)."""
    import shutil

    from purejaxppo.dataset_files import read_chunk

    shutil.rmtree(minari.root, ignore_errors=True)
    key = jax.random.key(0)
    obs = jax.eval_shape(env.observation_space(env_params).sample, key)
    action = jax.eval_shape(env.action_space(env_params).sample, key)
    for path in files:
        minari.add(episodes_of_chunk(read_chunk(path, "collect --resume"), obs, action))


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
        self, writer: ChunkWriter, stop: Callable[[], bool] | None, partial: PartialDataset
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Plays the groups of episodes into `writer` until done or `stop`, skipping the
        groups `partial` holds whole and writing only the episodes it lacks; returns
        returns, lengths and written flags `[num_episodes]` (a stop leaves some False)."""
        returns, lengths = partial.returns.copy(), partial.lengths.copy()
        written = partial.written.copy()
        num_episodes = len(written)
        for group, first in enumerate(range(0, num_episodes, self.parallel)):
            size = min(self.parallel, num_episodes - first)
            if written[first : first + size].all():  # on disk already (a resume)
                continue
            group_key = self.key if group == 0 else jax.random.fold_in(self.key, group)
            for episode in self.group(group_key, size, first):
                if episode is None and stop is not None and stop():  # after a chunk
                    return returns, lengths, written
                if episode is None or written[episode["id"]]:
                    continue
                returns[episode["id"]] = episode["reward"].sum()
                lengths[episode["id"]] = len(episode["reward"])
                written[episode["id"]] = True
                writer.add(episode)
        return returns, lengths, written

    def group(self, group_key: jax.Array, size: int, first_id: int) -> Iterator[Any]:
        """Plays `size` episodes at once (ids `first_id`..) in jitted chunks of
        `chunk_steps` steps; yields each episode (`join_pieces`) as it ends, or truncated at
        `max_steps`, and None after every chunk (where the caller may stop; chunks run
        `run_responsively`)."""
        from purejaxppo.signals import run_responsively

        start, chunk = self.chunk_runner
        carry, scan_key = start(group_key, size)
        try:
            step_keys = jax.random.split(scan_key, self.max_steps)
            running: list[list[dict[str, Any]]] = [[] for _ in range(size)]
            finished = np.zeros(size, bool)
            for begin in range(0, self.max_steps, self.chunk_steps):
                keys = step_keys[begin : begin + self.chunk_steps]
                carry, records = run_responsively(
                    lambda carry=carry, keys=keys: _fetched(
                        chunk(self.params, carry, keys, self.temperature)
                    )
                )
                for e in np.flatnonzero(~finished):
                    mask = records["active"][:, e]
                    if mask.any():
                        running[e].append(jax.tree.map(lambda x, e=e, m=mask: x[:, e][m], records))
                    ended = bool(mask.any()) and _ended_last(records, e)
                    last_chunk = begin + self.chunk_steps >= self.max_steps
                    if ended or (last_chunk and not finished[e]):
                        finished[e] = True
                        episode = join_pieces(running[e], first_id + e)
                        if not ended:  # cut at max_steps: a time limit, written truncated
                            episode["truncated"][-1] = True
                        yield episode
                        running[e] = []
                yield None
                if finished.all():
                    break
        finally:
            if hasattr(carry, "close"):  # a host env's copies (`acting.host`)
                carry.close()


def _arguments(
    num_episodes: Any, max_steps: Any, greedy: Any, key: Any, temperature: Any
) -> tuple[int, int | None, bool, jax.Array, float]:
    """`collect`'s plain arguments checked: `(num_episodes, max_steps, greedy, key,
    temperature)`, the key `jax.random.key(0)` when None (`_temperature` for the
    temperature).

    Raises:
      ValueError: `num_episodes` or `max_steps` not an int >= 1; a bad temperature.
      TypeError: `greedy` not a bool; `key` not one PRNG key.
    """
    num_episodes = check_count("collect: num_episodes", num_episodes)
    if max_steps is not None:
        max_steps = check_count("collect: max_steps", max_steps)
    greedy = check_flag("collect: greedy", greedy)
    if key is not None:
        check_key("collect: key", key)
    temperature = _temperature(greedy, temperature)
    key = jax.random.key(0) if key is None else key
    return num_episodes, max_steps, greedy, key, temperature


def _temperature(greedy: bool, temperature: float | None) -> float:
    """`collect`'s sampling temperature: `temperature`, else 0 with `greedy`, else 1."""
    if temperature is None:
        return 0.0 if greedy else 1.0
    try:
        temperature = check_temperature(temperature)
    except ValueError as err:
        raise ValueError(f"collect: {err}") from None
    if greedy and temperature != 0:
        raise ValueError(f"collect: temperature={temperature}: must be 0 with greedy=True")
    return temperature


def _fetched(result: tuple[Any, Any]) -> tuple[Any, Any]:
    """A chunk's `(carry, records)` with the records on the host (the carry stays)."""
    return result[0], jax.device_get(result[1])


def _ended_last(records: dict[str, Any], e: int) -> bool:
    """Env e's last active step in this chunk ended its episode."""
    active = records["active"][:, e]
    last = np.flatnonzero(active)[-1]
    return bool(records["terminated"][last, e] or records["truncated"][last, e])
