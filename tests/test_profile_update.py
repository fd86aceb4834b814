"""benchmarks/profile_update.py: phase timings and HLO op counts, on CPU with tiny sizes."""

from __future__ import annotations

import csv
import importlib
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest


@pytest.fixture(scope="module")
def profile():
    return importlib.import_module("benchmarks.profile_update")


# A hand-written module: ENTRY runs a 5-trip loop whose body has one fusion, one
# custom-call, a conditional (branches of 2 and 0 ops) and a nested 3-trip loop (one
# fusion per iteration); the loop conditions hold one fusion each.
HLO = """\
HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%fused_a (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %t = f32[4]{0} tanh(%p)
}

%inner_body (arg: (s32[], f32[4])) -> (s32[], f32[4]) {
  %arg = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%arg), index=1
  %i = s32[] get-tuple-element(%arg), index=0
  %f = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_a
  ROOT %out = (s32[], f32[4]{0}) tuple(%i, %f)
}

%inner_cond (arg: (s32[], f32[4])) -> pred[] {
  %arg = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%arg), index=0
  ROOT %lt = pred[] fusion(%i), kind=kLoop, calls=%fused_a
}

%big_branch (b: (f32[4])) -> (f32[4]) {
  %b = (f32[4]{0}) parameter(0)
  %y = f32[4]{0} get-tuple-element(%b), index=0
  %s = f32[4]{0} sort(%y), dimensions={0}, to_apply=%fused_a
  %c = f32[4]{0} copy(%s)
  ROOT %r = (f32[4]{0}) tuple(%c)
}

%small_branch (b: (f32[4])) -> (f32[4]) {
  ROOT %b = (f32[4]{0}) parameter(0)
}

%outer_body (arg: (s32[], f32[4])) -> (s32[], f32[4]) {
  %arg = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%arg), index=1
  %g = f32[4]{0} custom-call(%x), custom_call_target="__cublas$gemm"
  %f = f32[4]{0} fusion(%g), kind=kLoop, calls=%fused_a
  %p = pred[] constant(true)
  %tb = (f32[4]{0}) tuple(%f)
  %cd = (f32[4]{0}) conditional(%p, %tb, %tb), branch_computations={%small_branch, %big_branch}
  %w = (s32[], f32[4]{0}) while(%arg), condition=%inner_cond, body=%inner_body, backend_config={"known_trip_count":{"n":"3"}}
  ROOT %o = (s32[], f32[4]{0}) tuple(%arg)
}

%outer_cond (arg: (s32[], f32[4])) -> pred[] {
  %arg = (s32[], f32[4]{0}) parameter(0)
  ROOT %lt = pred[] fusion(%arg), kind=kLoop, calls=%fused_a
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c = f32[4]{0} copy(%x)
  %t = (s32[], f32[4]{0}) tuple(%c, %c)
  %w = (s32[], f32[4]{0}) while(%t), condition=%outer_cond, body=%outer_body, backend_config={"known_trip_count":{"n":"5"}}
  ROOT %r = f32[4]{0} get-tuple-element(%w), index=1
}
"""


def test_count_ops_of_a_hand_written_module(profile):
    ops = profile.count_ops(HLO)
    outer, inner = ops["loops"]
    assert ops["top"] == {"fusions": 0, "custom_calls": 0, "other": 1, "kernels": 1}
    assert (outer["depth"], outer["parent"], outer["trip_count"]) == (0, None, 5)
    assert (inner["depth"], inner["parent"], inner["trip_count"]) == (1, 0, 3)
    # outer body: fusion, custom-call, and the larger branch's sort + copy
    assert (outer["fusions"], outer["custom_calls"], outer["other"]) == (1, 1, 2)
    assert (inner["fusions"], inner["kernels"]) == (1, 1)
    # inner iteration: body 1 + condition 1; outer: 4 own + 3 * 2 + condition 1 = 11
    assert inner["launches_per_iteration"] == 2
    assert outer["launches_per_iteration"] == 11
    assert ops["launches"] == 1 + 5 * 11
    # The outer loop as a repetition scan: its body becomes the top, the inner loop top-level.
    rep = profile.per_repetition(ops, reps=5)
    assert rep["launches"] == 11 and rep["top"]["kernels"] == 4
    assert [(loop["depth"], loop["parent"], loop["trip_count"]) for loop in rep["loops"]] == [
        (0, None, 3)
    ]
    assert profile.per_repetition(ops, reps=7) is None
    assert profile.named_loop(ops, "innermost", 3) is inner
    assert profile.named_loop(ops, "outermost", 5) is outer
    assert profile.named_loop(ops, "innermost", 4) is None  # no loop of 4 trips


