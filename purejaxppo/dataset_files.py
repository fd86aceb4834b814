"""The files of a `collect` directory: chunk files, the partial marker, `metadata.json`.

`datasets.collect` plays the episodes; this module writes and reads them (the layout is in
`datasets`' docstring):

* `ChunkWriter` writes finished episodes as `episodes_<n>.npz` chunks, each atomically (a
  hidden staging file, then `os.replace`), so a chunk on disk is always whole;
* `start_partial` creates the directory with its `collect.partial` marker, a JSON file
  holding what decides the episodes (`collect`'s settings, the key, a fingerprint of the
  params) and the command's own arguments, which `read_partial` reads back for a resume;
* `finish` writes `metadata.json` atomically and removes the marker;
* `load_episodes` reads a complete directory back; `is_partial` names a partial one;
* `sample_transitions` draws and prints a few of its transitions.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

__all__ = [
    "METADATA",
    "PARTIAL",
    "ChunkWriter",
    "PartialDataset",
    "check_output",
    "episodes_of_chunk",
    "finish",
    "is_partial",
    "join_pieces",
    "load_episodes",
    "read_chunk",
    "read_partial",
    "read_request",
    "sample_transitions",
    "start_partial",
    "transitions_table",
]

#: The file `collect` writes last: a directory without it is a partial dataset.
METADATA = "metadata.json"
#: The marker of a directory `collect` is writing (removed after `METADATA`).
PARTIAL = "collect.partial"
_ABOUT = (
    f"purejaxppo collect is writing this directory; without {METADATA} it is partial (an "
    "interrupted collect): continue it (purejaxppo collect --resume DIR, or collect(..., "
    "resume=True) with the same arguments) or delete it and collect again"
)


def _flatten(tree: Any, prefix: str) -> dict[str, np.ndarray]:
    """{"obs": x} or {"obs/key": x, ...} for dict / tuple observations."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    out = {}
    for path, leaf in leaves:
        parts = [str(getattr(p, "key", getattr(p, "idx", p))) for p in path]
        out["/".join([prefix, *parts])] = np.asarray(leaf)
    return out


def _unflatten(arrays: dict[str, np.ndarray], prefix: str, template: Any) -> Any:
    """The tree of `template`'s structure whose leaves are `arrays` named as `_flatten`
    names them under `prefix` (the inverse of `_flatten`)."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    names = [
        "/".join([prefix, *[str(getattr(p, "key", getattr(p, "idx", p))) for p in path]])
        for path, _ in leaves
    ]
    return jax.tree_util.tree_unflatten(treedef, [arrays[name] for name in names])


class ChunkWriter:
    """Accumulates finished episodes and writes them as .npz chunks (+ Minari).

    `files`: the chunks written so far, starting from `files` (a resume's existing ones);
    `minari`: a `minari_writer.MinariWriter` (or None) given each flush's episodes.
    """

    def __init__(self, out: Path, flush_steps: int, minari: Any, files: list[Path] | None = None):
        self.out, self.flush_steps, self.minari = out, flush_steps, minari
        self.pending: list[dict[str, Any]] = []
        self.pending_steps = 0
        self.files: list[Path] = list(files or [])

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
        for key in step_keys:  # dict observations: a tree of `[S, ...]` leaves
            joined = jax.tree.map(lambda *xs: np.concatenate(xs), *[e[key] for e in episodes])
            arrays.update(_flatten(joined, key))
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
        staged = self.out / f".{path.name}.tmp"  # not matched by episodes_*.npz
        with staged.open("wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(staged, path)
        self.files.append(path)
        if self.minari is not None:
            self.minari.add(episodes)


def episodes_of_chunk(
    arrays: dict[str, np.ndarray], obs_template: Any, action_template: Any
) -> list[dict[str, Any]]:
    """The episodes of one chunk file's `arrays`, as `ChunkWriter.add` took them (obs and
    actions rebuilt in the structure of the templates, e.g. `jax.eval_shape` of a space's
    `sample`)."""
    ends = np.cumsum(arrays["episode_length"])
    episodes = []
    for i, episode_id in enumerate(arrays["episode_ids"]):
        steps = slice(int(ends[i] - arrays["episode_length"][i]), int(ends[i]))
        episode = {
            key: value[steps]
            for key, value in arrays.items()
            if not key.startswith(("obs", "final_obs", "action", "episode_"))
        }
        episode["obs"] = jax.tree.map(
            lambda x, s=steps: x[s], _unflatten(arrays, "obs", obs_template)
        )
        episode["action"] = jax.tree.map(
            lambda x, s=steps: x[s], _unflatten(arrays, "action", action_template)
        )
        episode["final_obs"] = jax.tree.map(
            lambda x, i=i: x[i], _unflatten(arrays, "final_obs", obs_template)
        )
        episode["id"] = int(episode_id)
        episodes.append(episode)
    return episodes


def join_pieces(pieces: list[dict[str, Any]], episode_id: int) -> dict[str, Any]:
    """One episode as `ChunkWriter.add` takes it, from the per-chunk record pieces of one
    env (`[s_i, ...]` leaves with `active`, `info` and `final_obs`): the steps joined,
    `info/<key>` columns, the last `final_obs` and the episode's `id`."""
    joined = jax.tree.map(lambda *xs: np.concatenate(xs), *pieces)
    final_obs = jax.tree.map(lambda x: x[-1], joined.pop("final_obs"))
    joined.pop("active")
    info = joined.pop("info")
    for name, values in info.items():
        joined[f"info/{name}"] = values
    return {**joined, "final_obs": final_obs, "id": episode_id}


