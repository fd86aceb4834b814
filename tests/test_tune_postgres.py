"""`purejaxppo tune` on a real PostgreSQL server: two workers share one study (no trial
run twice, the budget exact), a SIGKILLed worker's trials are re-run by `--resume` with
none lost, and the storage password is never written to disk.

The server is $PUREJAXPPO_TEST_POSTGRES_URL (.ci/run starts one), or else one these tests
start (tests/tune_worker/postgres.sh: the PostgreSQL server binaries, as root or not);
they skip only when neither is there, and fail instead under CI (CI=true), where .ci/run
must have started one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from test_tune import (  # the SQLite tests' tiny tune and subprocess helpers
    CLI,
    TINY,
    cli_env,  # noqa: F401  (a fixture)
    finished_outcome,
    run_cli,
    start,
    wait_until,
)

from purejaxppo.drivers.tune import storage as storages

URL_ENV = "PUREJAXPPO_TEST_POSTGRES_URL"
SCRIPT = Path(__file__).resolve().parent / "tune_worker" / "postgres.sh"
States = optuna.trial.TrialState


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL URL with a password: $PUREJAXPPO_TEST_POSTGRES_URL, or a server
    started for this module (stopped after it)."""
    url = os.environ.get(URL_ENV)
    if url:
        yield url
        return
    directory = tempfile.mkdtemp(prefix="purejaxppo-postgres-")  # the server's user reads it
    started = subprocess.run(
        ["bash", str(SCRIPT), "start", directory], capture_output=True, text=True, timeout=120
    )
    if started.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        reason = (started.stderr.strip().splitlines() or ["no output"])[-1]
        message = f"{URL_ENV} is unset and no PostgreSQL server could be started: {reason}"
        if os.environ.get("CI"):  # .ci/run installs and starts one: its absence is a failure
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", directory], timeout=120, check=False)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def server(postgres_url):
    """(URL, its password, an engine on it, a new study name)."""
    password = sqlalchemy.engine.make_url(postgres_url).password
    assert password, f"{URL_ENV} must hold a password (the tests check it stays off disk)"
    engine = sqlalchemy.create_engine(postgres_url)
    yield postgres_url, password, engine, f"test-{uuid.uuid4().hex[:8]}"
    engine.dispose()


def trial_states(engine, study_name):
    """{trial number: (state name, intermediate values reported)} of `study_name`, read
    in one query (empty before Optuna's tables exist)."""
    query = sqlalchemy.text(
        "SELECT t.number, t.state, COUNT(v.trial_id) FROM trials t "
        "JOIN studies s ON s.study_id = t.study_id "
        "LEFT JOIN trial_intermediate_values v ON v.trial_id = t.trial_id "
        "WHERE s.study_name = :name GROUP BY t.trial_id, t.number, t.state"
    )
    try:
        with engine.connect() as connection:
            rows = connection.execute(query, {"name": study_name}).fetchall()
    except sqlalchemy.exc.ProgrammingError:  # the tables are being created
        return {}
    return {number: (str(getattr(state, "name", state)), n) for number, state, n in rows}


def assert_no_password_on_disk(root, password):
    """No file under `root` holds `password`; request.yaml files record the URL hidden."""
    files = [p for p in Path(root).rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert password.encode() not in path.read_bytes(), path
    for request in Path(root).rglob("request.yaml"):
        assert ":***@" in request.read_text(), request


def test_two_workers_share_one_postgres_study(server, tmp_path, cli_env):  # noqa: F811
    url, password, _, name = server
    workers = [  # started together on a study that does not exist yet
        start(
            [*TINY, "--storage", url, "--study-name", name, "--out", str(tmp_path / w), "--resume"],
            cli_env,
        )
        for w in ("a", "b")
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        assert password not in err
    trials = optuna.load_study(study_name=name, storage=url).get_trials()
    # an advisory lock keeps the budget exact; every trial ran once, in one worker
    assert len(trials) == 8 and all(map(finished_outcome, trials))
    assert sorted(t.number for t in trials) == list(range(8))
    assert {t.user_attrs["worker"]["pid"] for t in trials} == {w.pid for w in workers}
    assert len({t.params["learning_rate"] for t in trials}) == 8  # no setting drawn twice
    assert_no_password_on_disk(tmp_path, password)


def test_killed_worker_resumes_on_postgres_with_no_trial_lost(
    server,
    tmp_path,
    cli_env,  # noqa: F811
    capsys,
    monkeypatch,
):
    url, password, engine, name = server
    out = tmp_path / "tune"

    def mid_trial():  # a trial complete and one running, 1 to 4 of its 8 values reported
        states = trial_states(engine, name).values()
        done = sum(state == "COMPLETE" for state, _ in states)
        return done >= 1 and any(s == "RUNNING" and 1 <= n <= 4 for s, n in states)

    first = start([*TINY, "--storage", url, "--study-name", name, "--out", str(out)], cli_env)
    wait_until(mid_trial, first)
    first.kill()  # SIGKILL: its running trials stay RUNNING in the study
    first.communicate(timeout=60)
    killed = {n for n, (s, _) in trial_states(engine, name).items() if s == "COMPLETE"}
    assert first.returncode == -signal.SIGKILL and 1 <= len(killed) < 8
    assert "RUNNING" in {s for s, _ in trial_states(engine, name).values()}
    assert_no_password_on_disk(tmp_path, password)

    # request.yaml holds no password: --resume says how to give it, in one line
    monkeypatch.delenv(storages.PASSWORD_ENV, raising=False)
    code, lines = run_cli(["tune", "--resume", str(out), "--no-progress"], capsys)
    assert code == 2 and len(lines) == 1 and storages.PASSWORD_ENV in lines[0], lines

    env = {**cli_env, storages.PASSWORD_ENV: password}
    env.pop(URL_ENV, None)
    second = subprocess.run(
        [sys.executable, "-c", CLI, "tune", "--resume", str(out), "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr
    trials = optuna.load_study(study_name=name, storage=url).get_trials()
    ended = {t.number for t in trials if finished_outcome(t)}
    values = {t.number for t in trials if t.state == States.COMPLETE}
    assert len(ended) == 8 and killed <= values
    failed = [t for t in trials if t.state == States.FAIL and not finished_outcome(t)]
    assert failed  # the killed worker's running trials
    for trial in failed:  # each was re-queued once, and its copy ran to the end
        copies = [
            t for t in trials if t.system_attrs.get("retry_history", [None])[-1] == trial.number
        ]
        assert len(copies) == 1 and copies[0].params == trial.params
        assert finished_outcome(copies[0])
    assert not [t for t in trials if t.state in (States.RUNNING, States.WAITING)]
    assert (out / "best.yaml").is_file() and (out / "trials.csv").is_file()
    assert_no_password_on_disk(tmp_path, password)
