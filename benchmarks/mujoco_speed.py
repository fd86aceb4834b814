"""Where the time of `configs/mujoco.yaml` goes on this CPU (the Speed target).

For each `--shape NxT` (num_envs x num_steps, same config otherwise) it times, in one
process:

  env direct   EnvPool's pool stepped from Python (zero actions), env steps/s
  env adapter  the adapter vmapped in one jitted `lax.scan` (the io_callback path), env steps/s
  rollout      one update's rollout (policy forward + sampling + env) inside jit, ms
  host         of which seconds spent inside the host callback (`_Pools.step`), ms
  learn        the rest of one update: GAE, normalisation, epochs x minibatch Adam steps, ms
  compile      lowering + compiling the whole training program for `--total-timesteps`, s
  train        running it (steady state, compile excluded), s and env steps/s

and the process's import time. `--cli` instead times the Speed target itself, launch to
exit: `purejaxppo train --config <config> --no-progress` in a subprocess (imports, pool
creation, compile, training, run directory), its env steps/s and final return, against
EnvPool's direct speed at the config's num_envs measured just before and just after it in
the same run (the env-only limit; `fraction` = ours / that), with `uptime` before and after.

Prints a table and writes `benchmarks/results/mujoco-speed-cpu-<time>.csv` (`--cli`:
`mujoco-cli-cpu-<time>.csv`). Not a test: timings on a shared machine vary, so the
load average goes with them.

    python -m benchmarks.mujoco_speed --shape 8x256 16x128 32x64 --total-timesteps 100000
    python -m benchmarks.mujoco_speed --cli                     # configs/mujoco.yaml, 1M
"""

from __future__ import annotations

import time

_LAUNCH = time.perf_counter()

import argparse  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import purejaxppo as pjp  # noqa: E402
from purejaxppo.envs.suites import envpool as envpool_suite  # noqa: E402
from purejaxppo.rollout import make_rollout  # noqa: E402
from purejaxppo.train_setup import prepare  # noqa: E402

_IMPORT_S = time.perf_counter() - _LAUNCH
from benchmarks.harness import atomic_write  # noqa: E402
from benchmarks.reference import direct_steps_per_s, env_only  # noqa: E402

HERE = Path(__file__).resolve().parent


class _HostTimer:
    """Accumulates the seconds spent in `_Pools.step` (the host side of each env step)."""

    def __init__(self):
        self.seconds, self.calls = 0.0, 0
        self._step = envpool_suite._Pools.step
        timer = self

        def step(pools, action):
            t0 = time.perf_counter()
            out = timer._step(pools, action)
            timer.seconds += time.perf_counter() - t0
            timer.calls += 1
            return out

        envpool_suite._Pools.step = step

    def reset(self) -> None:
        self.seconds, self.calls = 0.0, 0


def _best(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def measure(config_path: Path, env: str, num_envs: int, num_steps: int, total: int) -> dict:
    """One row of the `--shape` table (see the module docstring) for the config at
    num_envs x num_steps; rollout / update times are the best of 3 jitted calls."""
    config = pjp.PPOConfig.from_yaml(
        config_path,
        env_name=f"envpool:{env}",
        num_envs=num_envs,
        num_steps=num_steps,
        total_timesteps=total,
    )
    row = {"shape": f"{num_envs}x{num_steps}", **env_only(env, num_envs, 2000)}
    env_obj, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    fns = pjp.make_train_fns(config, env_obj, env_params)
    hp = pjp.Hyperparams.from_config(config)
    setup = prepare(config, env_obj, env_params)
    rollout = make_rollout(setup.rows, fns.networks, num_steps)
    runner = jax.jit(fns.init)(jax.random.key(0))
    # Whole outputs returned: nothing of the rollout / update is dead code to XLA.
    roll = jax.jit(lambda r, k: rollout(r.train_state.params, r.env, k))
    upd = jax.jit(lambda r: fns.update(r, hp))
    jax.block_until_ready((roll(runner, jax.random.key(1)), upd(runner)))
    timer = _patched_timer()
    timer.reset()
    rollout_s = _best(lambda: roll(runner, jax.random.key(1)))
    host_s = timer.seconds / max(timer.calls, 1) * num_steps
    update_s = _best(lambda: upd(runner))
    train = jax.jit(fns.train)
    t0 = time.perf_counter()
    compiled = train.lower(jax.random.key(0)).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(jax.random.key(0)))
    train_s = time.perf_counter() - t0
    steps = float(np.asarray(out.metrics["env_steps"])[-1])
    return {
        **row,
        "rollout_ms": round(1e3 * rollout_s, 1),
        "host_ms": round(1e3 * host_s, 1),
        "learn_ms": round(1e3 * (update_s - rollout_s), 1),
        "update_ms": round(1e3 * update_s, 1),
        "compile_s": round(compile_s, 1),
        "train_s": round(train_s, 1),
        "train_steps_per_s": round(steps / train_s),
        "fraction_of_direct": round(steps / train_s / row["direct_steps_per_s"], 2),
    }


