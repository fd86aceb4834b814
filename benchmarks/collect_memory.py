"""Peak memory of `purejaxppo.acting.datasets.collect` for 1M env steps.

Trains CartPole-v1 on configs/cartpole.yaml (seed 0), then collects episodes of the
trained policy until about `--steps` transitions are written, in a fresh directory, and
reports the process's peak resident memory before and after collecting (ru_maxrss), the
time, and the size on disk. Memory is bounded by one group of `parallel` episodes plus one
flush of `flush_steps` steps, not by the number of steps collected.

    python -m benchmarks.collect_memory --steps 1000000
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import jax

import purejaxppo as pjp
from purejaxppo.acting.datasets import collect

ROOT = Path(__file__).resolve().parent


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--flush-steps", type=int, default=100_000)
    args = parser.parse_args()
    config = pjp.PPOConfig.from_yaml(ROOT.parent / "configs" / "cartpole.yaml")
    out = jax.block_until_ready(jax.jit(pjp.make_train(config))(jax.random.key(0)))
    policy = pjp.Policy.from_train_output(out, config)
    episodes = max(1, args.steps // 500)  # the trained agent plays 500-step episodes
    before = peak_mib()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = collect(
            policy, episodes, Path(tmp) / "data", jax.random.key(1), flush_steps=args.flush_steps
        )
        seconds = time.perf_counter() - start
        disk = sum(f.stat().st_size for f in result.files) / 2**20
    row = {
        "episodes": episodes,
        "steps": result.num_steps,
        "files": len(result.files),
        "seconds": round(seconds, 1),
        "peak_rss_mib_before_collect": round(before, 1),
        "peak_rss_mib_after_collect": round(peak_mib(), 1),
        "npz_mib": round(disk, 1),
        "flush_steps": args.flush_steps,
    }
    print(json.dumps(row))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = ROOT / "results" / f"collect-memory-cpu-{stamp}.json"
    path.write_text(json.dumps(row, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