def check_output(
    out: str | Path, minari_id: str | None, num_episodes: int, *, resume: bool = False
) -> Path:
    """Checks the arguments of `collect` before anything runs.

    Raises:
      ValueError: num_episodes < 1, `out` exists (nothing is overwritten; a partial
        dataset of an interrupted collect is named as such), or with `resume` is no
        partial dataset, or a Minari id that is not "namespace/name-vN" / "name-vN".
      ImportError: `minari_id` without the `minari` extra.
    """
    if num_episodes < 1:
        raise ValueError(f"collect: num_episodes={num_episodes!r} must be >= 1")
    out = Path(out)
    if resume:
        _read_marker(out)  # a partial dataset of this collect, or a ValueError
    elif out.exists():
        if is_partial(out):
            raise ValueError(
                f"collect: {out} is a partial dataset (an interrupted collect: no "
                f"{METADATA}); continue it (purejaxppo collect --resume {out}; "
                "collect(..., resume=True)), or delete it and collect again, or give a new "
                "directory (nothing overwritten)"
            )
        raise ValueError(f"collect: {out} exists; give a new directory (nothing overwritten)")
    if minari_id is not None:
        import re

        if not re.fullmatch(r"([\w.-]+/)?[\w.-]+-v\d+", minari_id):
            raise ValueError(f"collect: minari_id={minari_id!r} must look like 'namespace/name-v0'")
        from purejaxppo.sinks import require

        require("minari", "minari")
    return out


def _write_atomically(path: Path, text: str) -> None:
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(text)
    os.replace(staged, path)


def start_partial(out: Path, settings: dict[str, Any], request: dict[str, Any] | None) -> None:
    """Creates `out` marked partial (`PARTIAL`: `settings` and `request`, for a resume)
    until `finish` writes its metadata."""
    out.mkdir(parents=True)
    marker = {"about": _ABOUT, "settings": settings, "request": request}
    _write_atomically(out / PARTIAL, json.dumps(marker, indent=1))


def finish(out: Path, meta: dict[str, Any]) -> None:
    """Writes `metadata.json` atomically (the dataset is complete from then on) and
    removes the partial marker."""
    _write_atomically(out / METADATA, json.dumps(meta))
    (out / PARTIAL).unlink()


def is_partial(out: str | Path) -> bool:
    """True when `out` holds what an interrupted `collect` left: its `collect.partial`
    marker or `episodes_*.npz` chunks, and no `metadata.json`."""
    out = Path(out)
    if not out.is_dir() or (out / METADATA).is_file():
        return False
    return (out / PARTIAL).is_file() or any(out.glob("episodes_*.npz"))