def test_count_ops_finds_the_loops_of_a_compiled_program(profile):
    def f(x):
        def body(c, _):
            c = jax.lax.scan(lambda d, _: (jnp.tanh(d) * 2.0, None), c, None, length=3)[0]
            return jnp.sort(jnp.sin(c) @ c, axis=0), None

        return jax.lax.scan(body, x, None, length=6)[0]

    ops = profile.count_ops(jax.jit(f).lower(jnp.ones((8, 8))).compile().as_text())
    outer = profile.named_loop(ops, "outermost", 6)
    inner = profile.named_loop(ops, "innermost", 3)
    assert outer["depth"] == 0 and inner["depth"] == 1 and inner["parent"] == outer["index"]
    assert outer["kernels"] >= 2 and inner["kernels"] >= 1  # sort + matmul; tanh * 2
    assert ops["launches"] >= 6 * (outer["kernels"] + 3 * inner["kernels"])


def test_profile_update_times_every_phase_and_counts_ops_on_cpu(profile, tmp_path):
    argv = [
        "--agents",
        "2",
        "--num-envs",
        "2",
        "--num-steps",
        "8",
        "--update-epochs",
        "2",
        "--num-minibatches",
        "2",
        "--hidden-sizes",
        "8,8",
        "--reps",
        "2",
        "--repeats",
        "1",
        "--ops",
        "--out",
        str(tmp_path),
    ]
    record = profile.main(argv)
    (row,) = record["rows"]
    assert (row["study"], row["agents"], row["num_envs"], row["num_steps"]) == ("grid", 2, 2, 8)
    for phase in profile.PHASES:
        assert row[f"{phase}_ms"] > 0, phase
    assert row["env_steps_per_s"] == pytest.approx(2 * 2 * 8 / (row["update_ms"] / 1e3))
    # The named loops: the rollout's 8-step scan, the epochs' 2-minibatch scan.
    assert row["rollout_step_trip_count"] == 8 and row["rollout_step_kernels"] > 0
    assert row["minibatch_step_trip_count"] == 2 and row["minibatch_step_kernels"] > 0
    for program in profile.OP_PROGRAMS:
        assert row[f"{program}_launches"] > 0, program
    # One update launches at least the rollout's 8 steps and the 2 x 2 minibatch steps.
    assert row["update_launches"] >= 8 * row["rollout_step_kernels"]
    assert row["epochs_launches"] >= 4 * row["minibatch_step_kernels"]
    json_path, csv_path = (Path(p) for p in record["paths"])
    assert json.loads(json_path.read_text())["rows"][0]["update_ms"] == row["update_ms"]
    with open(csv_path) as file:
        (written,) = list(csv.DictReader(file))
    assert float(written["gae_ms"]) == pytest.approx(row["gae_ms"])
    assert int(written["minibatch_step_kernels"]) == row["minibatch_step_kernels"]


def test_rows_of_the_grid_and_of_the_scaling_studies(profile):
    argv = ["--agents", "1", "1024", "--scaling", "--scaling-agents", "1", "64"]
    args = profile.parse_args([*argv, "--scaling-envs", "4", "16", "--scaling-steps", "512"])
    assert profile.cells(args) == [
        ("grid", 1, 4, 128),
        ("grid", 1024, 4, 128),
        ("agents", 64, 4, 128),  # (agents 1, 4 x 128) is the grid's row already
        ("num_envs", 1, 16, 128),
        ("num_steps", 1, 4, 512),
    ]
    args = profile.parse_args(["--agents", "2", "--num-envs", "2", "8", "--num-steps", "16"])
    assert profile.cells(args) == [("grid", 2, 2, 16), ("grid", 2, 8, 16)]


def test_profile_update_refuses_bad_sizes(profile):
    with pytest.raises(SystemExit):
        profile.parse_args(["--agents", "0"])
    with pytest.raises(SystemExit):
        profile.parse_args(["--hidden-sizes", "64,x"])
