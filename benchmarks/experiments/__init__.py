"""Speed and correctness experiments (`python -m benchmarks.experiments.NAME` from the
repository root)."""
