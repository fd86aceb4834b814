"""benchmarks/trace_update.py: kernels charged to phases and components, on CPU, tiny sizes."""

from __future__ import annotations

import gzip
import importlib
import json
from collections import Counter

import pytest


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    module = importlib.import_module("benchmarks.trace_update")
    out = tmp_path_factory.mktemp("trace")
    (row,) = module.main(["--agents", "2", "--total-timesteps", "1024", "--out", str(out)])
    return module, out, row


def test_the_trace_writes_its_summary_the_hlo_and_the_raw_trace(traced):
    _, out, row = traced
    tag = "ours-2-auto"
    assert json.loads((out / f"trace-{tag}.json").read_text())["agents"] == 2
    assert (out / f"perfetto-{tag}.json.gz").stat().st_size > 0
    assert "HloModule" in gzip.open(out / f"hlo-{tag}.txt.gz", "rt").read(200)
    assert row["ms_per_update"] > 0 and row["compile_s"] > 0
    assert not list(out.glob("*-raw"))  # the profiler's own directory is removed


def test_instructions_are_charged_to_the_phase_and_component_that_built_them(traced):
    module, out, _ = traced
    text = gzip.open(out / "hlo-ours-2-auto.txt.gz", "rt").read()
    groups = Counter(group for group, _ in module.hlo_sources(text).values())
    # The env's arithmetic inside the rollout, the sampler, Adam inside the epochs, the
    # network in both and the bootstrap pass all appear under their own names.
    for group in (
        "rollout: env",
        "rollout: distribution",
        "rollout: network",
        "epochs: optimizer",
        "epochs: network",
        "bootstrap: network",
        "GAE: glue",
    ):
        assert groups[group] > 0, (group, groups)
    places = {place for _, place in module.hlo_sources(text).values()}
    assert any(place.startswith("purejaxppo/gae.py:") for place in places)


def test_device_kernels_are_summed_per_update_by_their_hlo_instruction(traced):
    module, out, _ = traced
    text = gzip.open(out / "hlo-ours-2-auto.txt.gz", "rt").read()
    sources = module.hlo_sources(text)
    fusion = next(n for n, (g, _) in sources.items() if g == "rollout: env" and "fusion" in n)
    trace = {
        "traceEvents": [
            {"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "pid": 7, "tid": 1, "name": "thread_name", "args": {"name": "Stream #1"}},
            {"ph": "M", "pid": 7, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}},
            {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
            {"ph": "X", "pid": 7, "tid": 1, "ts": 0, "dur": 30, "name": fusion},
            {
                "ph": "X",
                "pid": 7,
                "tid": 1,
                "ts": 40,
                "dur": 10,
                "name": "k",
                "args": {"hlo_op": fusion},
            },
            {"ph": "X", "pid": 7, "tid": 2, "ts": 0, "dur": 30, "name": fusion},  # derived line
            {"ph": "X", "pid": 9, "tid": 1, "ts": 0, "dur": 500, "name": fusion},  # host
        ]
    }
    summary = module.summarize(trace, text, num_updates=2)
    assert summary["kernels"] == 2
    assert summary["device_busy_ms_per_update"] == pytest.approx(0.020)
    assert summary["device_span_ms_per_update"] == pytest.approx(0.025)
    assert summary["groups_ms_per_update"] == {"rollout: env": 0.02}
    assert summary["top_ops"][0]["launches_per_update"] == 1.0


def test_command_buffers_are_charged_to_the_loop_that_launches_as_many_kernels(traced):
    module, out, _ = traced
    text = gzip.open(out / "hlo-ours-2-auto.txt.gz", "rt").read()
    loops = module.loop_phases(text)
    phases = {loop["phase"] for loop in loops}
    assert {"rollout", "epochs"} <= phases, loops
    rollout = next(loop for loop in loops if loop["phase"] == "rollout")
    per_update = rollout["kernels_per_update"]
    assert module.phase_of(per_update * 1.1, loops) == "rollout"
    assert module.phase_of(per_update * 10, loops) in (None, *phases)
    lines = [
        f"  2.500 ms x{per_update:6.1f} command_buffer_7",  # a GPU loop body
        "  0.250 ms x   3.0 no_such_kernel",
        "ours agents=2: a header line, not a kernel",
    ]
    summary = module.summarize_log(lines, text)
    assert summary["phases_ms_per_update"] == {"rollout": 2.5, "unattributed": 0.25}
    assert summary["device_busy_ms_per_update"] == pytest.approx(2.75)


def test_source_paths_are_cut_at_the_innermost_package_wherever_the_checkout_lies(traced):
    module, _, _ = traced
    cases = {
        "/tmp/wt/purejaxppo/gae.py": "purejaxppo/gae.py",
        "/home/u/purejaxppo/purejaxppo/update.py": "purejaxppo/update.py",
        "/home/u/purejaxppo/.venv/lib/site-packages/rejax/algos/ppo.py": "rejax/algos/ppo.py",
        "/x/site-packages/flax/linen/linear.py": "flax/linen/linear.py",
        "purejaxppo/rollout.py": "purejaxppo/rollout.py",
    }
    for path, short in cases.items():
        assert module._short_path(path) == short, path