def read_request(out: str | Path) -> dict[str, Any] | None:
    """The command arguments a partial `out`'s marker holds (None where it holds none)."""
    return _read_marker(Path(out)).get("request")


def _read_marker(out: Path) -> dict[str, Any]:
    """The partial marker of `out`, checked; ValueError naming what is wrong."""
    if (out / METADATA).is_file():
        raise ValueError(f"collect: {out} is complete (it holds {METADATA}): nothing to resume")
    if not (out / PARTIAL).is_file():
        raise ValueError(
            f"collect: {out} is no partial collect dataset (no {PARTIAL}): nothing to resume"
        )
    try:
        marker = json.loads((out / PARTIAL).read_text())
        if not isinstance(marker, dict) or not isinstance(marker.get("settings"), dict):
            raise ValueError("no settings")
    except ValueError:
        raise ValueError(
            f"collect: {out / PARTIAL} holds no resume settings (damaged, or written by an "
            f"older collect): delete {out} and collect again"
        ) from None
    return marker


class PartialDataset(NamedTuple):
    """What a resumed `collect` continues from (`read_partial`)."""

    files: list[Path]  # the finished chunks, in order
    written: np.ndarray  # bool [num_episodes]: the episodes in them
    returns: np.ndarray  # float32 [num_episodes] (0 where not written)
    lengths: np.ndarray  # int32 [num_episodes]


def read_partial(out: Path, settings: dict[str, Any], num_episodes: int) -> PartialDataset:
    """The finished chunks of the partial dataset `out`, after checking that its marker's
    settings are `settings` (JSON-equal). Removes staging files a killed write left.

    Raises:
      ValueError: `out` is complete, not partial, its marker is damaged or from an older
        collect, its settings differ (naming the fields), or its chunks are not
        `episodes_00000.npz` .. in a row, damaged, or hold unknown / repeated episodes.
    """
    stored = _read_marker(out)["settings"]
    settings = json.loads(json.dumps(settings))
    differ = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
    if differ:
        raise ValueError(
            f"collect: cannot resume {out}: {', '.join(differ)} differ from the interrupted "
            "collect's (resume with its own policy, params, key and arguments)"
        )
    for staged in out.glob(".episodes_*.npz.tmp"):
        staged.unlink()  # a chunk whose write was killed: its episodes are played again
    files = sorted(out.glob("episodes_*.npz"))
    if [f.name for f in files] != [f"episodes_{i:05d}.npz" for i in range(len(files))]:
        raise ValueError(
            f"collect: cannot resume {out}: its chunk files are not episodes_00000.npz .. in "
            f"a row ({[f.name for f in files]}); delete it and collect again"
        )
    written = np.zeros(num_episodes, bool)
    returns, lengths = np.zeros(num_episodes, np.float32), np.zeros(num_episodes, np.int32)
    for path in files:
        chunk = read_chunk(path, "collect --resume")
        ids = chunk["episode_ids"]
        if ids.min(initial=0) < 0 or ids.max(initial=0) >= num_episodes or written[ids].any():
            raise ValueError(f"collect: cannot resume {out}: {path} holds unexpected episode ids")
        written[ids] = True
        returns[ids], lengths[ids] = chunk["episode_return"], chunk["episode_length"]
    return PartialDataset(files, written, returns, lengths)


