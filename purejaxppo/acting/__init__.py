"""Acting: a policy's episodes, shared below every driver (as brax's `training/acting.py`).

`episodes` is the one episode loop over a `RowsEnv` (every env the program steps) and
`host` its Python twin for host envs; `evaluation` (`evaluate`), `video`
(`record_episode`) and `datasets` (`collect`) are what they keep of the episodes; `hooks`
builds the periodic evaluation, videos and datasets of a training run (its names are
re-exported here). What `purejaxppo.policy` itself is built from lives below both, in
`purejaxppo.policy_parts`.
"""

from purejaxppo.acting.hooks import (
    EVAL_KEY_STREAM,
    LEVEL_KEY,
    SPLIT_ENV_KEYS,
    describe_space,
    level_generator,
    make_evaluators,
    make_media,
    split_env,
)

__all__ = [
    "EVAL_KEY_STREAM",
    "LEVEL_KEY",
    "SPLIT_ENV_KEYS",
    "describe_space",
    "level_generator",
    "make_evaluators",
    "make_media",
    "split_env",
]
