"""Writes notebooks/watch_a_run.ipynb (run: python notebooks/make_watch_a_run.py).

The docs site shows the outputs stored in the notebook: after regenerating it, store
them again with `jupyter execute --inplace notebooks/watch_a_run.ipynb` (from a scratch
copy: the notebook writes run directories where it runs).

tests/test_notebook.py executes it at a small size (WATCH_A_RUN_TIMESTEPS)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell(
        "# Watching a run\n\n"
        "Train 4 seeds of PPO on CartPole-v1 in **one** jitted call and watch their learning "
        "curves while it runs: `make_train(config, callback=fn, callback_every=k)` hands "
        "every k-th update's metrics to the host (`jax.debug.callback`; under `vmap` one "
        "transfer per update for all seeds, and `fn` is called once per seed with its run "
        "index). Then record a greedy episode of the trained policy and show it inline."
    ),
    new_code_cell(
        "import os\n"
        "import time\n\n"
        "import jax\n"
        "%matplotlib inline\n"
        "import matplotlib.pyplot as plt\n"
        "import numpy as np\n"
        "from IPython.display import Image, display\n\n"
        "import purejaxppo as pjp\n\n"
        "SEEDS = 4\n"
        "TOTAL = int(os.environ.get('WATCH_A_RUN_TIMESTEPS', 300_000))  # small in the tests\n"
        "config = pjp.PPOConfig(env_name='CartPole-v1', total_timesteps=TOTAL)\n"
        "EVERY = max(1, config.num_updates // 30)  # ~30 points per curve\n"
        "print(config.num_updates, 'updates per seed, a callback every', EVERY)"
    ),
    new_markdown_cell(
        "## Live curves from one jitted call\n"
        "The callback runs on the host while the program runs; it appends the row and "
        "redraws the figure once all seeds have reported an update."
    ),
    new_code_cell(
        "history = {run: [] for run in range(SEEDS)}  # run -> [(env_steps, return)]\n"
        "fig, ax = plt.subplots(figsize=(7, 4))\n"
        "handle = display(fig, display_id=True)\n"
        "plt.close(fig)\n\n"
        "def on_update(run, update, metrics):\n"
        "    history[run].append((metrics['env_steps'], metrics['episode_return']))\n"
        "    if run == SEEDS - 1:  # every seed has reported this update\n"
        "        ax.clear()\n"
        "        for r, rows in history.items():\n"
        "            steps, returns = np.array(rows).T\n"
        "            done = np.isfinite(returns)  # NaN: no episode ended in that update\n"
        "            ax.plot(steps[done], returns[done], label=f'seed {r}')  # one line\n"
        "        ax.set_xlabel('env steps'); ax.set_ylabel('episode return')\n"
        "        ax.set_title(f'update {update} of {config.num_updates}'); ax.legend(loc='upper left')\n"
        "        handle.update(fig)\n\n"
        "train = jax.jit(jax.vmap(pjp.make_train(config, callback=on_update, callback_every=EVERY)))\n"
        "start = time.perf_counter()\n"
        "outs = jax.block_until_ready(train(jax.random.split(jax.random.key(0), SEEDS)))\n"
        "jax.effects_barrier()  # the last callbacks have run\n"
        "print(f'{time.perf_counter() - start:.1f} s (compile + run) for {SEEDS} seeds')\n"
        "calls = {run: len(rows) for run, rows in history.items()}\n"
        "print('callbacks per seed:', calls)\n"
        "assert all(n == config.num_updates // EVERY for n in calls.values())"
    ),
    new_markdown_cell(
        "The streamed numbers are the rows of `TrainOutput.metrics` (which also has the "
        "richer statistics: value / advantage / return-target / log-prob means, action "
        "mean and std, gradient norm before clipping)."
    ),
    new_code_cell(
        "returns = np.asarray(outs.metrics['episode_return'])  # [SEEDS, num_updates]\n"
        "streamed = np.array([r for _, r in history[0]])\n"
        "np.testing.assert_array_equal(streamed, returns[0, EVERY - 1 :: EVERY])\n"
        "print('final return per seed:', np.round(np.nanmean(returns[:, -5:], axis=1), 1))\n"
        "print({k: float(np.asarray(v)[0, -1]) for k, v in outs.metrics.items()\n"
        "       if k in ('value_mean', 'advantage_mean', 'log_prob_mean', 'grad_norm')})"
    ),
    new_markdown_cell(
        "## A recorded episode\n"
        "`record_episode` plays one greedy episode in a jitted scan and keeps the env "
        "states; the frames are rendered afterwards in numpy, outside the jit."
    ),
    new_code_cell(
        "from pathlib import Path\n\n"
        "from purejaxppo.acting.video import save_episode_video\n\n"
        "params = jax.tree.map(lambda x: x[0], outs.train_state.params)  # seed 0\n"
        "policy = pjp.Policy(params, config)\n"
        "run_dir = Path('runs') / 'watch_a_run'  # the notebook writes only here\n"
        "run_dir.mkdir(parents=True, exist_ok=True)\n"
        "path, episode = save_episode_video(policy, run_dir / 'episode.gif', overwrite=True)\n"
        "print(f'{episode.length} frames, return {episode.episode_return:.0f}')\n"
        "display(Image(filename=str(path)))"
    ),
]

notebook = new_notebook(cells=cells)
notebook.metadata["kernelspec"] = {
    "name": "python3",
    "display_name": "Python 3",
    "language": "python",
}
Path(__file__).with_name("watch_a_run.ipynb").write_text(nbformat.writes(notebook))
