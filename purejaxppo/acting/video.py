"""Episode videos: record a policy's episode in a jitted scan, render it outside the jit.

`record_episode` runs one episode of a policy (`lax.scan` over `max_steps`, one env) and
returns the env states and observations it visited; `make_renderer(env)` turns one
(state, obs) into an RGB frame; `write_video` writes `.gif` (Pillow) or `.mp4` (the
`video` extra: imageio + imageio-ffmpeg). Rendering runs in numpy on the recorded states,
so training runs the same program whether videos are on or off; `purejaxppo eval RUN
--video out.gif` and `PPOConfig.video_freq` use these.

Renderers, in order of preference:
  1. the env's own `render(state, params) -> [H, W, 3] uint8` method, if it has one;
  2. built-in state renderers of classic-control envs ("CartPole-v1", "Pendulum-v1");
  3. an observation renderer for image observations `[H, W, C]` (MinAtar: one colour per
     channel, as gymnax's MinAtar visualizer) and for the probe envs (their observation
     as bars);
  4. EnvPool Atari tasks: the newest frame of each observation (`render_atari_frame`; the
     recorder keeps only that frame, and films the whole game, every life); EnvPool MuJoCo
     tasks play their gymnasium twin, rendered by MuJoCo (`envs.twins`);
  5. JaxMARL MPE envs (`render_mpe`: their state's entities as discs); a multi-agent
     episode is recorded with every agent on its row, its reward the team reward.
Anything else raises ValueError (nothing is written).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.acting.video_files import Frame, check_video_path, write_video
from purejaxppo.acting_checks import check_count, check_flag, check_key
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.networks import Networks
from purejaxppo.types import Env, EnvParams, Params

if TYPE_CHECKING:
    from purejaxppo.policy import Policy

Renderer = Callable[[Any, Any], Frame]  # (one env state, one observation) -> frame

#: Colours of image-observation channels (channel c gets PALETTE[c % len]); black = empty.
PALETTE = np.array(
    [
        [230, 159, 0],
        [86, 180, 233],
        [0, 158, 115],
        [240, 228, 66],
        [0, 114, 178],
        [213, 94, 0],
        [204, 121, 167],
        [255, 255, 255],
    ],
    np.uint8,
)


class Episode(NamedTuple):
    """One recorded episode (host numpy arrays, cut at its end)."""

    states: Any  # env state pytree, leaves [L, ...]: the state each action was taken in
    obs: Any  # observations [L, *obs_shape] (dict / tuple of such arrays; agents: [L, A, ...])
    actions: np.ndarray  # [L, ...] (agents: [L, A, ...])
    rewards: np.ndarray  # float32 [L] (agents: the team reward)
    length: int  # L, steps of the episode
    episode_return: float  # sum of rewards

    def state(self, t: int) -> Any:
        return jax.tree.map(lambda x: x[t], self.states)

    def observation(self, t: int) -> Any:
        return jax.tree.map(lambda x: x[t], self.obs)


# --------------------------------------------------------------------- renderers
def _canvas(height: int, width: int, color: int = 255) -> np.ndarray:
    return np.full((height, width, 3), color, np.uint8)


def _line(
    img: np.ndarray,
    p0: tuple[float, float],
    p1: tuple[float, float],
    width: int,
    color: Sequence[int],
) -> None:
    """Draws a thick line from p0 to p1 (x, y pixel coordinates) into img."""
    height, width_px = img.shape[:2]
    ys, xs = np.mgrid[0:height, 0:width_px]
    (x0, y0), (x1, y1) = p0, p1
    dx, dy = x1 - x0, y1 - y0
    length2 = max(dx * dx + dy * dy, 1e-9)
    t = np.clip(((xs - x0) * dx + (ys - y0) * dy) / length2, 0.0, 1.0)
    dist2 = (xs - (x0 + t * dx)) ** 2 + (ys - (y0 + t * dy)) ** 2
    img[dist2 <= (width / 2) ** 2] = color


def render_cartpole(state: Any, params: Any, size: tuple[int, int] = (200, 300)) -> Frame:
    """CartPole-v1 (gymnax state `x`, `theta`; params `x_threshold`, `length`): the cart
    as a box on a track, the pole as a line, as gymnasium draws it."""
    height, width = size
    img = _canvas(height, width)
    world_width = 2 * float(params.x_threshold)
    scale = width / world_width
    track_y = int(height * 0.75)
    img[track_y, :] = (0, 0, 0)
    cart_x = float(state.x) * scale + width / 2
    cart_w, cart_h = 50 * width / 600, 30 * width / 600
    x0, x1 = int(max(cart_x - cart_w / 2, 0)), int(min(cart_x + cart_w / 2, width))
    img[int(track_y - cart_h / 2) : int(track_y + cart_h / 2), x0:x1] = (0, 0, 0)
    pole_len = scale * 2 * float(params.length)
    theta = float(state.theta)
    top = (cart_x + pole_len * np.sin(theta), track_y - pole_len * np.cos(theta))
    _line(img, (cart_x, track_y), top, max(3, int(10 * width / 600)), (202, 152, 101))
    return img


def render_pendulum(state: Any, params: Any, size: tuple[int, int] = (200, 200)) -> Frame:
    """Pendulum-v1 (gymnax state `theta`, 0 = upright): a rod from the centre."""
    height, width = size
    img = _canvas(height, width)
    centre = (width / 2, height / 2)
    radius = 0.4 * min(height, width)
    theta = float(state.theta)
    end = (centre[0] + radius * np.sin(theta), centre[1] - radius * np.cos(theta))
    _line(img, centre, end, max(4, width // 20), (204, 77, 77))
    return img


def render_image_observation(obs: Any, scale: int = 16) -> Frame:
    """An image observation `[H, W, C]`: each cell gets the colour of its highest
    non-zero channel (MinAtar), or the image itself when C = 3 (RGB), upscaled."""
    obs = np.asarray(obs)
    if obs.shape[-1] == 3 and obs.dtype == np.uint8:
        img = obs
    else:
        channels = obs.shape[-1]
        on = obs > 0
        index = np.where(on.any(-1), channels - 1 - np.argmax(on[..., ::-1], axis=-1), -1)
        img = np.where(index[..., None] >= 0, PALETTE[index % len(PALETTE)], 0).astype(np.uint8)
    return np.kron(img, np.ones((scale, scale, 1), np.uint8)).astype(np.uint8)


def render_vector_observation(
    obs: Any, low: float, high: float, size: tuple[int, int] = (120, 160)
) -> Frame:
    """A vector observation as vertical bars scaled to [low, high] (probe envs)."""
    values = np.asarray(obs, np.float32).reshape(-1)
    height, width = size
    img = _canvas(height, width)
    span = (high - low) or 1.0
    bar = width // max(len(values), 1)
    for i, value in enumerate(values):
        frac = float(np.clip((value - low) / span, 0.0, 1.0))
        top = int(round((1.0 - frac) * (height - 1)))
        img[top:, i * bar + 2 : (i + 1) * bar - 2] = (31, 119, 180)
    return img


def make_renderer(env: Env, env_params: EnvParams) -> Renderer:
    """`render(state, obs) -> [H, W, 3] uint8` for `env` (see the module docstring).

    Raises:
      ValueError: naming the env when none of the renderers applies.
    """
    from purejaxppo.kinds import kind_of

    return _RENDERERS.get(kind_of(env).name, _jax_renderer)(env, env_params)


def _host_renderer(env: Any, env_params: Any) -> Renderer:
    """A host env's renderer: its recorder keeps gymnasium's frames as the states.

    Raises:
      ValueError: the env cannot render a frame (`HostEnv.check_render`).
    """
    env.check_render()
    return lambda frame, obs: np.asarray(frame, np.uint8)


def _jax_renderer(env: Any, env_params: Any) -> Renderer:
    """A JAX env's renderer: its `render(state, params)`, a drawing of its state, or
    its observations (see the module docstring)."""
    if callable(getattr(env, "render", None)):
        return lambda state, obs: np.asarray(env.render(state, env_params), np.uint8)
    name = getattr(env, "name", type(env).__name__)
    if name == "CartPole-v1" and hasattr(env_params, "x_threshold"):
        return lambda state, obs: render_cartpole(state, env_params)
    if name == "Pendulum-v1":
        return lambda state, obs: render_pendulum(state, env_params)
    space = env.observation_space(env_params)
    shape = getattr(space, "shape", None)
    if shape is not None and len(shape) == 3:
        return lambda state, obs: render_image_observation(obs)
    if name.startswith("Probe") and shape is not None and len(shape) == 1:
        low = float(np.min(np.asarray(space.low)))
        high = float(np.max(np.asarray(space.high)))
        return lambda state, obs: render_vector_observation(obs, low, high)
    raise ValueError(
        f"no renderer for {name}: videos need an env with a render(state, params) method, "
        "CartPole-v1 / Pendulum-v1, image observations [H, W, C] (MinAtar) or a probe env"
    )


def render_mpe(state: Any, mpe: Any, size: int = 300, extent: float = 2.0) -> Frame:
    """A JaxMARL MPE state as JaxMARL's `MPEVisualizer` draws it, without matplotlib:
    each entity (agents, then landmarks: `state.p_pos` `[E, 2]`) a disc of its radius
    (`mpe.rad` `[E]`) and colour (`mpe.colour`, RGB 0-255) on a white square showing
    [-extent, extent]^2, y up; landmarks under agents."""
    img = _canvas(size, size)
    ys, xs = np.mgrid[0:size, 0:size]
    scale = size / (2 * extent)
    positions = np.asarray(state.p_pos, np.float32)
    radii, colours = np.asarray(mpe.rad, np.float32), np.asarray(mpe.colour)
    for i in reversed(range(len(positions))):
        cx, cy = (positions[i, 0] + extent) * scale, (extent - positions[i, 1]) * scale
        disc = (xs - cx) ** 2 + (ys - cy) ** 2 <= max(radii[i] * scale, 1.0) ** 2
        img[disc] = colours[i].astype(np.uint8)
    return img


def _agents_renderer(env: Any, env_params: Any) -> Renderer:
    """A JaxMARL env's renderer: its state drawn by `render_mpe` (MPE envs).

    Raises:
      ValueError: naming the env when it is no MPE env.
    """
    mpe = env.env
    if all(hasattr(mpe, a) for a in ("rad", "colour", "num_entities")):
        return lambda state, obs: render_mpe(state, mpe)
    raise ValueError(
        f"no renderer for {env.name}: videos of JaxMARL envs draw MPE states only (jaxmarl:MPE_*)"
    )


def render_atari_frame(frame: Any, scale: int = 2) -> Frame:
    """An EnvPool Atari frame (`EnvPoolEnv.newest_frame`: `[H, W]` grey or `[H, W, 3]`
    RGB uint8) as RGB `[scale * H, scale * W, 3]`: what the agent saw, preprocessed."""
    frame = np.asarray(frame, np.uint8)
    if frame.ndim == 2:
        frame = np.repeat(frame[..., None], 3, axis=-1)
    return np.kron(frame, np.ones((scale, scale, 1), np.uint8)).astype(np.uint8)


def _envpool_renderer(env: Any, env_params: Any) -> Renderer:
    """An EnvPool env's renderer: Atari tasks' newest observation frame, which the
    recorder keeps (`make_episode_recorder`); MuJoCo tasks' gymnasium twin's frames
    (EnvPool renders none: `envs.twins`).

    Raises:
      ValueError / ImportError: a MuJoCo task whose twin cannot be built or render.
    """
    if env.atari:
        return lambda state, frame: render_atari_frame(frame)
    from purejaxppo.envs.twins import gymnasium_twin

    return _host_renderer(gymnasium_twin(env), None)


#: `EnvKind.name` -> its renderer builder (JAX envs: `_jax_renderer`).
_RENDERERS = {"host": _host_renderer, "agents": _agents_renderer, "envpool": _envpool_renderer}


# --------------------------------------------------------------------- recording
def make_episode_recorder(
    networks: Networks,
    env: Env,
    env_params: EnvParams,
    max_steps: int,
    num_envs: int | None = None,
) -> Callable:
    """Jitted `record(params, key, temperature) -> (states, obs, actions, rewards, active)`.

    One env, `max_steps` steps of the policy (temperature 0: greedy) in a
    `lax.scan`, keeping the state and observation each action was taken in (`[max_steps]`
    leaves; `active` marks the steps before the episode ended). With `num_envs` E, the
    first of the E episodes `evaluate` plays with the same key (the E envs step as there;
    the first one's steps are kept). EnvPool MuJoCo: its gymnasium twin's episode
    (`envs.twins.filmed_env`). EnvPool Atari: the newest
    frame of each observation (`EnvPoolEnv.newest_frame`) and the raw game rewards, until
    the game ends (all lives; `envs.episodes.atari_games`). JaxMARL: every agent acting on
    its row, the observations `[A, ...]`, the team reward. The env plays in the one
    episode loop (`acting.episodes.make_rows_recorder`); a host env on the host, each
    step's frame kept as its state (`acting.host.make_host_recorder`). Build once, call
    with new params to compile once.

    Raises:
      ValueError: a kind of env that cannot film (`kinds`), or a host env that
        cannot render.
    """
    from purejaxppo.acting.episodes import make_rows_recorder
    from purejaxppo.acting.host import make_host_recorder
    from purejaxppo.envs.twins import filmed_env
    from purejaxppo.kinds import resolve_acting

    setup = resolve_acting("video", *filmed_env(env, env_params), networks)
    if setup.rows is None:  # the host loop
        return make_host_recorder(setup.env, networks, max_steps, num_envs)
    return make_rows_recorder(setup.rows, networks, setup.episodes, max_steps, num_envs)


def record_episode(
    policy: Policy,
    key: jax.Array | None = None,
    *,
    greedy: bool = True,
    env: Env | None = None,
    env_params: EnvParams | None = None,
    max_steps: int | None = None,
    params: Params | None = None,
    recorder: Callable | None = None,
    first_of: int | None = None,
) -> Episode:
    """Plays one episode of `policy` and returns it.

    Args:
      policy: the `purejaxppo.Policy` to play.
      key: PRNG key (default `jax.random.key(0)`).
      greedy: argmax / mean actions (default), else sampled.
      env: the env to play (same spaces as the policy's); default the policy's own. An
        EnvPool MuJoCo task plays its gymnasium twin (`envs.twins`: EnvPool renders no
        frames), an episode of its own.
      env_params: `env`'s params; default the policy's (or `env`'s own for a given env:
        pass `make_env`'s second result).
      max_steps: scan length (default the env's `max_steps_in_episode`).
      params: params to play instead of the policy's (training-time videos).
      recorder: a prebuilt `make_episode_recorder` (reused to avoid recompiling).
      first_of: E: the episode is the first of the E that `evaluate(policy, env_id,
        num_episodes=E, key=key, greedy=greedy, max_steps=max_steps)` plays (the same
        keys and batch, so its return is `returns[0]`; `purejaxppo eval --video` films
        it). None (default): one env, stepped with the keys as they are.

    Raises:
      ValueError: `max_steps` or `first_of` not an int >= 1; no renderer for the env.
      TypeError: `greedy` not a bool, `key` not one PRNG key.
    """
    from purejaxppo.envs.twins import filmed_env

    greedy = check_flag("greedy", greedy)
    if max_steps is not None:
        max_steps = check_count("max_steps", max_steps)
    if first_of is not None:
        first_of = check_count("first_of", first_of)
    if key is not None:
        check_key("record_episode: key", key)
    env, env_params = _env_of(policy, env, env_params)
    if max_steps is None:
        max_steps = episode_limit(*filmed_env(env, env_params))
    if recorder is None:
        recorder = make_episode_recorder(policy.networks, env, env_params, max_steps, first_of)
    key = jax.random.key(0) if key is None else key
    params = policy.get_params() if params is None else params
    return _episode(jax.device_get(recorder(params, key, jnp.float32(0.0 if greedy else 1.0))))


def _episode(recorded: tuple) -> Episode:
    """The `Episode` of a recorder's host results: its steps before the episode ended."""
    states, obs, actions, rewards, active = recorded
    length = int(np.sum(active))
    cut = lambda x: np.asarray(x)[:length]  # noqa: E731
    rewards = cut(rewards)
    return Episode(
        states=jax.tree.map(cut, states),
        obs=jax.tree.map(cut, obs),
        actions=cut(actions),
        rewards=rewards,
        length=length,
        episode_return=float(rewards.sum()),
    )


def _env_of(policy: Policy, env: Env | None, env_params: EnvParams | None) -> tuple[Any, Any]:
    """`(env, env_params)` a video plays: `env` (with `env_params`, default its own
    `default_params`), or the policy's env and params."""
    if env is None:
        return policy.env, policy.env_params if env_params is None else env_params
    return env, getattr(env, "default_params", None) if env_params is None else env_params


def render_episode(episode: Episode, renderer: Renderer) -> list[Frame]:
    """One frame per step of the episode (the state each action was taken in), each with
    a progress bar along its bottom edge (step t of L) so that no two frames are equal
    (GIF writers merge equal consecutive frames)."""
    frames = []
    for t in range(episode.length):
        frame = np.array(renderer(episode.state(t), episode.observation(t)), np.uint8)
        if frame.ndim != 3 or frame.shape[-1] != 3:
            raise ValueError(f"renderer returned shape {frame.shape}, expected [H, W, 3]")
        bar = max(1, frame.shape[0] // 50)
        filled = int(round(frame.shape[1] * (t + 1) / episode.length))
        frame[-bar:, :] = (220, 220, 220)
        frame[-bar:, :filled] = (90, 90, 90)
        frames.append(frame)
    return frames


def save_episode_video(
    policy: Policy,
    path: str | Path,
    key: jax.Array | None = None,
    *,
    greedy: bool = True,
    fps: int = 30,
    overwrite: bool = False,
    max_steps: int | None = None,
    env: Env | None = None,
    env_params: EnvParams | None = None,
    first_of: int | None = None,
) -> tuple[Path, Episode]:
    """Records one episode of `policy` and writes it to `path` (.gif / .mp4), one frame
    per step (at most `max_steps`, default the env's `max_steps_in_episode`).

    `key`, `greedy`, `max_steps`, `env`, `env_params` and `first_of` are
    `record_episode`'s (an EnvPool MuJoCo task films its gymnasium twin); `fps` the
    frames per second; `overwrite` replaces an existing file. Returns the path and the
    recorded `Episode`.

    Raises:
      ValueError: no renderer for the env, a bad suffix, or an existing file (checked
        before the episode runs; nothing is overwritten).
      ImportError: .mp4 without the `video` extra; an EnvPool MuJoCo task without
        gymnasium's MuJoCo envs (the `mujoco` extra).
    """
    path = check_video_path(path, overwrite)
    env, env_params = _env_of(policy, env, env_params)
    renderer = make_renderer(env, env_params)
    episode = record_episode(
        policy,
        key,
        greedy=greedy,
        max_steps=max_steps,
        env=env,
        env_params=env_params,
        first_of=first_of,
    )
    return write_video(render_episode(episode, renderer), path, fps), episode
