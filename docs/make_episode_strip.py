"""Writes docs/cartpole_episode_strip.png and .gif: one greedy episode of a CartPole-v1
agent trained on configs/cartpole.yaml (seed 0), rendered outside the jit.

    python docs/make_episode_strip.py
"""

from pathlib import Path

import jax
from PIL import Image

import purejaxppo as pjp
from purejaxppo.acting.video import make_renderer, record_episode, render_episode
from purejaxppo.acting.video_files import frame_strip

HERE = Path(__file__).resolve().parent

config = pjp.PPOConfig.from_yaml(HERE.parent / "configs" / "cartpole.yaml")
out = jax.jit(pjp.make_train(config))(jax.random.key(0))
policy = pjp.Policy.from_train_output(out, config)
episode = record_episode(policy, jax.random.key(1))
frames = render_episode(episode, make_renderer(policy.env, policy.env_params))
# Every 50th frame of a 500-step episode, half size.
strip = Image.fromarray(frame_strip(frames[::50], count=len(frames[::50])))
strip = strip.resize((strip.width // 2, strip.height // 2), Image.LANCZOS)
strip.save(HERE / "cartpole_episode_strip.png", optimize=True)
print(f"episode: {episode.length} steps, return {episode.episode_return:.0f}; wrote the strip")
