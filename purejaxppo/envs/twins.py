"""The gymnasium twin of an EnvPool MuJoCo task: the env its videos play.

EnvPool renders no frames, and a MuJoCo task's observations are no images, so a video of
an "envpool:<task id>" MuJoCo run plays the policy on "gymnasium:<task id>" instead:
gymnasium's MuJoCo env of the same id (the same model and spaces; EnvPool's MuJoCo tasks
follow gymnasium's), rendered by MuJoCo (`render_mode="rgb_array"`). The run's task
options (`env_kwargs`: `max_episode_steps`, `reset_noise_scale`, ...) go to gymnasium's
env as they are. A twin's episode is its own, stepped by another simulator, so it is none
of the episodes an evaluation on EnvPool played (`purejaxppo eval --video` says so).

Rendering needs gymnasium's MuJoCo envs (`pip install 'purejaxppo[mujoco]'`) and an
OpenGL backend; without a display, gymnasium's MuJoCo renderer is pointed at EGL
(`MUJOCO_GL=egl`, unless set: `envs.suites.gymnasium`).
"""

from __future__ import annotations

import os
from typing import Any

from purejaxppo.errors import describe_error

__all__ = ["filmed_env", "gymnasium_twin", "is_envpool_mujoco"]


def is_envpool_mujoco(env: Any) -> bool:
    """Whether `env` is an EnvPool MuJoCo task (an `EnvPoolEnv` that is not Atari)."""
    from purejaxppo.envs.suites.envpool import EnvPoolEnv

    return isinstance(env, EnvPoolEnv) and not env.atari


def gymnasium_twin(env: Any) -> Any:
    """The `HostEnv` "gymnasium:<task id>" of an EnvPool MuJoCo task `env`, built with its
    options; kept on `env`, so it is built once.

    Raises:
      ValueError: `env` is no EnvPool MuJoCo task; gymnasium has no env of the id or
        refuses one of the run's options (naming it); the twin's observation or action
        shape differs from the task's (naming both).
      ImportError: gymnasium or its MuJoCo envs are missing (naming what to install).
    """
    if not is_envpool_mujoco(env):
        raise ValueError(f"{getattr(env, 'name', env)!r}: only EnvPool MuJoCo tasks have a twin")
    twin = getattr(env, "_gymnasium_twin", None)
    if twin is not None:
        return twin
    from purejaxppo.envs.suites import gymnasium

    twin_id = f"gymnasium:{env.task_id}"
    why = f"video of {env.name} plays its gymnasium twin {twin_id} (EnvPool renders no frames)"
    try:
        twin, _ = gymnasium.make(env.task_id, env.options)
    except ImportError as err:
        raise ImportError(f"{why}: {err}") from None
    except ValueError as err:
        raise ValueError(f"{why}, which cannot be built: {err}") from None
    except Exception as err:  # MuJoCo's import fails on an OpenGL backend it cannot load
        backend = os.environ.get("MUJOCO_GL", "unset")
        raise ValueError(
            f"{why}, which cannot be built ({describe_error(err)}); MUJOCO_GL is {backend}: "
            "egl (a GPU or libEGL) or osmesa (software) render without a display"
        ) from None
    ours = tuple(tuple(s(None).shape) for s in (env.observation_space, env.action_space))
    theirs = tuple(tuple(s().shape) for s in (twin.observation_space, twin.action_space))
    if ours != theirs:
        raise ValueError(
            f"video of {env.name}: its gymnasium twin {twin_id} has other spaces "
            f"(observation, action shapes {theirs}, the task's {ours})"
        )
    env._gymnasium_twin = twin
    return twin


def filmed_env(env: Any, env_params: Any) -> tuple[Any, Any]:
    """`(env, env_params)` a video of `env` plays: an EnvPool MuJoCo task's gymnasium
    twin (`gymnasium_twin`, params None), any other env itself.

    Raises:
      ValueError / ImportError: the twin cannot be built (`gymnasium_twin`).
    """
    if is_envpool_mujoco(env):
        return gymnasium_twin(env), None
    return env, env_params
