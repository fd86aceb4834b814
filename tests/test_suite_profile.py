"""`benchmarks.suite_profile`: its hook records this JAX's compile events in a fresh
process, and the report adds programs up by module and finds programs compiled twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks import suite_profile as sp


def test_the_hook_records_each_programs_trace_lower_compile_and_cache_verdict(tmp_path):
    hook, events, cache = tmp_path / "hook", tmp_path / "events", tmp_path / "cache"
    for folder in (hook, events, cache):
        folder.mkdir()
    (hook / "sitecustomize.py").write_text(sp.HOOK)
    program = (
        "import jax, jax.numpy as jnp\n"
        f"jax.config.update('jax_compilation_cache_dir', {str(cache)!r})\n"
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)\n"
        "jax.jit(lambda x: jnp.sin(x) * 2)(jnp.ones(3)).block_until_ready()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(hook), PYTEST_CURRENT_TEST="t.py::a (call)")
    env[sp.EVENTS_ENV] = str(events)
    for _ in range(2):  # the second process loads the first one's program
        proc = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    programs, processes = sp.read_events(events)
    assert len(processes) == 2 and all(p["s"] > 0 and p["test"] == "t.py::a" for p in processes)
    lambdas = [p for p in programs if p["name"] == "jit__lambda"]
    assert [p["hit"] for p in lambdas] == [False, True], lambdas
    first, second = lambdas
    assert first["trace"] > 0 and first["lower"] > 0 and first["compile"] > 0
    assert second["load"] > 0  # its XLA compile event times the load
    records = [json.loads(line) for f in events.iterdir() for line in f.read_text().splitlines()]
    assert not [r for r in records if r["ev"] == "hook_failed"]


def test_the_report_sums_modules_and_counts_programs_compiled_again(tmp_path):
    lines = {
        1: [
            {"ev": "start", "argv": ["-m", "pytest"], "test": ""},
            {"ev": "jaxpr_trace_duration", "s": 0.5, "test": "tests/a.py::x (call)"},
            {"ev": "jaxpr_to_mlir_module_duration", "s": 0.3, "test": "tests/a.py::x (call)"},
            {"ev": "miss", "name": "jit_train", "key": "k1", "test": "tests/a.py::x (call)"},
            {"ev": "backend_compile_duration", "s": 4.0, "test": "tests/a.py::x (call)"},
            {"ev": "miss", "name": "jit_add", "key": "k2", "test": "tests/a.py::y (call)"},
            {"ev": "backend_compile_duration", "s": 0.02, "test": "tests/a.py::y (call)"},
        ],
        2: [
            {"ev": "start", "argv": ["-c"], "test": "tests/b.py::z (call)"},
            {"ev": "miss", "name": "jit_train", "key": "k1", "test": "tests/b.py::z (call)"},
            {"ev": "backend_compile_duration", "s": 3.0, "test": "tests/b.py::z (call)"},
            {"ev": "hit", "name": "jit_add", "key": "k2", "test": "tests/b.py::z (call)"},
            {"ev": "cache_retrieval_time_sec", "s": 0.01, "test": "tests/b.py::z (call)"},
            {"ev": "exit", "s": 9.0, "test": "tests/b.py::z (call)"},
        ],
        3: [{"ev": "miss", "name": "jit_gate", "key": "k3", "test": ""}],
    }
    for pid, records in lines.items():
        text = "".join(json.dumps({**r, "pid": pid, "t": 0}) + "\n" for r in records)
        (tmp_path / f"p{pid}.jsonl").write_text(text + '{"ev": "miss", "na')  # killed mid-line
    log = tmp_path / "pytest.log"
    durations = ["6.00s call     tests/a.py::x", "1.00s setup    tests/a.py::x"]
    log.write_text("\n".join([*durations, "12.0s call     tests/b.py::z", ""]))
    summary = sp.summarize(*sp.read_events(tmp_path), sp.read_durations(log))
    assert summary["pytest_s"] == 19.0
    assert summary["big"] == {"programs": 2, "trace_s": 0.5, "lower_s": 0.3, "compile_s": 7.0}
    assert summary["small"]["programs"] == 2 and summary["hits"] == 1
    assert summary["outside_tests"]["programs"] == 1  # compiled while no test ran
    assert summary["processes"] == 1 and summary["process_s"] == 9.0  # started in a test
    assert (
        summary["recompiled"]["programs"] == 1 and summary["recompiled"]["extra_compile_s"] == 3.0
    )
    modules = {m["module"]: m for m in summary["modules"]}
    assert modules["tests/a.py"]["pytest_s"] == 7.0 and modules["tests/a.py"]["compiled"] == 2
    assert modules["tests/b.py"]["process_s"] == 9.0 and modules["tests/b.py"]["hits"] == 1
    assert "| tests/b.py | 12 | 0 | 0 | 3 | 1 | 1 | 9 |" in sp.markdown(
        {"stamp": "now", "command": "c", "summary": summary}
    )
