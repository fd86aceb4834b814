"""`tune` / `purejaxppo tune`: lanes train what Optuna asked, pruned lanes take new
trials, best.yaml reruns bitwise, a killed or stopped tune resumes without losing a
trial, two workers share one SQLite study, and bad input is refused in one line."""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optuna
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.cli.values import load_config
from purejaxppo.drivers.tune import check_tune
from purejaxppo.drivers.tune import storage as storages
from purejaxppo.drivers.tune import study as studies
from purejaxppo.drivers.tune.lanes import LaneGroup
from purejaxppo.drivers.tune.objective import Objective
from purejaxppo.drivers.tune.space import TUNE_EXTRA

REPO = Path(__file__).resolve().parents[1]
CLI = "import sys; from purejaxppo.cli import main; sys.exit(main())"
States = optuna.trial.TrialState

# 12 updates of 4 envs x 8 steps; 4 reports per trial -> segments of 3 updates (96 steps).
CONFIG = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=4 * 8 * 12)
SEARCH = {"learning_rate": ("log_uniform", 1e-4, 1e-2), "ent_coef": ("uniform", 0.0, 0.02)}
# The subprocess tests: 48 updates a trial in 8 segments, 2 lanes, 8 trials. Learning
# rates up to 1e-3 keep CartPole's episodes short enough that one ends in the objective's
# window (the last 5 updates, 40 steps per env): 256 of 256 sampled trials had one. Up to
# 1e-2, about 1 in 64 balanced the pole through the window and failed with "no episode
# ended in the objective's window", a real outcome the tests below tell apart.
TINY_SEARCH = ("log_uniform", 1e-4, 1e-3)
TINY = [
    *("--num-envs", "4", "--num-steps", "8", "--hidden-sizes", "8"),
    *("--total-timesteps", str(4 * 8 * 48)),
    *("--search", "learning_rate=" + ":".join(map(str, TINY_SEARCH))),
    *("--sampler", "random", "--pruner", "none", "--reports", "8", "--batch", "2"),
    *("--trials", "8", "--no-progress"),
]


class PruneNumbers(optuna.pruners.BasePruner):
    """Prunes the trials whose numbers it holds, at their first check."""

    def __init__(self, numbers):
        self.numbers = set(numbers)

    def prune(self, study, trial):
        return trial.number in self.numbers


def lane_state(group):
    """Every lane's train state (params and optimizer state) as one float64 row."""
    leaves = jax.tree.leaves(group.runner.train_state)
    return np.concatenate([np.asarray(x, np.float64).reshape(group.width, -1) for x in leaves], 1)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """6 trials in 4 lanes; trial 1 pruned at its first check. Every segment's lanes
    (trial numbers, hyperparameters, update steps, train states before and after) are
    recorded."""
    out = tmp_path_factory.mktemp("tune")
    segments = []
    run_segment = LaneGroup.run_segment

    def spy(group):
        record = {
            "trials": [None if lane is None else lane.trial.number for lane in group.lanes],
            "hparams": {name: value.copy() for name, value in group.hparams.items()},
            "update_step": np.asarray(group.runner.update_step),
            "before": lane_state(group),
        }
        fetched = run_segment(group)
        segments.append({**record, "after": lane_state(group)})
        return fetched

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LaneGroup, "run_segment", spy)
        result = pjp.tune(
            CONFIG,
            SEARCH,
            trials=6,
            batch=4,
            reports=4,
            sampler="random",
            pruner=PruneNumbers({1}),
            out=out,
            progress=False,
            enqueue_base=False,  # every trial sampled (the golden lanes below)
        )
    return result, segments, out


def test_lanes_train_the_parameters_optuna_asked(tuned):
    result, segments, _ = tuned
    trials = result.study.trials
    base = pjp.Hyperparams.from_config(CONFIG)
    for record in segments:
        for lane, number in enumerate(record["trials"]):
            if number is None:
                continue
            for name, values in record["hparams"].items():
                want = trials[number].params.get(name, np.asarray(getattr(base, name)))
                np.testing.assert_array_equal(values[lane], np.float32(want), (number, name))
            assert trials[number].user_attrs["seed"] == number  # config.seed 0 + n
    # each trial trains in one lane, for 12 updates = 4 segments (the pruned one: 1)
    lanes = {}
    for record in segments:
        for lane, number in enumerate(record["trials"]):
            if number is not None:
                lanes.setdefault(number, set()).add(lane)
    assert lanes == {0: {0}, 1: {1}, 2: {2}, 3: {3}, 4: {1}, 5: {0}}
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED", *["COMPLETE"] * 4]
    assert {t.user_attrs["updates"] for t in trials if t.state == States.COMPLETE} == {12}


