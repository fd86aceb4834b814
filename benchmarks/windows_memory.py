"""Trajectory windows against fixed chunks on a memory probe.

Workload: Probe7-v0 (a cue shown at an episode's first step, to be replayed at its last,
5th step: return 1.0 with memory, 0.5 by chance), a GRU policy (16 units), 16 envs x 24
steps, 4 epochs x 4 minibatches, lr 1e-3 annealed. Training sequences are L = 6 steps:
"chunks" cut every env's rollout at t = 0, 6, 12, 18 (`sequence_sampling: chunks`,
`max_seq_len: 6`), so a 5-step episode lies whole in one chunk only when it starts at the
chunk's first or second step; "windows" draws 64 windows of up to 6 steps per update, each
within one trajectory (`purejaxppo.sequences`, DTI's rule): every trajectory here has at most
5 steps, so each window is a whole trajectory and `window_prob_from_end` (which only moves
the end of windows of trajectories longer than L) changes nothing. Each variant is one
compiled program of `--seeds` seeds under `jax.vmap`; both variants see the same env steps.

    python -m benchmarks.windows_memory                          # 10 seeds, 38,400 steps
    python -m benchmarks.windows_memory --total-timesteps 96000 --seeds 5

Reported per variant: the mean, std (over seeds) and min of the final return (mean of the
last 10 updates), the seeds that reach 0.95 and the first update where the mean over seeds
does, compile and run seconds. Results: a table on stdout and
`benchmarks/results/windows-memory-cpu-<time>.csv` / `.json` (machine record, config and
every seed's final return).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from benchmarks.harness import (
    RESULTS,
    atomic_write,
    machine,
    markdown_table,
    stamp,
    time_call,
    write_text,
)

#: (name, config changes) of the compared variants.
VARIANTS = (
    ("chunks", {"sequence_sampling": "chunks"}),
    ("windows", {"sequence_sampling": "windows", "window_prob_from_end": 0.1}),
)

BASE = {
    "env_name": "Probe7-v0",
    "num_envs": 16,
    "num_steps": 24,
    "update_epochs": 4,
    "num_minibatches": 4,
    "learning_rate": 1e-3,
    "hidden_sizes": (32,),
    "recurrent": "gru",
    "recurrent_size": 16,
    "max_seq_len": 6,
}

COLUMNS = [
    "variant",
    "final_return",
    "final_return_std",
    "final_return_min",
    "seeds_solved",
    "first_update_solved",
    "compile_s",
    "run_s",
]


def run_variant(name: str, changes: dict, total_timesteps: int, seeds: int) -> dict:
    """One row: `seeds` seeds of one variant in one `jit(vmap(make_train))` program."""
    import jax
    import numpy as np

    import purejaxppo as pjp

    config = pjp.PPOConfig(**BASE, **changes, total_timesteps=total_timesteps)
    keys = jax.random.split(jax.random.key(0), seeds)
    program = jax.jit(jax.vmap(pjp.make_train(config)))
    compile_s, compiled = time_call(lambda: program.lower(keys).compile())
    run_s, out = time_call(lambda: jax.block_until_ready(compiled(keys)))
    returns = np.asarray(jax.device_get(out.metrics["episode_return"]))  # [S, updates]
    final = np.nanmean(returns[:, -10:], axis=1)
    solved = np.nonzero(np.nanmean(returns, axis=0) >= 0.95)[0]
    return {
        "variant": name,
        "final_return": float(final.mean()),
        "final_return_std": float(final.std()),
        "final_return_min": float(final.min()),
        "seeds_solved": f"{int((final >= 0.95).sum())}/{seeds}",
        "first_update_solved": int(solved[0]) if len(solved) else -1,
        "compile_s": round(compile_s, 2),
        "run_s": round(run_s, 2),
        "num_updates": config.num_updates,
        "final_return_per_seed": [round(float(x), 4) for x in final],
        "config": {**BASE, **changes, "total_timesteps": total_timesteps},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-timesteps", type=int, default=38_400)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = [
        run_variant(name, changes, args.total_timesteps, args.seeds) for name, changes in VARIANTS
    ]
    print("\n".join(markdown_table(rows, COLUMNS, ".3f")))
    import jax

    record = machine(device=str(jax.devices()[0]), platform=jax.default_backend())
    record = {**record, "rows": rows}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"windows-memory-{jax.default_backend()}-{stamp()}"

    def write_csv(path: str) -> None:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(stem.with_suffix(".csv"), write_csv)
    write_text(stem.with_suffix(".json"), json.dumps(record, indent=1, default=str))
    print(f"wrote {stem}.json and .csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
