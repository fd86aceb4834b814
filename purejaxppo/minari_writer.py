"""A `collect` dataset's episodes as a Minari dataset (the `minari` extra).

`MinariWriter` creates the dataset from `collect`'s first flush of finished episodes and
appends the later ones; `to_gymnasium_space` describes gymnax spaces the way Minari wants.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = ["MinariWriter", "to_gymnasium_space"]


class MinariWriter:
    """Creates the Minari dataset from the first flush and appends the later ones."""

    def __init__(self, root: Path, dataset_id: str, env: Any, env_params: Any, meta: dict):
        self.root, self.dataset_id = root, dataset_id
        self.observation_space = to_gymnasium_space(env.observation_space(env_params))
        self.action_space = to_gymnasium_space(env.action_space(env_params))
        self.meta = meta
        self.dataset = None

    def add(self, episodes: list[dict[str, Any]]) -> None:
        import minari
        from minari.data_collector import EpisodeBuffer

        buffers = []
        for e in episodes:
            obs = jax.tree.map(
                lambda steps, final: np.concatenate([steps, np.asarray(final)[None]]),
                e["obs"],
                e["final_obs"],
            )
            # Python lists: Minari's arrow storage cannot read back 1-D numpy infos.
            pad = lambda x: [*map(float, x), 0.0]  # noqa: E731
            buffers.append(
                EpisodeBuffer(
                    id=int(e["id"]),
                    observations=obs,
                    actions=e["action"],
                    rewards=e["reward"].tolist(),
                    terminations=e["terminated"].tolist(),
                    truncations=e["truncated"].tolist(),
                    infos={"log_prob": pad(e["log_prob"]), "value": pad(e["value"])},
                )
            )
        with _minari_root(self.root), warnings.catch_warnings():
            # Minari warns about the missing gymnasium env spec / author email.
            warnings.simplefilter("ignore", UserWarning)
            if self.dataset is None:
                self.dataset = minari.create_dataset_from_buffers(
                    dataset_id=self.dataset_id,
                    buffer=buffers,
                    observation_space=self.observation_space,
                    action_space=self.action_space,
                    algorithm_name="purejaxppo PPO",
                    data_format="arrow",  # pyarrow is a dependency already (no h5py)
                    description=json.dumps(self.meta),
                )
            else:
                self.dataset.update_dataset_from_buffer(buffers)


@contextlib.contextmanager
def _minari_root(root: Path) -> Iterator[None]:
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def to_gymnasium_space(space: Any) -> Any:
    """A gymnax space as the gymnasium space Minari wants (Discrete, Box, Dict, Tuple,
    MultiDiscrete, MultiBinary)."""
    import gymnasium
    from gymnax.environments import spaces

    name = type(space).__name__
    if isinstance(space, spaces.Discrete):
        return gymnasium.spaces.Discrete(int(space.n))
    if isinstance(space, spaces.Box):
        shape = tuple(int(s) for s in space.shape)
        dtype = np.dtype(space.dtype)
        low = np.broadcast_to(np.asarray(space.low, dtype), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype), shape)
        return gymnasium.spaces.Box(low, high, shape, dtype)
    if isinstance(space, spaces.Dict):
        return gymnasium.spaces.Dict({k: to_gymnasium_space(s) for k, s in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return gymnasium.spaces.Tuple([to_gymnasium_space(s) for s in space.spaces])
    if name == "MultiDiscrete":
        return gymnasium.spaces.MultiDiscrete(np.asarray(space.nvec))
    if name == "MultiBinary":
        return gymnasium.spaces.MultiBinary(int(space.n))
    raise ValueError(f"no gymnasium equivalent of the space {space!r}")
