"""What a user of the command line waits for: whole commands, import to exit, vs rejax.

CPU defaults. Every row is one fresh process timed from launch to exit:

- `sweep8`: `purejaxppo sweep --config configs/cartpole.yaml --seeds 8` (the standard
  workload, 8 seeds; the CLI splits them over one CPU device per usable core by default),
  against rejax 0.1.3's 8-agent `jit(vmap(train))` (`benchmarks/peers/rejax_ppo.py
  --agents 8`, its own virtualenv) in the same invocation. The peer script also runs its
  untimed 128-episode evaluation before exiting: its row gives both its whole wall time
  and its own compile + run seconds.
- `train` x2: `purejaxppo train` of the default config (CartPole-v1, 500k steps), twice,
  with a fresh persistent compile cache (`PUREJAXPPO_COMPILE_CACHE` = a new temp dir):
  the first run fills it, the second reads it. Compile seconds are JAX's own
  `/jax/core/compile/backend_compile_duration` events summed over the process (a cache
  hit skips the backend compile; `cache_hits` counts those), recorded by a listener the
  launcher installs before calling `purejaxppo.cli.main`. rejax has no persistent cache
  by default: its 1-agent script is run twice the same way for comparison.

    python -m benchmarks.cli_defaults                  # everything (~3-4 min, 2 CPU cores)
    python -m benchmarks.cli_defaults --rounds 2       # interleaved rounds; table keeps each row's best
    python -m benchmarks.cli_defaults --no-peer

Writes `benchmarks/results/cli-defaults-cpu-<time>.{json,csv}` and prints the table.
Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER_PYTHON = HERE / ".venv-rejax" / "bin" / "python"

#: Runs `purejaxppo.cli.main(argv)` with JAX's compile events recorded; prints one JSON
#: line (to fd 3 via a file) at exit.
LAUNCHER = r"""
import atexit, json, sys, time
import jax.monitoring as monitoring
stats = {"backend_compile_s": 0.0, "compiles": 0, "cache_hits": 0}
def on_duration(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        stats["backend_compile_s"] += duration
        stats["compiles"] += 1
def on_event(event, **kwargs):
    if event == "/jax/compilation_cache/cache_hits":
        stats["cache_hits"] += 1
monitoring.register_event_duration_secs_listener(on_duration)
monitoring.register_event_listener(on_event)
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(stats)))
from purejaxppo.cli import main
sys.exit(main(sys.argv[2:]))
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-4000:])
    return wall, proc.stdout, proc.returncode


def ours(argv: list[str], cache: Path, workdir: Path) -> dict:
    stats_file = workdir / f"stats-{time.monotonic_ns()}.json"
    env = {**os.environ, "PUREJAXPPO_COMPILE_CACHE": str(cache)}
    env.pop("PUREJAXPPO_NO_COMPILE_CACHE", None)
    wall, _, rc = timed([sys.executable, "-c", LAUNCHER, str(stats_file), *argv], env)
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    return {"wall_s": round(wall, 2), "rc": rc, **stats}


def peer(agents: int) -> dict:
    wall, stdout, rc = timed(
        [str(PEER_PYTHON), "-m", "benchmarks.peers.rejax_ppo", "--agents", str(agents)],
        dict(os.environ),
    )
    line = next((x for x in reversed(stdout.splitlines()) if x.startswith("{")), "{}")
    inner = json.loads(line)
    return {
        "wall_s": round(wall, 2),
        "rc": rc,
        "backend_compile_s": inner.get("compile_s"),
        "run_s": inner.get("run_s"),
        "final_return": inner.get("final_return"),
    }


def one_round(workdir: Path, no_peer: bool) -> list[dict]:
    rows = []
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=workdir))
    sweep_cache = Path(tempfile.mkdtemp(prefix="cache-", dir=workdir))
    sweep_args = ["sweep", "--config", "configs/cartpole.yaml", "--seeds", "8", "--no-progress"]
    rows.append(
        {
            "row": "sweep8",
            "library": "purejaxppo",
            "command": "purejaxppo sweep --config configs/cartpole.yaml --seeds 8",
            **ours(
                [*sweep_args, "--out", str(workdir / f"sweep-{len(os.listdir(workdir))}")],
                sweep_cache,
                workdir,
            ),
        }
    )
    if not no_peer:
        rows.append(
            {"row": "sweep8", "library": "rejax", "command": "rejax_ppo.py --agents 8", **peer(8)}
        )
    for attempt in ("first", "second"):
        run_dir = workdir / f"train-{len(os.listdir(workdir))}"
        rows.append(
            {
                "row": f"train ({attempt})",
                "library": "purejaxppo",
                "command": "purejaxppo train (default config, fresh cache dir)",
                **ours(["train", "--no-progress", "--run-dir", str(run_dir)], cache, workdir),
            }
        )
        if not no_peer:
            rows.append(
                {
                    "row": f"train ({attempt})",
                    "library": "rejax",
                    "command": "rejax_ppo.py --agents 1",
                    **peer(1),
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if not args.no_peer and not PEER_PYTHON.exists():
        subprocess.run(["bash", str(HERE / "peers" / "setup_rejax_venv.sh")], check=True)

    import pandas as pd

    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pjp-cli-bench-") as tmp:
        for round_ in range(args.rounds):
            for row in one_round(Path(tmp), args.no_peer):
                row["round"] = round_
                rows.append(row)
                print(json.dumps(row), flush=True)
    table = pd.DataFrame(rows)
    best = table.loc[table.groupby(["row", "library"], sort=False)["wall_s"].idxmin()]
    walls = best.set_index(["row", "library"])["wall_s"]
    if not args.no_peer:
        best = best.assign(
            rejax_over_ours=[
                round(walls[(r, "rejax")] / w, 2) if lib == "purejaxppo" else None
                for r, lib, w in zip(best["row"], best["library"], best["wall_s"], strict=True)
            ]
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"cli-defaults-cpu-{stamp}"
    table.to_csv(stem.with_suffix(".csv"), index=False)
    import jax

    meta = {
        "machine": platform.platform(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "jax": jax.__version__,
        "load_before": load_before,
        "rows": rows,
    }
    stem.with_suffix(".json").write_text(json.dumps(meta, indent=2, default=str))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(best.drop(columns=["command", "round"]).to_string(index=False))
    print(f"wrote {stem}.{{csv,json}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
