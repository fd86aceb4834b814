"""PBT over static fields (architecture) vs traced-only PBT on CartPole-v1.

Config: `configs/cartpole.yaml` (4 envs x 128 steps, lr annealed) with `total_timesteps`
per run. Architectures ("choices"): `2`, `4`, `64-64`, `256-256-256` (tanh). Procedures:

* `alone/<arch>`: one plain run of each architecture (`make_train`, key 0, the config's
  hyperparameters): which architectures fail on their own;
* `static`: `pjp.pbt(population=8, ready_every=K, search={"hidden_sizes": ("choice",
  choices), "learning_rate": ("log_uniform", 1e-4, 1e-2)}, resample_probability=0.25)`:
  members start with the architectures round-robin (2 each);
* `traced/<arch>`: `pjp.pbt` with the same learning-rate search and population, every
  member with architecture `<arch>` (the smallest, and the config's 64-64).

Final return of a run: mean training-episode return over its last 10 updates (each final
member for PBT). Reported: best and median over the runs of a procedure, members at
>= 475, wall time (compiles included).

    python -m benchmarks.pbt_static                  # about 5-10 min on 2 CPU cores
    python -m benchmarks.pbt_static --total-timesteps 50000   # smoke test

Writes `benchmarks/results/pbt-static-cpu-<time>.{csv,json}` and prints the table. Not a
test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import portable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHOICES = ("2", "4", "64-64", "256-256-256")
SOLVED = 475.0


def _alone(pjp, config, arch: str) -> list[float]:
    import jax

    from purejaxppo.drivers.report import final_return

    sizes = tuple(int(w) for w in arch.split("-"))
    out = jax.jit(pjp.make_train(config.replace(hidden_sizes=sizes)))(jax.random.key(0))
    return [final_return(np.asarray(out.metrics["episode_return"]))]


def _pbt(pjp, config, search, args) -> tuple[list[float], object]:
    result = pjp.pbt(
        config,
        population=args.population,
        ready_every=args.ready_every,
        search=search,
        seed=args.seed,
        devices=1,
        verbose=False,
    )
    return [float(x) for x in result.summary["final_return"]], result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "cartpole.yaml")
    parser.add_argument("--total-timesteps", type=int, default=500_000, help="per run")
    parser.add_argument("--population", type=int, default=8)
    parser.add_argument("--ready-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()

    import pandas as pd

    import purejaxppo as pjp

    config = pjp.PPOConfig.from_yaml(args.config, total_timesteps=args.total_timesteps)
    lr = ("log_uniform", 1e-4, 1e-2)
    rows, extra = [], {}
    plans = [(f"alone/{arch}", arch) for arch in CHOICES]
    plans += [("static", None), (f"traced/{CHOICES[0]}", CHOICES[0]), ("traced/64-64", "64-64")]
    for name, arch in plans:
        start = time.perf_counter()
        if name.startswith("alone/"):
            returns = _alone(pjp, config, arch)
        elif name == "static":
            search = {"hidden_sizes": ("choice", list(CHOICES)), "learning_rate": lr}
            returns, result = _pbt(pjp, config, search, args)
            extra["static_summary"] = result.summary.to_dict(orient="records")
            extra["static_best"] = result.best_hparams_text()
            extra["static_num_compiles"] = result.num_compiles
        else:
            sizes = tuple(int(w) for w in arch.split("-"))
            returns, _ = _pbt(pjp, config.replace(hidden_sizes=sizes), {"learning_rate": lr}, args)
        wall = time.perf_counter() - start
        rows.append(
            {
                "procedure": name,
                "runs": len(returns),
                "best": float(np.max(returns)),
                "median": float(np.median(returns)),
                "solved": int(np.sum(np.asarray(returns) >= SOLVED)),
                "wall_s": round(wall, 1),
            }
        )
        print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / f"pbt-static-cpu-{stamp}.csv", index=False)
    meta = {
        "command": "python -m benchmarks.pbt_static",
        "args": {k: portable(v) for k, v in vars(args).items()},
        "choices": list(CHOICES),
        "machine": platform.platform(),
        "processor": platform.processor(),
        "rows": rows,
        **extra,
    }
    text = json.dumps(meta, indent=1, default=str)
    (args.out / f"pbt-static-cpu-{stamp}.json").write_text(text)
    print(f"wrote {args.out / f'pbt-static-cpu-{stamp}'}.{{csv,json}}")


if __name__ == "__main__":
    main()