_TIMER: _HostTimer | None = None


def _patched_timer() -> _HostTimer:
    global _TIMER
    if _TIMER is None:
        _TIMER = _HostTimer()
    return _TIMER


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def measure_cli(config_path: Path, env: str, total: int | None) -> dict:
    """Launch-to-exit time of `purejaxppo train --config config_path` (see the module
    docstring), with the env-only limit measured before and after it."""
    config = pjp.PPOConfig.from_yaml(config_path, env_name=f"envpool:{env}")
    if total is not None:
        config = config.replace(total_timesteps=total)
    load_before = _uptime()
    direct_before = direct_steps_per_s(env, config.num_envs)
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "purejaxppo.cli", "train", "--config", str(config_path),
            "--env-name", config.env_name, "--total-timesteps", str(config.total_timesteps),
            "--no-progress", "--run-dir", str(Path(tmp) / "run"),
        ]  # fmt: skip
        t0 = time.perf_counter()
        subprocess.run(command, check=True, env=os.environ.copy())
        wall = time.perf_counter() - t0
        metrics = pd.read_csv(Path(tmp) / "run" / "metrics.csv")
    direct_after = direct_steps_per_s(env, config.num_envs)
    steps = int(metrics["env_steps"].iloc[-1])
    returns = metrics["episode_return"].to_numpy(np.float64)
    tail = max(3, int(np.ceil(0.05 * len(returns))))  # as reference.final_return
    direct = (direct_before + direct_after) / 2
    return {
        "config": config_path.name,
        "env": config.env_name,
        "shape": f"{config.num_envs}x{config.num_steps}",
        "env_steps": steps,
        "launch_to_exit_s": round(wall, 1),
        "steps_per_s": round(steps / wall),
        "x_cleanrl_1442": round(steps / wall / 1442, 2),
        "final_return": round(float(np.nanmean(returns[-tail:])), 1),
        "direct_before": round(direct_before),
        "direct_after": round(direct_after),
        "fraction_of_env_only": round(steps / wall / direct, 2),
        "uptime_before": load_before,
        "uptime_after": _uptime(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=HERE.parent / "configs" / "mujoco.yaml")
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--shape", nargs="+", default=["8x256"], help="num_envs x num_steps")
    parser.add_argument(
        "--total-timesteps", type=int, default=None, help="default: 100k; --cli: the config's"
    )
    parser.add_argument("--cli", action="store_true", help="launch-to-exit of purejaxppo train")
    parser.add_argument("--note", default="")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if args.cli:
        row = measure_cli(args.config, args.env, args.total_timesteps)
        row["note"] = args.note
        path = args.out / f"mujoco-cli-cpu-{stamp}.csv"
        atomic_write(path, lambda p: pd.DataFrame([row]).to_csv(p, index=False))
        print(*(f"{k}: {v}" for k, v in row.items()), sep="\n")
        print("wrote", path)
        return
    _patched_timer()
    rows = []
    for shape in args.shape:
        num_envs, num_steps = (int(v) for v in shape.split("x"))
        total = args.total_timesteps or 100_000
        rows.append(measure(args.config, args.env, num_envs, num_steps, total))
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    table["import_s"] = round(_IMPORT_S, 1)
    table["note"] = args.note
    path = args.out / f"mujoco-speed-cpu-{stamp}.csv"
    atomic_write(path, lambda p: table.to_csv(p, index=False))
    with pd.option_context("display.width", 250):
        print(table.drop(columns=["note"]).to_string(index=False))
    print("wrote", path)


if __name__ == "__main__":
    main()
