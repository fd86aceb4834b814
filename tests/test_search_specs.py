"""A field given twice in one command's `--search` / `--random` specs is refused (as
`--grid` refuses it), naming the field: before, the second spec silently replaced the
first. Checked in the shared parser and through each command's CLI (exit 2, one line,
nothing written)."""

import pytest

from purejaxppo.cli import main
from purejaxppo.cli.values import parse_grid, parse_random


def run_cli(argv, capsys):
    """(exit code, stderr lines) of `purejaxppo ARGV` in this process."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err.strip().splitlines()


def test_parse_random_refuses_a_field_given_twice():
    items = ["learning_rate=log_uniform:1e-5:1e-3", "learning_rate=uniform:0.1:0.2"]
    with pytest.raises(ValueError, match=r"--random 'learning_rate=uniform:0.1:0.2': field "):
        parse_random(items)
    # `-` and `_` name the same field; the flag named is the caller's
    items = ["ent_coef=uniform:0:0.1", "ent-coef=choice:0.0,0.01"]
    with pytest.raises(ValueError, match=r"^--search 'ent-coef=.*field 'ent_coef' given twice"):
        parse_random(items, flag="--search")
    # distinct fields are kept, each with its own spec
    spec = parse_random(["gamma=uniform:0.9:0.99", "num_envs=choice:4,8"])
    assert spec == {"gamma": ("uniform", 0.9, 0.99), "num_envs": ("choice", [4, 8])}


def test_grid_and_random_refuse_repeats_alike():
    with pytest.raises(ValueError, match=r"field 'gamma' given twice"):
        parse_grid(["gamma=0.9", "gamma=0.99"])
    with pytest.raises(ValueError, match=r"field 'gamma' given twice"):
        parse_random(["gamma=uniform:0.9:0.95", "gamma=uniform:0.95:0.99"])


def test_sweep_random_field_given_twice_exits_2(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--out", str(out), "--num-samples", "2"]
    argv += ["--random", "gamma=uniform:0.9:0.95", "--random", "gamma=uniform:0.95:0.99"]
    code, lines = run_cli(argv, capsys)
    assert code == 2
    assert lines == [
        "purejaxppo: error: --random 'gamma=uniform:0.95:0.99': field 'gamma' given twice "
        "(one --random per field)"
    ]
    assert not out.exists()


def test_tune_search_field_given_twice_exits_2(tmp_path, capsys):
    out = tmp_path / "tune"
    argv = ["tune", "--trials", "2", "--out", str(out)]
    argv += ["--search", "gamma=uniform:0.9:0.95", "--search", "gamma=uniform:0.95:0.99"]
    code, lines = run_cli(argv, capsys)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("purejaxppo: error: --search 'gamma=uniform:0.95:0.99'")
    assert "field 'gamma' given twice" in lines[0]
    assert not out.exists()


def test_pbt_search_field_given_twice_exits_2(tmp_path, capsys):
    out = tmp_path / "pbt"
    argv = ["pbt", "--population", "2", "--out", str(out)]
    argv += ["--search", "ent_coef=uniform:0:0.05", "--search", "ent_coef=uniform:0.01:0.02"]
    code, lines = run_cli(argv, capsys)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("purejaxppo: error: --")  # --search once pbt passes its flag
    assert "'ent_coef=uniform:0.01:0.02': field 'ent_coef' given twice" in lines[0]
    assert not out.exists()
