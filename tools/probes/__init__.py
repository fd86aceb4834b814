"""Probes of the command line: real CLI subprocesses under bad input and faults, each
classified clean / ugly / lost. They are tests that take minutes, not benchmarks: nothing
is timed for a claim. Run each as a module from the repository root:

    PYTHONPATH=$PWD nice -n 10 python -m tools.probes.input_probes   # bad inputs (~9 min)
    PYTHONPATH=$PWD python -m tools.probes.faults                    # faults (minutes)

`input_probes.py` runs the rows of `input_probe_cases.py`, `input_probe_outputs.py` and
`input_probe_values.py` (built with `input_probe_kit.py`); `faults.py` runs its scenarios
and those of `faults_stops.py` (shared pieces: `faults_common.py`). Both write their table
to `benchmarks/results/` (`input-probes-<stamp>.{csv,md}`, `faults-<date>.{csv,md}`), where
the pages cite the current runs. The modules import each other as `tools.probes.NAME`.
"""
