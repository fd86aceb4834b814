"""Writes notebooks/quickstart.ipynb (run: python notebooks/make_quickstart.py).

The docs site shows the outputs stored in the notebook: after regenerating it, store
them again with `jupyter execute --inplace notebooks/quickstart.ipynb` (from a scratch copy:
the notebook writes run directories where it runs).
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell(
        "# purejaxppo quickstart\n\n"
        "Train PPO on CartPole-v1 with one jitted call, plot the learning curve, then train "
        "8 seeds at once with `jax.vmap` (one compile). Runs on a CPU in about a minute."
    ),
    new_code_cell(
        "import time\n\n"
        "import jax\n"
        "%matplotlib inline\n"
        "import matplotlib.pyplot as plt\n"
        "import numpy as np\n\n"
        "import purejaxppo as pjp\n\n"
        "config = pjp.PPOConfig(env_name='CartPole-v1', total_timesteps=500_000)\n"
        "config"
    ),
    new_markdown_cell("## One agent: the whole run is one jitted function of a key"),
    new_code_cell(
        "train = jax.jit(pjp.make_train(config))\n"
        "start = time.perf_counter()\n"
        "out = jax.block_until_ready(train(jax.random.key(0)))\n"
        "print(f'{time.perf_counter() - start:.1f} s (compile + run)')\n"
        "returns = np.asarray(out.metrics['episode_return'])\n"
        "steps = np.asarray(out.metrics['env_steps'])\n"
        "print('mean return over the last 10 updates:', np.nanmean(returns[-10:]))"
    ),
    new_code_cell(
        "keep = ~np.isnan(returns)\n"
        "plt.plot(steps[keep], returns[keep])\n"
        "plt.xlabel('env steps'); plt.ylabel('episode return'); plt.title('PPO on CartPole-v1')\n"
        "plt.show()"
    ),
    new_markdown_cell(
        "## Act with the trained policy\n"
        "`make_networks` gives the `Networks` the training used; `nets.apply`: observations "
        "`[B, 4]` in, a distrax distribution and values `[B]` out."
    ),
    new_code_cell(
        "env, env_params = pjp.make_env('CartPole-v1')\n"
        "nets = pjp.make_networks(config, env, env_params)\n"
        "obs, state = env.reset(jax.random.key(1), env_params)\n"
        "dist, value = nets.apply(out.train_state.params, obs[None])\n"
        "print('greedy action:', int(dist.mode()[0]), ' value:', float(value[0]))"
    ),
    new_markdown_cell("## 8 seeds in one compiled program"),
    new_code_cell(
        "train_many = jax.jit(jax.vmap(pjp.make_train(config)))\n"
        "start = time.perf_counter()\n"
        "outs = jax.block_until_ready(train_many(jax.random.split(jax.random.key(0), 8)))\n"
        "print(f'{time.perf_counter() - start:.1f} s for 8 agents')\n"
        "returns = np.asarray(outs.metrics['episode_return'])  # [8, num_updates]\n"
        "final = np.nanmean(returns[:, -10:], axis=1)\n"
        "print('final return per seed:', np.round(final, 1))\n"
        "assert final.mean() > 400, final"
    ),
    new_code_cell(
        "steps = np.asarray(outs.metrics['env_steps'][0])\n"
        "mean = np.nanmean(returns, axis=0)\n"
        "low, high = np.nanpercentile(returns, [25, 75], axis=0)\n"
        "plt.plot(steps, mean, label='mean of 8 seeds')\n"
        "plt.fill_between(steps, low, high, alpha=0.3, label='25-75 percentile')\n"
        "plt.xlabel('env steps'); plt.ylabel('episode return'); plt.legend()\n"
        "plt.show()"
    ),
]

notebook = new_notebook(cells=cells)
notebook.metadata["kernelspec"] = {
    "name": "python3",
    "display_name": "Python 3",
    "language": "python",
}
Path(__file__).with_name("quickstart.ipynb").write_text(nbformat.writes(notebook))
