"""CleanRL's tuner (`cleanrl_utils.tuner.Tuner`, cleanrl 1.2.0) on one script: the peer of
`purejaxppo tune` in `benchmarks/tune_throughput.py`, run by that script from the
repository root with the interpreter of a virtualenv that has cleanrl, optuna, torch and
tensorboard:

    cleanrl-venv/bin/python -m benchmarks.peers.cleanrl_tuner --space SPACE_JSON \
        --trials 8 --fixed total-timesteps=100000 [--script PATH] [--workdir DIR] \
        [--timeout SECONDS]

`--space`: a JSON list of `[flag, low, high, log]`, one per searched field
(`["learning-rate", 0.0001, 0.01, true]`), sampled with `trial.suggest_float`; `--fixed
KEY=VALUE` (repeatable): flags passed unchanged to every trial. `--script`: the trained
script, a path or a file name in the installed `cleanrl` package (default `ppo.py`;
`ppo_continuous_action.py` for a continuous task). The Tuner runs each trial's script in
this process with `runpy` and reads `charts/episodic_return` from `runs/<run_name>` under
`--workdir` (made the working directory). Optuna's TPE sampler, no pruner, one seed per
trial. `--timeout`: start no trial after that many seconds (Optuna's `timeout`, through
`benchmarks.peers.optuna_budget`; the running trial finishes). The last stdout line is a JSON object: `best_value`, `best_params`, `values`
(every trial's, in trial order) and `wall_s`.

Imports neither purejaxppo nor JAX.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

from benchmarks.harness import portable

#: The Tuner writes its trial flags from `sys.argv[0]` on, and runpy replaces `sys.argv[0]`
#: with the script's path while the script runs: the first flag never reaches the script. This placeholder takes that place (ppo.py's own default exp-name).
PLACEHOLDER = ("exp-name", "ppo")


def params_fn_for(space: list, fixed: dict):
    """Optuna's `params_fn` for the Tuner: the placeholder, the sampled flags of `space`
    (`[flag, low, high, log]`), then `fixed`."""

    def params_fn(trial) -> dict:
        params = {PLACEHOLDER[0]: PLACEHOLDER[1]}
        for flag, low, high, log in space:
            params[flag] = trial.suggest_float(flag, low, high, log=bool(log))
        params.update(fixed)
        return params

    return params_fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", required=True, help="JSON list of [flag, low, high, log]")
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--fixed", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--script", default="ppo.py", help="path, or file in cleanrl/")
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--window", type=int, default=50, help="metric_last_n_average_window")
    parser.add_argument("--sampler-seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path.cwd())
    parser.add_argument("--timeout", type=float, default=None, help="seconds (Optuna's)")
    args = parser.parse_args()

    start = time.perf_counter()
    import optuna
    from cleanrl_utils.tuner import Tuner

    if args.timeout is not None:
        from benchmarks.peers.optuna_budget import limit_optimize

        limit_optimize(args.timeout)
    script = Path(args.script)
    if script.parent == Path("."):  # a file of the installed cleanrl package
        script = Path(importlib.util.find_spec("cleanrl").submodule_search_locations[0]) / script
    fixed = dict(item.split("=", 1) for item in args.fixed)
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(args.workdir)
    storage = f"sqlite:///{args.workdir.resolve() / 'cleanrl_hpopt.db'}"
    tuner = Tuner(
        script=str(Path(script).resolve()),
        metric="charts/episodic_return",
        target_scores={args.env_id: None},
        params_fn=params_fn_for(json.loads(args.space), fixed),
        direction="maximize",
        aggregation_type="average",
        metric_last_n_average_window=args.window,
        sampler=optuna.samplers.TPESampler(seed=args.sampler_seed),
        pruner=None,
        storage=storage,
        study_name="throughput",
    )
    best = tuner.tune(num_trials=args.trials, num_seeds=1)
    study = optuna.load_study(study_name="throughput", storage=storage)
    values = [t.value for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    record = {
        "best_value": best.value,
        "best_params": best.params,
        "values": values,
        "script": portable(script),
        "wall_s": time.perf_counter() - start,
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
