"""Writes notebooks/pbt.ipynb (run: python notebooks/make_pbt.py).

The docs site shows the outputs stored in the notebook: after regenerating it, store
them again with `jupyter execute --inplace notebooks/pbt.ipynb` (from a scratch copy:
the notebook writes run directories where it runs).
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell(
        "# Population-based training on CartPole\n\n"
        "8 PPO agents train together in **one jitted program**. Every 20 updates each "
        "member's fitness (mean episode return of the generation) is compared: the bottom "
        "quarter copies a member of the top quarter (params and optimizer state) and "
        "perturbs its learning rate by 0.8 or 1.2 (Jaderberg et al. 2017). The learning "
        "rate starts anywhere in a deliberately wide range, 1e-5 .. 1e-1. About a minute "
        "on a 2-core CPU."
    ),
    new_code_cell(
        "%matplotlib inline\n"
        "import matplotlib.pyplot as plt\n"
        "import numpy as np\n\n"
        "import purejaxppo as pjp\n\n"
        "config = pjp.PPOConfig(env_name='CartPole-v1', total_timesteps=240 * 512)  # 240 updates\n"
        "result = pjp.pbt(\n"
        "    config,\n"
        "    population=8,\n"
        "    ready_every=20,\n"
        "    search={'learning_rate': ('log_uniform', 1e-5, 1e-1)},\n"
        "    exploit='truncation',\n"
        "    explore='perturb',\n"
        "    seed=0,\n"
        ")\n"
        "print('compiles:', result.num_compiles)"
    ),
    new_markdown_cell(
        "## The lineage table\n"
        "One row per generation and member: which member it copied at the start of the "
        "generation (`parent`), the learning rate it trained with, and its fitness."
    ),
    new_code_cell("result.lineage.tail(8)"),
    new_code_cell(
        "result.summary  # final population, best first; `root`: the generation-0 member it descends from"
    ),
    new_code_cell(
        "best = result.summary.iloc[0]\n"
        "print('best member final fitness:', round(float(best['fitness']), 1))\n"
        "print('its learning rate:', f\"{best['learning_rate']:.2e}\")\n"
        "assert best['fitness'] >= 475, best"
    ),
    new_markdown_cell(
        "## Fitness per member, and the best member's learning-rate schedule\n"
        "Thin lines: each member slot's fitness; thick: the ancestry of the final best "
        "member (the slots its weights passed through)."
    ),
    new_code_cell(
        "fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))\n"
        "for member, rows in result.lineage.groupby('member'):\n"
        "    left.plot(rows['env_steps'], rows['fitness'], lw=0.8, alpha=0.7)\n"
        "chain = result.best_lineage\n"
        "steps = chain['update'] * config.batch_size\n"
        "left.plot(steps, chain['fitness'], color='black', lw=2.5, label='best ancestry')\n"
        "left.set_xlabel('env steps per member'); left.set_ylabel('fitness'); left.legend()\n"
        "right.step(steps, chain['learning_rate'], where='pre', color='black')\n"
        "right.set_yscale('log'); right.set_xlabel('env steps'); right.set_ylabel('learning rate')\n"
        'right.set_title("best member\'s learning rate")\n'
        "plt.tight_layout(); plt.show()"
    ),
    new_markdown_cell(
        "The same plot, plus one panel per searched field, is written by "
        "`pjp.pbt`'s companion `write_pbt(result, out_dir)` (also `purejaxppo pbt`), "
        "together with `lineage.csv`, `summary.csv` and the best member's run directory "
        "that `Policy.load` accepts."
    ),
    new_code_cell(
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "from purejaxppo.drivers.population import write_pbt\n\n"
        "out = Path(tempfile.mkdtemp())\n"
        "write_pbt(result, out)\n"
        "policy = pjp.Policy.load(out / 'best')\n"
        "import jax\n\n"
        "evaluation = pjp.evaluate(policy, 'CartPole-v1', 16, jax.random.key(0), greedy=True)\n"
        "print('greedy return of the best member over 16 episodes:', evaluation.returns.mean())"
    ),
]

notebook = new_notebook(cells=cells)
notebook.metadata["kernelspec"] = {
    "name": "python3",
    "display_name": "Python 3",
    "language": "python",
}
Path(__file__).with_name("pbt.ipynb").write_text(nbformat.writes(notebook))
