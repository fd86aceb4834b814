"""GPU runs: the shell scripts run from the repository root, and the result builders
(`python -m benchmarks.gpu.NAME`)."""
