"""Ablation: is the IPPO gap to JaxMARL's own baseline on MPE simple_spread
our bootstrapping of time-limit truncations?

MPE episodes end only by time limit. purejaxppo's JaxMARL adapter reports them as
`truncated`, and GAE bootstraps those steps from V(final observation); JaxMARL's
baselines treat every `done` as terminal (no bootstrap). This script trains
`configs/jaxmarl_mpe_spread_ippo.yaml` with the library as it is (`base`) and with the
adapter's `step` patched from outside the library to report every truncation as a
termination (`trunc_as_term`: the JaxMARL treatment), same seeds, same budget, and
prints / writes both rows of `benchmarks/marl.py`'s table.

    python -m benchmarks.experiments.marl_truncation --timesteps 2048000   # from the repo root

Writes `benchmarks/results/marl-truncation-<time>.{csv,md}`. Not a test.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import jax.numpy as jnp
import pandas as pd

from benchmarks import marl
from benchmarks.harness import atomic_write, markdown_table
from purejaxppo.envs.suites import jaxmarl as jaxmarl_suite

HERE = Path(__file__).resolve().parent


def patch_truncation_as_termination() -> None:
    """Every truncation becomes a termination in the JaxMARL adapter's `step`."""
    step = jaxmarl_suite.JaxMARLEnv.step

    def step_as_terminal(self, key, state, action, params=None):
        obs, new_state, reward, terminated, truncated, info = step(self, key, state, action, params)
        return obs, new_state, reward, terminated | truncated, jnp.zeros_like(truncated), info

    jaxmarl_suite.JaxMARLEnv.step = step_as_terminal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=2_048_000, help="env steps / seed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE.parent / "results")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = []
    for variant in ("base", "trunc_as_term"):
        if variant == "trunc_as_term":
            patch_truncation_as_termination()
        row = marl.run("mpe-ippo", args.timesteps, args.seeds, with_random=False)["row"]
        row = {"variant": variant, **row}
        rows.append(row)
        print(variant, row["final_mean"], row["final_min"], row["final_max"], flush=True)
    table = pd.DataFrame(rows)
    cols = ["variant", "seeds", "env_steps", "final_mean", "final_min", "final_max", "run_s"]
    md = "\n".join(
        [
            "# MPE simple_spread IPPO: truncation bootstrapped (base) vs treated as terminal",
            "",
            f"Load average before: {load:.1f}. Team return, final = mean of the last 10% of "
            "updates per seed; mean (min, max) over seeds.",
            "",
            *markdown_table(rows, cols),
            "",
        ]
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = args.out / f"marl-truncation-{stamp}"
    atomic_write(base.with_suffix(".csv"), lambda p: table.to_csv(p, index=False))
    atomic_write(base.with_suffix(".md"), lambda p: Path(p).write_text(md))
    print(md, "wrote", base.with_suffix(".md"))


if __name__ == "__main__":
    main()
