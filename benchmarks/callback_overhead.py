"""Overhead of streaming metrics out of one jitted run.

Times `jax.jit(jax.vmap(make_train(config, callback=fn, callback_every=k)))` against the
same program without a callback, on the standard CartPole workload (configs/cartpole.yaml)
for 1 and 64 agents (seeds under one `vmap`; 1 agent is `jax.jit(train)` without vmap).
`fn` appends the row to a list (what a live plot needs at least). Each cell: compile once
(timed), then `--repeats` timed runs (best kept), all in this process, modes interleaved
per repeat so that load from other processes hits them alike.

    python -m benchmarks.callback_overhead                       # 1 and 64 agents
    python -m benchmarks.callback_overhead --agents 1 --repeats 3
    python -m benchmarks.callback_overhead --total-timesteps 100000   # shorter runs
    python -m benchmarks.callback_overhead --agents --video-freq 244   # videos only

`--video-freq N` also times `purejaxppo train`'s driver (`drivers.single.train_and_log`, log_freq
10, no plot) with `video_freq=0` and `video_freq=N` (a greedy episode recorded and rendered
to a GIF every N updates), best of `--repeats` after a warm-up run of each.

Prints a table and writes results/callback-overhead-<device>-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

import jax

import purejaxppo as pjp

ROOT = Path(__file__).resolve().parent


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all threads): less sensitive than wall
    time to other processes on a loaded machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def build(config: pjp.PPOConfig, agents: int, every: int | None, sink: list):
    callback = None if every is None else (lambda run, update, m: sink.append(m))
    train = pjp.make_train(config, callback=callback, callback_every=every or 1)
    if agents == 1:
        fn, arg = jax.jit(train), jax.random.key(0)
    else:
        fn, arg = jax.jit(jax.vmap(train)), jax.random.split(jax.random.key(0), agents)
    start = time.perf_counter()
    compiled = fn.lower(arg).compile()
    return compiled, arg, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, nargs="*", default=[1, 64])
    parser.add_argument("--video-freq", type=int, default=0)
    parser.add_argument("--every", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--total-timesteps", type=int, default=None)
    parser.add_argument("--config", type=Path, default=ROOT.parent / "configs" / "cartpole.yaml")
    parser.add_argument("--note", default="", help="free text stored with the results")
    args = parser.parse_args()

    overrides = {} if args.total_timesteps is None else {"total_timesteps": args.total_timesteps}
    config = pjp.PPOConfig.from_yaml(args.config, **overrides)
    device = jax.devices()[0].platform
    load_before = os.getloadavg()
    rows = []
    for agents in args.agents:
        modes = [None, *args.every]
        built = {}
        for every in modes:
            sink: list = []
            compiled, arg, compile_s = build(config, agents, every, sink)
            built[every] = (compiled, arg, compile_s, sink)
        times = {every: [] for every in modes}
        cpu = {every: [] for every in modes}
        for _ in range(args.repeats):
            for every in modes:
                compiled, arg, _, sink = built[every]
                sink.clear()
                start, start_cpu = time.perf_counter(), cpu_seconds()
                jax.block_until_ready(compiled(arg))
                jax.effects_barrier()
                times[every].append(time.perf_counter() - start)
                cpu[every].append(cpu_seconds() - start_cpu)
                if every is not None:
                    expected = agents * (config.num_updates // every)
                    assert len(sink) == expected, (len(sink), expected)
        base, base_cpu = min(times[None]), min(cpu[None])
        for every in modes:
            best = min(times[every])
            rows.append(
                {
                    "agents": agents,
                    "callback_every": every,
                    "compile_s": round(built[every][2], 2),
                    "run_s": round(best, 3),
                    "run_s_all": [round(t, 3) for t in times[every]],
                    "overhead": round(best / base - 1.0, 4),
                    "cpu_s": round(min(cpu[every]), 3),
                    "cpu_s_all": [round(t, 3) for t in cpu[every]],
                    "cpu_overhead": round(min(cpu[every]) / base_cpu - 1.0, 4),
                    "calls": 0 if every is None else agents * (config.num_updates // every),
                    "env_steps_per_s": round(
                        agents * config.num_updates * config.batch_size / best
                    ),
                }
            )
            print(json.dumps(rows[-1]), flush=True)

    videos = []
    if args.video_freq:
        import tempfile

        from purejaxppo.drivers.single import train_and_log

        times = {0: [], args.video_freq: []}
        for repeat in range(args.repeats + 1):  # the first round compiles
            for freq in times:
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.perf_counter()
                    train_and_log(config.replace(video_freq=freq), tmp, progress=False, plot=False)
                    if repeat:
                        times[freq].append(time.perf_counter() - start)
        for freq, runs in times.items():
            videos.append(
                {
                    "video_freq": freq,
                    "videos": config.num_updates // freq if freq else 0,
                    "train_and_log_s": round(min(runs), 2),
                    "runs_s": [round(t, 2) for t in runs],
                }
            )
            print(json.dumps(videos[-1]), flush=True)

    print()
    print(
        f"| agents | callback | compile s | run s (best of {args.repeats}) | overhead | "
        "CPU s (best) | CPU overhead | host calls |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        every = "none" if row["callback_every"] is None else f"k={row['callback_every']}"
        print(
            f"| {row['agents']} | {every} | {row['compile_s']:.1f} | {row['run_s']:.2f} | "
            f"{100 * row['overhead']:+.1f}% | {row['cpu_s']:.2f} | "
            f"{100 * row['cpu_overhead']:+.1f}% | {row['calls']} |"
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / "results" / f"callback-overhead-{device}-{stamp}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "rows": rows,
                "video_rows": videos,
                "config": config.to_dict(),
                "num_updates": config.num_updates,
                "device": str(jax.devices()[0]),
                "cpu_count": os.cpu_count(),
                "machine": platform.machine(),
                "jax": jax.__version__,
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "note": args.note,
            },
            indent=1,
        )
    )
    for row in videos:
        print(f"video_freq={row['video_freq']}: {row['videos']} videos, {row['train_and_log_s']} s")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
