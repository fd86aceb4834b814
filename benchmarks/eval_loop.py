"""Seconds of greedy evaluation per report of `tune --objective eval_return`: the episode
loop that stops when the last episode ends, against the fixed scan of `max_steps`.

For each task, `tune`'s lanes (`drivers.tune.lanes.LaneGroup`: `--lanes` of the task's
config, seeds 0..L-1, the config's own hyperparameters) train `--updates` updates, and
then every lane plays `--episodes` greedy episodes as `tune`'s evaluator does: JAX envs
with the lanes vmapped in one program, EnvPool one lane after another. Both loops play
the same episodes from the same keys (`acting.episodes.make_play`, `until_ended` on and
off); the table gives the seconds of each (the best of `--rounds`, compiled first), the
ratio, the mean return of each (equal: the loop skips only inactive steps) and the mean
and longest episode.

    python -m benchmarks.eval_loop
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.harness import RESULTS, ROOT, machine, markdown_table, write_text

#: name -> (config, env id or None for the config's own, total env steps of a trial)
TASKS = {
    "hopper": ("configs/mujoco.yaml", "envpool:Hopper-v4", 51_200),
    "acrobot": ("configs/acrobot.yaml", None, 51_200),
}


def episode_loops(config, networks, episodes: int, until_ended: bool):
    """`run(params, key) -> (returns [E], lengths [E])`, greedy, jitted: the evaluation's
    loop with `until_ended` as given."""
    from purejaxppo.acting.episodes import make_play
    from purejaxppo.envs import make_env
    from purejaxppo.envs.spaces import episode_limit
    from purejaxppo.kinds import resolve_acting

    env, env_params = make_env(config.env_name, config.env_kwargs)
    setup = resolve_acting("eval", env, env_params, networks)
    max_steps = episode_limit(env, env_params)
    start, play = make_play(
        setup.rows, networks, setup.episodes, lambda s: None, until_ended=until_ended
    )

    def run(params, key):
        carry, scan_key = start(key, episodes)
        carry = play(params, carry, jax.random.split(scan_key, max_steps), jnp.float32(0.0))[0]
        return setup.rows.team_reward(carry.returns), carry.lengths

    return jax.jit(run)


def measure(task: str, lanes: int, updates: int, episodes: int, rounds: int) -> dict:
    """One task's row (module docstring)."""
    from purejaxppo import PPOConfig
    from purejaxppo.drivers import warm
    from purejaxppo.drivers.tune.evaluation import eval_key
    from purejaxppo.drivers.tune.lanes import Lane, LaneGroup
    from purejaxppo.train_setup import prepare

    path, env_name, steps = TASKS[task]
    config = PPOConfig.from_yaml(ROOT / path, total_timesteps=steps)
    if env_name:
        config = dataclasses.replace(config, env_name=env_name)
    group = LaneGroup(config, lanes, config.num_updates // updates, "episode_return")
    group.place({i: Lane(trial=None, config=config, seed=i) for i in range(lanes)})
    group.run_segment()
    params = group.runner.train_state.params
    networks = prepare(warm.program_config(config)).networks  # the lanes' networks
    keys = jnp.stack([eval_key(seed, group.segment) for seed in range(lanes)])
    row = {"task": task, "env": config.env_name, "lanes": lanes, "episodes": episodes}
    for name, until_ended in (("scan", False), ("until_ended", True)):
        run = episode_loops(config, networks, episodes, until_ended)
        if group.host:  # one lane after another, as tune's evaluator

            def play(run=run):
                lane = lambda i: jax.tree.map(lambda x: x[i], params)  # noqa: E731
                outs = [run(lane(i), keys[i]) for i in range(lanes)]
                return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)
        else:
            batched = jax.jit(jax.vmap(run))
            play = lambda batched=batched: jax.device_get(batched(params, keys))  # noqa: E731
        returns, lengths = play()  # compiles
        seconds = []
        for _ in range(rounds):
            begin = time.perf_counter()
            returns, lengths = play()
            seconds.append(time.perf_counter() - begin)
        row[f"{name}_s"] = round(min(seconds), 3)
        row[f"{name}_mean_return"] = float(np.mean(returns))
        row["mean_length"], row["longest"] = float(np.mean(lengths)), int(np.max(lengths))
    row["speedup"] = round(row["scan_s"] / row["until_ended_s"], 2)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--lanes", type=int, default=16, help="tune's 8 trials x 2 seeds")
    parser.add_argument("--updates", type=int, default=5, help="updates trained first")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="results file (default: results/...)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    rows = [measure(t, args.lanes, args.updates, args.episodes, args.rounds) for t in args.tasks]
    print("\n".join(markdown_table(rows, list(rows[0]), ".2f")))
    record = {
        "command": " ".join(["python -m benchmarks.eval_loop", *argv]),
        "rows": rows,
        "machine": machine(("purejaxppo", "jax", "jaxlib")),
    }
    path = args.json or RESULTS / f"eval-loop-cpu-{time.strftime('%Y%m%d')}.json"
    write_text(path, json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
