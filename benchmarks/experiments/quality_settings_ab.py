"""One tuned setting of the tune-quality study, trained by ours with the config's settings
changed one at a time toward SB3's PPO: which library difference moves the rerun score?

The quality study (`benchmarks.tune_peers_quality`) reruns each tuner's winner in its own
library. On Hopper-v4 its first study's winner was the same setting for ours and RL Zoo
(their TPE samplers share the seed): ours reran it at 242.7, SB3 at 339.1. The task's
settings are the same in both libraries but for what each library's PPO does on its own,
for example the value loss: ours clips it (`clip_vloss`, CleanRL's default), SB3 does not
(`clip_range_vf=None`), and SB3's value loss is the mean squared error without CleanRL's
factor 1/2 (so `vf_coef` 0.5 in SB3 weighs it as `vf_coef` 1.0 does here). The env too:
SB3 steps gymnasium's MuJoCo Hopper-v4, ours EnvPool's (`gymnasium:` ids run here as
host envs, `purejaxppo.envs.suites.gymnasium`).

    python -m benchmarks.experiments.quality_settings_ab                 # ~4 min, 2-core CPU
    python -m benchmarks.experiments.quality_settings_ab --json out.json

Each variant trains the task's config (`tune_peers_quality.TASKS[task]`, the trial's env
steps) with the setting's four tuned fields, over `--seeds` in one `pjp.sweep`, and is
scored as the study scores reruns: `final_return`, the mean return of the episodes of the
last 10 updates. Prints one row per variant (mean over seeds, the seeds' std, and against
the first variant: the mean difference and on how many seeds it is higher).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import machine, write_text

#: The Hopper study-0 winner of `tune-peers-quality-hopper-cpu-20261203.json` (ours and
#: RL Zoo chose it alike).
SETTING = {"clip_coef": 0.209, "ent_coef": 0.0358, "gae_lambda": 0.9145, "learning_rate": 0.0016}
#: Config changes, each a variant; the first is the baseline.
VARIANTS = {
    "config (clip_vloss on, vf_coef 0.5)": {},
    "clip_vloss off": {"clip_vloss": False},
    "clip_vloss off, vf_coef 1.0 (SB3's value weight)": {"clip_vloss": False, "vf_coef": 1.0},
    # SB3 steps gymnasium's MuJoCo Hopper-v4, ours EnvPool's: is the env the difference?
    "gymnasium:Hopper-v4 (SB3's env)": {"env_name": "gymnasium:Hopper-v4"},
}


def run(task: str, updates: int, seeds: list[int]) -> list[dict]:
    """One row per variant: its seeds' final returns."""
    import purejaxppo as pjp
    from benchmarks.tune_peers_quality import TASKS

    spec = TASKS[task]
    base = spec.settings().replace(total_timesteps=updates * spec.steps_per_update)
    grid = {field: [value] for field, value in SETTING.items()}
    rows = []
    for name, change in VARIANTS.items():
        start = time.perf_counter()
        sweep = pjp.sweep(base.replace(**change), seeds=seeds, grid=grid, verbose=False)
        finals = [float(v) for v in sweep.runs["final_return"]]
        rows.append({"variant": name, "change": change, "seeds": seeds, "final_returns": finals})
        print(f"{name}: mean {np.mean(finals):.1f} ({time.perf_counter() - start:.0f} s)")
    return rows


def table(rows: list[dict]) -> list[str]:
    """Markdown lines: mean, std over seeds, and the paired difference to the first row."""
    first = np.array(rows[0]["final_returns"])
    lines = [
        "| variant | mean final return | std over seeds | minus the config's | seeds higher |",
        "|---|--:|--:|--:|--:|",
    ]
    for row in rows:
        finals = np.array(row["final_returns"])
        diff = finals - first
        lines.append(
            f"| {row['variant']} | {finals.mean():.1f} | {finals.std():.1f} | "
            f"{diff.mean():+.1f} | {int((diff > 0).sum())} of {len(finals)} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="hopper")
    parser.add_argument("--updates", type=int, default=25, help="the study's updates per trial")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(100, 110)))
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    rows = run(args.task, args.updates, args.seeds)
    print("\n".join(table(rows)))
    if args.json is not None:
        record = machine()
        record.update(task=args.task, updates=args.updates, setting=SETTING, rows=rows)
        write_text(args.json, json.dumps(record, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