def test_a_pruned_lane_takes_a_new_trial_at_once_and_the_others_go_on(tuned):
    result, segments, _ = tuned
    assert [r["trials"] for r in segments] == [
        [0, 1, 2, 3],
        *[[0, 4, 2, 3]] * 3,  # trial 1 pruned after segment 1: lane 1 takes trial 4
        [5, 4, None, None],  # 0, 2, 3 done; the budget (6 trials) leaves one more
        *[[5, None, None, None]] * 3,
    ]
    assert result.study.trials[1].intermediate_values.keys() == {96}  # 3 updates x 32 steps
    # the refilled lane starts from update 0 with a fresh state; the others go on
    np.testing.assert_array_equal(segments[1]["update_step"], [3, 0, 3, 3])
    np.testing.assert_array_equal(segments[4]["update_step"], [0, 9, 12, 12])
    for previous, record in zip(segments, segments[1:], strict=False):
        for lane, number in enumerate(record["trials"]):
            same = number is not None and number == previous["trials"][lane]
            changed = not np.array_equal(record["before"][lane], previous["after"][lane])
            assert changed != same or number is None, (lane, number)


def test_best_yaml_and_every_trial_rerun_bitwise_through_make_train(tuned):
    result, _, out = tuned
    study = result.study
    best = study.best_trial
    config = load_config(out / "best.yaml", {})  # what `purejaxppo train --config` reads
    assert config == CONFIG.replace(**best.params, seed=best.number)
    assert config == result.best_config
    complete = [t for t in study.trials if t.state == States.COMPLETE]
    keys = jnp.stack([jax.random.key(t.user_attrs["seed"]) for t in complete])
    hparams = pjp.Hyperparams.stack(
        [pjp.Hyperparams.from_config(CONFIG.replace(**t.params)) for t in complete]
    )
    row = complete.index(best)  # best.yaml's hyperparameters are the best lane's
    for name, leaf in vars(pjp.Hyperparams.from_config(config)).items():
        np.testing.assert_array_equal(leaf, np.asarray(getattr(hparams, name))[row], name)
    metrics = jax.jit(jax.vmap(pjp.make_train(CONFIG)))(keys, hparams).metrics
    objective = Objective()
    for row, trial in enumerate(complete):
        values = np.asarray(metrics["episode_return"][row])
        counts = np.asarray(metrics["episode_count"][row])
        assert objective.value(values, counts, 12) == trial.value  # bitwise
        for step, value in trial.intermediate_values.items():
            done = step // 32
            assert objective.value(values[:done], counts[:done], 12) == value
    assert (out / "trials.csv").read_text().count("\n") == 7  # header + 6 trials
    for name in ("optimization_history.png", "parallel_coordinate.png", "param_importances.png"):
        assert (out / name).stat().st_size > 1000


def run_cli(args, capsys):
    """(exit code, stderr lines) of `purejaxppo ARGS` in this process."""
    try:
        code = main(args)
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.fixture(scope="module")
def stored_study(tmp_path_factory):
    """An SQLite storage holding the study 'tune' of another search space."""
    url = f"sqlite:///{tmp_path_factory.mktemp('storage') / 'study.db'}"
    request = check_tune(CONFIG, {"ent_coef": ("uniform", 0.0, 0.1)}, trials=1, batch=1).request
    storage = studies.open_storage(url)
    studies.open_study(storage, "tune", request, resume=False, sampler=None, pruner=None)
    return url


