"""Other PPO libraries' names for `PPOConfig` fields, for the hint of an unknown field or
flag: `PPOConfig(env_id=...)`, a YAML key `n_steps:` or `purejaxppo train --env-id ...`
answers with our name and whose name it was, where a spelling match would suggest nothing
or the wrong field (difflib offers `--num-envs` for RL Zoo's `--env`).

Sources, each library's own argument list: CleanRL `ppo.py`'s `Args`; Stable-Baselines3
`PPO(...)` and RL Zoo's `train.py` flags; PureJaxRL's config dict (upper case: `LR`,
`CLIP_EPS`, `NUM_ENVS`); rejax's `PPO.create(...)`; Brax's `ppo.train(...)`. Names the
libraries share with ours (`learning_rate`, `num_envs`, `gamma`, ...) are not listed, and
a key that is one of our fields in another case (`NUM_ENVS`) is answered by `field_hint`.
"""

from __future__ import annotations

from collections.abc import Sequence

from purejaxppo.errors import did_you_mean

#: Their name (lower case, underscores) -> (our field, whose name it is).
PEER_NAMES: dict[str, tuple[str, str]] = {
    "env_id": ("env_name", "CleanRL's env_id"),
    "env": ("env_name", "RL Zoo's and rejax's env"),
    "exp_name": ("name", "CleanRL's exp_name"),
    "capture_video": ("video_freq", "CleanRL's capture_video; here a video every N updates"),
    "track": ("loggers", "CleanRL's track; here loggers: csv, wandb"),
    "n_envs": ("num_envs", "SB3's n_envs"),
    "n_steps": ("num_steps", "SB3's n_steps, the steps per env per update"),
    "n_epochs": ("update_epochs", "SB3's n_epochs"),
    "batch_size": (
        "num_minibatches",
        "SB3's batch_size, the minibatch size: num_minibatches = num_envs * num_steps / "
        "batch_size; our batch_size is num_envs * num_steps, derived",
    ),
    "clip_range": ("clip_coef", "SB3's clip_range"),
    "clip_range_vf": ("clip_vloss", "SB3's clip_range_vf; ours clips at clip_coef"),
    "normalize_advantage": ("norm_adv", "SB3's normalize_advantage"),
    "n_timesteps": ("total_timesteps", "RL Zoo's n_timesteps"),
    "n_eval_episodes": ("eval_episodes", "RL Zoo's n_eval_episodes"),
    "tensorboard_log": ("loggers", "RL Zoo's tensorboard_log; here loggers: csv, tensorboard"),
    "lr": ("learning_rate", "PureJaxRL's LR"),
    "clip_eps": ("clip_coef", "PureJaxRL's and rejax's clip_eps"),
    "num_epochs": ("update_epochs", "rejax's num_epochs"),
    "num_timesteps": ("total_timesteps", "Brax's num_timesteps"),
    "unroll_length": ("num_steps", "Brax's unroll_length"),
    "num_updates_per_batch": ("update_epochs", "Brax's num_updates_per_batch"),
    "entropy_cost": ("ent_coef", "Brax's entropy_cost"),
    "discounting": ("gamma", "Brax's discounting"),
    "clipping_epsilon": ("clip_coef", "Brax's clipping_epsilon"),
}


def peer_field(key: str, names: Sequence[str]) -> tuple[str, str] | None:
    """(our field, whose name `key` is) when `key` (any case, dashes or underscores) is
    another library's name for one of `names`, or one of `names` in another case
    ("PureJaxRL's upper case"); else None."""
    word = str(key).lower().replace("-", "_")
    if word in PEER_NAMES and PEER_NAMES[word][0] in names:
        return PEER_NAMES[word]
    if word in names and word != key:
        return word, "field names are lower case here"
    return None


def field_hint(key: str, names: Sequence[str]) -> str:
    """`"; did you mean env_name? (CleanRL's env_id)"` for another library's name of a
    field, else the closest of `names` by spelling (`"; did you mean a, b?"`), or `""`."""
    peer = peer_field(key, names)
    if peer is not None:
        return f"; did you mean {peer[0]}? ({peer[1]})"
    return did_you_mean(key, names)
