"""The benchmark scripts (one suite). Not part of the installed library.

Run the scripts in this folder as `python benchmarks/<name>.py`; the ones in
`experiments/` and `peers/` as modules from the repository root (`python -m
benchmarks.experiments.marl_truncation`). Shared code: `benchmarks/harness.py`; the
tables in README.md and docs/ that come from `benchmarks/results/`: `benchmarks/tables.py`.
"""