@pytest.mark.parametrize(
    "args, message",
    [
        (["--search", "learnig_rate=uniform:0:1"], "unknown config field 'learnig_rate'; did"),
        (["--search", "learning_rate=uniform:0.01:0.001"], "needs low <= high"),
        (["--search", "learning_rate=log_uniform:0:0.1"], "needs 0 < low <= high"),
        (["--search", "num_envs=uniform:2:8"], "num_envs is static (each value compiles"),
        (["--search", "hidden_sizes=choice:64-x,32"], "'64-x' is not a list of sizes"),
        (["--search", "gamma=uniform:0.5:1.5"], "search['gamma'] value 1.5: gamma"),
        (["--search", "seed=int_uniform:0:9"], "field 'seed' cannot be swept"),
        (["--search", "learning_rate=beta:1:2"], "unknown distribution 'beta'"),
        (["--trials", "0"], "trials=0: must be an integer >= 1"),
        (["--batch", "0"], "batch=0: must be an integer >= 1"),
        (["--objective", "reward"], "unknown metric 'reward'"),
        (["--objective", "episode_return:2"], "must be a fraction of the updates in (0, 1]"),
        (["--sampler", "grid"], "sampler='grid': must be one of tpe, cmaes, random, qmc"),
        (["--pruner", "patient"], "pruner='patient': must be one of median, halving"),
        (["--storage", "sqlite:////nonexistent/dir/s.db"], "no directory /nonexistent/dir"),
        (["--storage", "postgresql://me@127.0.0.1:1/db"], "'postgresql://me@127.0.0.1:1/db':"),
        (["--storage", "STORED"], "already exists: pass --resume to continue or join it"),
        (["--storage", "STORED", "--resume"], "searches {'ent_coef': ['uniform', 0.0, 0.1]}"),
        (["--storage", "sqlite:///:memory:"], "storage 'sqlite:///:memory:' is in memory: its"),
        (["--storage", "sqlite://"], "storage 'sqlite://' is in memory: its study would end"),
        (["--storage", "postgresql://me:hunter2@127.0.0.1:1/db"], "'postgresql://me:***@127"),
        # every value of a static range is built: 4 envs x 128 steps = 512 transitions,
        # which 1, 2, 4, 8, 16, 32 and 64 minibatches divide and 3, 5, 6, ... do not
        (
            ["--search", "num_minibatches=int_uniform:1:70"],
            "search['num_minibatches']=('int_uniform', 1, 70): the config refuses 63 of its "
            "70 values (3, 5, 6, 7, 9, 10, 11, 12, ... (63 in all); num_minibatches=3: must",
        ),
        (["--search", "num_minibatches=int_uniform:1:70"], "; search it with choice:1,2,4,8,16"),
        (["--search", "num_envs=int_uniform:1:5000"], "5000 values of the static field num_envs"),
        (
            ["--batch", "100000000", "--trials", "100000000"],
            "batch=100000000: 100000000 trials at once need about",
        ),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_is_made(
    args, message, tmp_path, capsys, stored_study
):
    out = tmp_path / "out"
    argv = ["tune", "--out", str(out), *[stored_study if a == "STORED" else a for a in args]]
    if "--search" not in args:
        argv += ["--search", "learning_rate=log_uniform:1e-4:1e-2"]
    if "--trials" not in args:
        argv += ["--trials", "4"]
    code, lines = run_cli(argv, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("purejaxppo: error: ") and message in lines[0], lines[0]
    assert "hunter2" not in lines[0]
    assert not out.exists()


def test_no_search_is_refused_naming_a_field_and_the_default_space(tmp_path, capsys):
    code, lines = run_cli(["tune", "--out", str(tmp_path / "out"), "--trials", "4"], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert "--search learning_rate=log_uniform:1e-4:1e-2" in lines[0], lines[0]
    assert "or 'ppo-default' for RL Zoo's PPO space (CLI: --search ppo-default)" in lines[0]


def test_password_hidden_on_disk_and_given_back(monkeypatch):
    url = "postgresql://tuner:p%40ss%3Aw@db.example.org:5432/optuna"  # "p@ss:w", quoted
    hidden = storages.hidden_url(url)
    assert hidden == "postgresql://tuner:***@db.example.org:5432/optuna"
    assert storages.password_hidden(hidden) and not storages.password_hidden(url)
    for plain in ("sqlite:////tmp/a b/study.db", "postgresql://tuner@host/db", "not a url"):
        assert storages.hidden_url(plain) == plain and not storages.password_hidden(plain)
    env = {storages.PASSWORD_ENV: "p@ss:w"}
    assert storages.with_password(hidden, None, env) == url  # quoted back as it was
    assert storages.with_password(hidden, url, {}) == url
    assert storages.with_password(hidden, url, {storages.PASSWORD_ENV: "other"}) == url
    assert storages.with_password("sqlite:////tmp/s.db", None, {}) == "sqlite:////tmp/s.db"
    with pytest.raises(ValueError, match="needs its password.*PUREJAXPPO_STORAGE_PASSWORD"):
        storages.with_password(hidden, None, {})
    with pytest.raises(ValueError, match=r"--storage 'postgresql://tuner:\*\*\*@elsewhere/optuna'"):
        storages.with_password(hidden, "postgresql://tuner:x@elsewhere/optuna", env)


@pytest.mark.parametrize("trials", [3, 0])
def test_a_study_tune_did_not_create_is_refused(trials, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(studies, "RECORD_WAIT_SECONDS", 0.5)
    url = f"sqlite:///{tmp_path / 'other.db'}"
    foreign = optuna.create_study(storage=url, study_name="tune", direction="maximize")
    foreign.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=trials)
    message = (
        f"study 'tune' in {url} was not made by purejaxppo tune (no 'purejaxppo' record of "
        f"what it tunes; {trials} trial(s)): tune does not write into it"
    )
    out = tmp_path / "out"
    argv = ["tune", "--search", "learning_rate=log_uniform:1e-4:1e-2", "--trials", "4"]
    code, lines = run_cli([*argv, "--storage", url, "--resume", "--out", str(out)], capsys)
    assert code == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "other.db.lock").exists()  # the refusal leaves nothing beside it
    with pytest.raises(ValueError, match="was not made by purejaxppo tune"):
        pjp.tune(CONFIG, SEARCH, trials=2, storage=url, resume=True, progress=False)
    request = check_tune(CONFIG, SEARCH, trials=2, batch=1).request
    with pytest.raises(ValueError, match="was not made by purejaxppo tune"):  # past check_tune
        studies.open_study(
            studies.open_storage(url), "tune", request, resume=True, sampler=None, pruner=None
        )
    again = optuna.load_study(study_name="tune", storage=url)
    assert len(again.trials) == trials and again.user_attrs == {} and not out.exists()


TINY_ONE = [*TINY[: TINY.index("--trials")], "--trials", "1", "--no-progress"]


def test_resume_never_starts_a_new_study_over_results_and_overwrite_replaces(
    tmp_path, capsys, monkeypatch
):
    out = tmp_path / "tune"
    code, _ = run_cli(["tune", *TINY_ONE, "--out", str(out)], capsys)
    assert code == 0
    results = {n: (out / n).read_bytes() for n in ("trials.csv", "best.yaml", "request.yaml")}
    (out / "study.db").rename(tmp_path / "moved.db")
    gone = f"{out}: no study 'tune' in sqlite:///{out / 'study.db'} (deleted, renamed or moved?)"
    code, lines = run_cli(["tune", "--resume", str(out)], capsys)
    assert code == 2 and len(lines) == 1 and gone in lines[0], lines
    with pytest.raises(ValueError, match="tune does not start a new study over its results"):
        pjp.tune(CONFIG, SEARCH, trials=1, out=out, resume=True, progress=False)
    assert not (out / "study.db").exists()
    assert {n: (out / n).read_bytes() for n in results} == results
    # the study back in its place: --resume continues it (nothing left to run)
    (tmp_path / "moved.db").rename(out / "study.db")
    code, _ = run_cli(["tune", "--resume", str(out)], capsys)
    assert code == 0
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{out / 'study.db'}")
    assert len(study.trials) == 1
    # --overwrite replaces tune's own folder (its study included): a new study of 2 trials
    argv = [*TINY_ONE[:-3], "--trials", "2", "--no-progress", "--out", str(out), "--overwrite"]
    code, lines = run_cli(["tune", *argv], capsys)
    assert code == 0, lines
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{out / 'study.db'}")
    assert len(study.trials) == 2 and (out / "trials.csv").read_text().count("\n") == 3
    # a recorded server URL hides its password; --resume asks for it in one line
    request = (out / "request.yaml").read_text()
    (out / "request.yaml").write_text(
        request.replace("storage: null", "storage: postgresql://tuner:***@127.0.0.1:1/optuna")
    )
    monkeypatch.delenv(storages.PASSWORD_ENV, raising=False)
    code, lines = run_cli(["tune", "--resume", str(out)], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert "needs its password" in lines[0] and storages.PASSWORD_ENV in lines[0], lines
    monkeypatch.setenv(storages.PASSWORD_ENV, "s3cret")  # given: the server is tried
    code, lines = run_cli(["tune", "--resume", str(out)], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert "'postgresql://tuner:***@127.0.0.1:1/optuna': cannot connect" in lines[0], lines
    assert "s3cret" not in lines[0]
    monkeypatch.delenv(storages.PASSWORD_ENV)
    given = ["--storage", "postgresql://tuner:s3cret@127.0.0.1:1/optuna"]  # the same storage
    code, lines = run_cli(["tune", "--resume", str(out), *given], capsys)
    assert code == 2 and len(lines) == 1 and "@127.0.0.1:1/optuna': cannot connect" in lines[0]
    assert "s3cret" not in lines[0]
    other = ["--storage", "postgresql://tuner:s3cret@elsewhere/optuna"]
    code, lines = run_cli(["tune", "--resume", str(out), *other], capsys)
    assert code == 2 and len(lines) == 1 and "is not the recorded storage" in lines[0], lines


def test_without_optuna_tune_names_its_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'purejaxppo\[tune\]'"):
        pjp.tune(CONFIG, SEARCH, trials=2)
    argv = ["tune", "--search", "ent_coef=uniform:0:0.1", "--trials", "2"]
    code, lines = run_cli([*argv, "--out", str(tmp_path / "out")], capsys)
    assert (code, lines) == (2, ["purejaxppo: error: tune needs Optuna: " + TUNE_EXTRA])


@pytest.fixture(scope="module")
def cli_env():
    """The subprocesses' environment: this checkout (the run's compile cache, see
    conftest.py)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def start(args, env):
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "tune", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def trial_states(db):
    """{trial number: (state name, intermediate values reported)} read from the SQLite
    file in one query (empty before it exists)."""
    if not db.exists():
        return {}
    query = (
        "SELECT t.number, t.state, COUNT(v.trial_id) FROM trials t LEFT JOIN "
        "trial_intermediate_values v ON v.trial_id = t.trial_id GROUP BY t.trial_id"
    )
    with sqlite3.connect(db, timeout=30) as connection:
        try:
            rows = connection.execute(query).fetchall()
        except sqlite3.OperationalError:  # the tables are being created
            return {}
    return {number: (state, reports) for number, state, reports in rows}


def mid_trial(db, complete):
    """Whether the study holds more than `complete` complete trials and a running one
    that has reported 1 to 4 of its 8 values (a signal now finds it still running)."""
    states = trial_states(db).values()
    done = sum(state == "COMPLETE" for state, _ in states)
    return done > complete and any(s == "RUNNING" and 1 <= n <= 4 for s, n in states)


def finished_outcome(trial):
    """Whether `trial` ended for good: complete, or failed by its own training (diverged,
    or no episode ended in the objective's window), not failed to be re-queued."""
    reason = {"failed", "diverged"} & set(trial.user_attrs)
    return trial.state == States.COMPLETE or (trial.state == States.FAIL and bool(reason))


def wait_until(condition, process, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            out, err = process.communicate(timeout=30)
            pytest.fail(f"exited {process.returncode} before the condition:\n{out}\n{err}")
        time.sleep(0.01)


def test_killed_then_stopped_tune_resumes_with_no_finished_trial_lost(tmp_path, cli_env):
    out, db = tmp_path / "tune", tmp_path / "tune" / "study.db"

    def complete():
        return sorted(n for n, (s, _) in trial_states(db).items() if s == "COMPLETE")

    first = start([*TINY, "--out", str(out)], cli_env)
    wait_until(lambda: mid_trial(db, 0), first)
    first.kill()  # SIGKILL: its running trials stay RUNNING in the study
    first.communicate(timeout=60)
    killed = complete()
    assert first.returncode == -signal.SIGKILL and 1 <= len(killed) < 8
    assert "RUNNING" in {s for s, _ in trial_states(db).values()}

    second = start(["--resume", str(out), "--no-progress"], cli_env)
    wait_until(lambda: mid_trial(db, len(killed)), second)
    second.send_signal(signal.SIGTERM)  # the running segment ends, its trials re-queued
    _, err = second.communicate(timeout=120)
    assert second.returncode == 143, err
    lines = err.strip().splitlines()
    assert "0 running" not in lines[-2] and "trial(s) re-queued" in lines[-2], err
    finished = f"with {len(complete())} trial(s) of the study finished, all kept in it; "
    assert lines[-1] == f"purejaxppo: tune: stopped by SIGTERM {finished}" + (
        f"continue with purejaxppo tune --resume {out}"
    ), err
    stopped = complete()
    assert {s for s, _ in trial_states(db).values()} == {"COMPLETE", "FAIL", "WAITING"}

    third = subprocess.run(
        [sys.executable, "-c", CLI, "tune", "--resume", str(out), "--no-progress"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert third.returncode == 0, third.stderr
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{db}")
    trials = study.get_trials()
    ended = {t.number for t in trials if finished_outcome(t)}
    values = {t.number: t.value for t in trials if t.state == States.COMPLETE}
    assert len(ended) == 8 and set(stopped) <= set(values) and set(killed) <= set(stopped)
    failed = [t for t in trials if t.state == States.FAIL and not finished_outcome(t)]
    assert failed  # the killed and the stopped process's running trials
    for trial in failed:  # each was re-queued once, and its copy ran to the end
        copies = [
            t for t in trials if t.system_attrs.get("retry_history", [None])[-1] == trial.number
        ]
        assert len(copies) == 1 and copies[0].params == trial.params
    assert sum(t.state == States.RUNNING or t.state == States.WAITING for t in trials) == 0
    assert (out / "best.yaml").is_file() and (out / "trials.csv").is_file()


def test_two_workers_started_together_share_one_new_sqlite_study(tmp_path, cli_env):
    # Neither the file nor the study exists: the workers create the tables one at a time
    # (a file lock), one creates the study and the other joins it.
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    workers = [
        start([*TINY, "--storage", url, "--out", str(tmp_path / name), "--resume"], cli_env)
        for name in ("a", "b")
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
    trials = optuna.load_study(study_name="tune", storage=url).get_trials()
    assert len(trials) == 8 and all(map(finished_outcome, trials))  # none run twice
    pids = {t.user_attrs["worker"]["pid"] for t in trials}
    assert pids == {worker.pid for worker in workers}  # both took trials
    # the joining worker's sampler has its own seed: no setting is drawn twice
    assert len({t.params["learning_rate"] for t in trials}) == 8


def test_every_named_sampler_is_built_seeded():
    import optuna

    from purejaxppo.drivers.tune.study import make_sampler

    kinds = {
        "tpe": optuna.samplers.TPESampler,
        "cmaes": optuna.samplers.CmaEsSampler,  # the cmaes package comes with [tune]
        "random": optuna.samplers.RandomSampler,
        "qmc": optuna.samplers.QMCSampler,
    }
    for name, kind in kinds.items():
        assert isinstance(make_sampler(name, seed=3), kind)
    own = optuna.samplers.RandomSampler(seed=1)
    assert make_sampler(own, seed=3) is own


class InOrder(optuna.samplers.RandomSampler):
    """Trial n takes choice n mod len(choices) of every categorical field (the others:
    random)."""

    def sample_independent(self, study, trial, name, distribution):
        choices = getattr(distribution, "choices", None)
        if choices is None:
            return super().sample_independent(study, trial, name, distribution)
        return choices[trial.number % len(choices)]


def test_a_refused_trial_fails_with_its_reason_and_the_study_goes_on(monkeypatch, capsys):
    # The checks before the start skipped (as for a combination of static fields beyond
    # MAX_CHECKED_COMBINATIONS): 3 minibatches do not divide 4 envs x 8 steps = 32.
    from purejaxppo.drivers.tune import scheduler
    from purejaxppo.drivers.tune import space as spaces

    monkeypatch.setattr(spaces, "_refuse_values", lambda *args: None)
    widths = []

    class Spy(LaneGroup):
        def __init__(self, config, width, *args):
            widths.append(width)
            super().__init__(config, width, *args)

    monkeypatch.setattr(scheduler, "LaneGroup", Spy)
    search = {"num_minibatches": ("choice", [1, 3]), "learning_rate": SEARCH["learning_rate"]}
    result = pjp.tune(CONFIG, search, trials=2, batch=8, sampler=InOrder(), progress=False)
    trials = result.study.get_trials()
    assert [t.params["num_minibatches"] for t in trials] == [1, 3]
    assert trials[0].state == States.COMPLETE and np.isfinite(trials[0].value)
    assert trials[1].state == States.FAIL and "refused" in trials[1].user_attrs
    assert "num_minibatches=3" in trials[1].user_attrs["refused"]
    said = f"tune: trial 1 refused: {trials[1].user_attrs['refused']}\n"
    assert said in capsys.readouterr().err
    assert widths == [2]  # --batch 8 clamped to the 2 trials left: 2 lanes, not 8


def test_stop_before_any_trial_finished_says_nothing_is_lost(tmp_path, cli_env):
    out, db = tmp_path / "tune", tmp_path / "tune" / "study.db"
    process = start([*TINY, "--out", str(out)], cli_env)
    wait_until(lambda: any(s == "RUNNING" for s, _ in trial_states(db).values()), process)
    process.send_signal(signal.SIGTERM)  # during the first segment's compile
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert err.strip().splitlines()[-1] == (
        "purejaxppo: tune: stopped by SIGTERM before any trial finished; nothing lost: "
        f"continue with purejaxppo tune --resume {out}"
    ), err
    assert not any(s == "COMPLETE" for s, _ in trial_states(db).values())
    assert (out / "trials.csv").is_file() and "Traceback" not in err


def test_signals_while_the_outputs_are_written_leave_whole_files(tmp_path, monkeypatch):
    from purejaxppo.drivers.tune import driver, outputs
    from purejaxppo.drivers.tune.space import parse_space
    from purejaxppo.signals import StopNow

    study = optuna.create_study(direction="maximize")
    for number, value in enumerate([1.0, 3.0, 2.0, 0.5]):
        lr, ent = 1e-3 * (number + 1), 0.001 * number
        trial = optuna.trial.create_trial(
            params={"learning_rate": lr, "ent_coef": ent},
            distributions=parse_space(SEARCH, CONFIG).distributions(),
            value=value,
            user_attrs={"seed": number},
        )
        study.add_trial(trial)
    space = parse_space(SEARCH, CONFIG)
    atomic = outputs.write_atomic
    signals = []

    def signalled(path, write):  # SIGTERM(s) once the first figure is half written
        def write_then_signal(partial):
            write(partial)
            for _ in range(signals.pop() if path.suffix == ".png" and signals else 0):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)

        atomic(path, write_then_signal)

    monkeypatch.setattr(outputs, "write_atomic", signalled)
    signals.append(1)  # one: held off, every file written, then reported
    written, name = driver._write(study, CONFIG, space, tmp_path, "HINT")
    assert name == "SIGTERM" and (tmp_path / "optimization_history.png").is_file()
    assert "value 3.0" in (tmp_path / "best.yaml").read_text() and len(written) >= 4
    rows = (tmp_path / "trials.csv").read_text().splitlines()
    assert len(rows) == 5
    for path in tmp_path.iterdir():
        path.unlink()
    signals.append(2)  # two: the second stops at once; no file half written
    with pytest.raises(StopNow) as stop:
        driver._write(study, CONFIG, space, tmp_path, "HINT")
    assert stop.value.resume_hint == "HINT"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.yaml", "trials.csv"]
    assert len((tmp_path / "trials.csv").read_text().splitlines()) == 5


def disk_full_error():
    """Optuna's StorageInternalError as an SQLite commit on a full disk raises it."""
    import sqlalchemy

    orig = sqlite3.OperationalError("database or disk is full")
    wrapped = sqlalchemy.exc.OperationalError("INSERT INTO trial_values", {}, orig)
    try:
        raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.")
    except optuna.exceptions.StorageInternalError as err:
        err.__cause__ = wrapped
        return err


def test_a_full_disk_mid_study_is_one_line_and_resume_finishes(tmp_path, capsys, monkeypatch):
    out = tmp_path / "tune"
    tell = optuna.study.Study.tell

    def full(self, *args, **kwargs):  # the first trial's result cannot be committed
        raise disk_full_error()

    monkeypatch.setattr(optuna.study.Study, "tell", full)
    argv = [*TINY_ONE[: TINY_ONE.index("--trials")], "--trials", "2", "--no-progress"]
    code, lines = run_cli(["tune", *argv, "--out", str(out)], capsys)
    assert code == 4 and len(lines) == 1, lines
    assert lines[0].startswith("purejaxppo: error: tune: the disk is full (No space left on "), (
        lines
    )
    assert "database or disk is full" in lines[0] and "checkpoint" not in lines[0]
    assert lines[0].endswith(
        f"every finished trial is kept in the study: free space, then purejaxppo tune "
        f"--resume {out}"
    ), lines
    monkeypatch.setattr(optuna.study.Study, "tell", tell)
    identity = studies.worker_identity  # the resumes as new processes of OUT

    def another_process(out):
        return {**identity(out), "pid": os.getpid() + 1}

    monkeypatch.setattr(studies, "worker_identity", another_process)
    to_csv = pd.DataFrame.to_csv

    def no_space(self, path, **kwargs):  # the disk fills up again as trials.csv is written
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(pd.DataFrame, "to_csv", no_space)
    code, lines = run_cli(["tune", "--resume", str(out), "--no-progress"], capsys)
    assert code == 4 and len(lines) == 1 and "No space left on device" in lines[0], lines
    assert lines[0].endswith(f"then purejaxppo tune --resume {out}"), lines
    assert not [p for p in out.iterdir() if "partial" in p.name]
    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)
    code, lines = run_cli(["tune", "--resume", str(out), "--no-progress"], capsys)
    assert code == 0, lines
    trials = optuna.load_study(study_name="tune", storage=f"sqlite:///{out / 'study.db'}").trials
    assert sum(t.state == States.COMPLETE for t in trials) == 2
    assert (out / "trials.csv").is_file() and (out / "best.yaml").is_file()


def test_a_dead_workers_running_trial_is_waited_out_and_run(tmp_path, capsys, monkeypatch):
    from purejaxppo.drivers.tune import scheduler

    monkeypatch.setattr(studies, "GRACE_SECONDS", 2)
    monkeypatch.setattr(scheduler, "POLL_SECONDS", 0.5)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    setup = check_tune(CONFIG, SEARCH, trials=1, batch=1)
    storage = studies.open_storage(url)
    study, _ = studies.open_study(
        storage, "tune", setup.request, resume=False, sampler=None, pruner=None
    )
    # fixed, not sampled: a learning rate near 1e-2 can end no episode in the objective's
    # 2-update window (the rerun is then told FAIL, as it should be)
    study.enqueue_trial({"learning_rate": 1e-3, "ent_coef": 0.01})
    with studies.quiet_optuna():
        dead = study.ask(setup.space.distributions())  # a SIGKILLed worker's trial: RUNNING,
    storage.record_heartbeat(dead._trial_id)  # its heartbeat about to go stale
    started = time.monotonic()
    result = pjp.tune(CONFIG, SEARCH, trials=1, storage=url, resume=True, progress=False)
    assert time.monotonic() - started > 2  # the grace was waited out
    waited = capsys.readouterr().err
    assert f"waiting for the running trial(s) {dead.number} of other workers" in waited
    trials = result.study.get_trials()
    told = [(t.state, t.user_attrs, t.system_attrs) for t in trials]
    assert [t.state for t in trials] == [States.FAIL, States.COMPLETE], told
    assert trials[1].params == dead.params
    assert trials[1].system_attrs["retry_history"] == [dead.number]
