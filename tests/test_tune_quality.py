"""`benchmarks/tune_quality.py`'s own logic: the search space is one both `tune` and
`sweep --random` take, the per-procedure summary, and the best-so-far figure."""

import numpy as np
import pytest

from benchmarks import tune_quality
from benchmarks.harness import ROOT
from purejaxppo.config import PPOConfig
from purejaxppo.drivers.tune.space import parse_space


def test_search_space_parses_for_tune():
    config = PPOConfig.from_yaml(ROOT / "configs" / "acrobot.yaml")
    space = parse_space(dict(tune_quality.SEARCH), config).distributions()
    assert sorted(space) == sorted(tune_quality.SEARCH)
    assert space["learning_rate"].log and space["learning_rate"].low == pytest.approx(1e-5)
    assert not space["clip_coef"].log


def _row(procedure, rep, best, rerun, pruned=0, seconds=10.0):
    return {
        "procedure": procedure,
        "rep": rep,
        "best_value": best,
        "rerun": rerun,
        "rerun_mean": float(np.mean(rerun)),
        "pruned": pruned,
        "seconds": seconds,
        "values": [best - 50.0, None, best],
    }


def test_summarize_aggregates_over_reps_in_procedure_order():
    rows = [
        _row("random", 0, -90.0, [-100.0, -110.0, -120.0]),
        _row("tpe", 0, -80.0, [-90.0, -92.0, -94.0], seconds=20.0),
        _row("tpe", 1, -70.0, [-80.0, -82.0, -84.0], seconds=30.0),
        _row("tpe+median", 0, -85.0, [-95.0, -95.0, -95.0], pruned=7),
    ]
    table = tune_quality.summarize(rows)
    assert [r["procedure"] for r in table] == ["tpe", "tpe+median", "random"]
    tpe = table[0]
    assert tpe["reps"] == 2
    assert tpe["rerun_mean"] == pytest.approx(-87.0)
    assert tpe["rerun_std"] == pytest.approx(5.0)
    assert tpe["rerun_min"] == pytest.approx(-92.0)
    assert tpe["best_value_mean"] == pytest.approx(-75.0)
    assert tpe["seconds"] == pytest.approx(50.0)
    assert tpe["seconds_warm"] == pytest.approx(30.0)  # rep 0 pays the compiles
    assert np.isnan(table[2]["seconds_warm"])
    assert table[1]["trials_pruned"] == 7
    assert table[2]["rerun_mean"] == pytest.approx(-110.0)


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "quality.png"
    tune_quality.plot([_row("tpe", 0, -80.0, [-90.0]), _row("random", 0, -90.0, [-95.0])], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
