"""The benchmark scripts (one suite). Not part of the installed library.

Run every script as a module from the repository root: `python -m benchmarks.NAME`
(`python -m benchmarks.experiments.NAME`, `benchmarks.peers.NAME`, `benchmarks.gpu.NAME`
for the subfolders); the scripts import each other as `benchmarks.NAME`, never by path.
Shared code: `benchmarks/harness.py`; the tables in README.md and docs/ that come from
`benchmarks/results/`: `benchmarks/tables.py`.
"""
