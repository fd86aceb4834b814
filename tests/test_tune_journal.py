"""Optuna's JournalStorage (`--storage journal:PATH`, a file that holds on NFS): a study
created, resumed with more trials from a second output directory, and a bad journal path
refused in one line."""

from __future__ import annotations

import optuna
import pytest

import purejaxppo as pjp
from purejaxppo.drivers.tune import storage as storages

States = optuna.trial.TrialState
CONFIG = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=4 * 8 * 12, hidden_sizes=(16,))
SEARCH = {"learning_rate": ("log_uniform", 1e-4, 1e-3)}
QUIET = {"sampler": "random", "pruner": "none", "reports": 4, "progress": False}


def test_a_journal_study_is_created_joined_and_extended(tmp_path):
    url = f"journal:///{tmp_path / 'study.log'}"
    first = pjp.tune(CONFIG, SEARCH, trials=2, batch=2, storage=url, out=tmp_path / "a", **QUIET)
    assert [t.state for t in first.study.trials] == [States.COMPLETE] * 2
    assert (tmp_path / "study.log").stat().st_size > 0
    assert not (tmp_path / "a" / "study.db").exists()  # the journal holds the study
    with pytest.raises(ValueError, match="already exists: pass --resume"):
        pjp.tune(CONFIG, SEARCH, trials=3, batch=2, storage=url, out=tmp_path / "b", **QUIET)
    more = pjp.tune(
        CONFIG, SEARCH, trials=3, batch=2, storage=url, out=tmp_path / "b", resume=True, **QUIET
    )
    assert [t.state for t in more.study.trials] == [States.COMPLETE] * 3
    # Optuna reads the same study from the file
    storage = optuna.storages.journal.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "study.log"))
    )
    assert len(optuna.load_study(study_name="tune", storage=storage).trials) == 3


@pytest.mark.parametrize(
    "url, message",
    [
        ("journal:///nonexistent/dir/study.log", "no directory /nonexistent/dir for its journal"),
        ("journal:", "name a file, e.g. journal:///shared/study.log"),
    ],
)
def test_a_bad_journal_is_refused_in_one_line(url, message):
    with pytest.raises(ValueError, match=message):
        storages.check_storage(url)