def load_episodes(out: str | Path) -> dict[str, np.ndarray]:
    """All episodes of a complete `collect` directory: its `.npz` chunks concatenated
    (sorted by file); per step `[S, ...]`, per episode `[E]` (see `datasets`' docstring).

    Raises:
      ValueError: `out` is no collect dataset; a partial one (no `metadata.json`: an
        interrupted collect), naming it and how to finish or redo it; chunk files or
        episodes that do not match the counts of its `metadata.json`; a truncated or
        damaged chunk file, naming it.
    """
    out = Path(out)
    files = sorted(out.glob("episodes_*.npz"))
    if not (out / METADATA).is_file():
        if is_partial(out):
            raise ValueError(
                f"load_episodes: {out} is a partial dataset ({len(files)} episodes_*.npz "
                f"chunk(s), no {METADATA}: the collect writing it was interrupted); continue "
                f"it (purejaxppo collect --resume {out}), or delete it and collect again "
                "(purejaxppo collect RUN_DIR --episodes N --out DIR)"
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
    parts = [read_chunk(f) for f in files]
    episodes = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    found = len(np.unique(episodes["episode_ids"]))
    if found != num_episodes or len(episodes["episode_ids"]) != num_episodes:
        raise ValueError(
            f"load_episodes: {out} holds {len(episodes['episode_ids'])} episodes ({found} "
            f"distinct ids); its {METADATA} says {num_episodes}"
        )
    return episodes


def read_chunk(path: Path, who: str = "load_episodes") -> dict[str, np.ndarray]:
    """The arrays of one chunk file; a ValueError naming it when it does not read back."""
    try:
        with np.load(path) as chunk:
            return {key: chunk[key] for key in chunk.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as err:
        raise ValueError(
            f"{who}: {path} is truncated or damaged ({type(err).__name__}: {err}); "
            f"collect the dataset of {path.parent} again"
        ) from None


#: The per-step fields `sample_transitions` shows, in its table's order (dict
#: observations: each `obs/<key>` in place of `obs`).
TRANSITION_FIELDS = (
    "obs",
    "action",
    "reward",
    "terminated",
    "truncated",
    "log_prob",
    "value",
)


def sample_transitions(
    source: str | Path | dict[str, np.ndarray],
    n: int = 5,
    *,
    seed: int = 0,
    show: bool = True,
) -> dict[str, np.ndarray]:
    """`n` random transitions of a `collect` dataset, printed as a table (DTI's
    `sample_experiences`): a look at what was stored.

    Args:
      source: a complete collect directory (`load_episodes` reads it) or the dict
        `load_episodes` returned.
      n: transitions to draw, an int >= 1; without replacement, all of them when the
        dataset holds fewer.
      seed: numpy seed of the draw (`np.random.default_rng(seed)`).
      show: print the table (one row per transition: its step index in the dataset,
        `episode_id`, then `TRANSITION_FIELDS`); False returns it alone.

    Returns:
      dict of numpy arrays `[m, ...]` (m = min(n, S) rows, in dataset order): `index`
      (int64, the step's row in the dataset's per-step arrays), `episode_id`, and each
      stored field of `TRANSITION_FIELDS` (dict observations: `obs/<key>`).

    Raises:
      ValueError: `n` not an int >= 1; a `source` that `load_episodes` refuses (no or a
        partial dataset, naming it), or a dict without per-step `reward`.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"sample_transitions: n={n!r}: must be an int >= 1")
    episodes = source if isinstance(source, dict) else load_episodes(source)
    if "reward" not in episodes:
        raise ValueError("sample_transitions: source holds no per-step 'reward' (not episodes?)")
    num_steps = len(episodes["reward"])
    rows = np.sort(np.random.default_rng(seed).choice(num_steps, min(int(n), num_steps), False))
    names = ["episode_id"] + [
        key
        for field in TRANSITION_FIELDS
        for key in episodes
        if key == field or (field == "obs" and key.startswith("obs/"))
    ]
    sample = {"index": rows.astype(np.int64)}
    sample.update({name: np.asarray(episodes[name])[rows] for name in names if name in episodes})
    if show:
        print(transitions_table(sample))
    return sample


def transitions_table(sample: dict[str, np.ndarray]) -> str:
    """The text table of `sample_transitions`' dict: a header of the field names, one
    line per transition, numbers with 4 significant digits."""

    def cell(value: Any) -> str:
        value = np.asarray(value)
        if value.dtype == bool:
            return str(value.tolist())
        if np.issubdtype(value.dtype, np.floating):
            return np.array2string(value, precision=4, separator=",", suppress_small=True)
        return np.array2string(value, separator=",")

    names = list(sample)
    rows = [[cell(sample[name][i]) for name in names] for i in range(len(sample["index"]))]
    widths = [max(len(name), *(len(row[j]) for row in rows)) for j, name in enumerate(names)]
    lines = ["  ".join(name.rjust(w) for name, w in zip(names, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)
