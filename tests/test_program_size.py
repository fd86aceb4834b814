"""The size of the standard training program, pinned: a deterministic gate on compile time.

Compile time grows with the program XLA is given, and that program is fixed before any
compile: `jax.jit(train).lower(key)` of `configs/cartpole.yaml` at 1 agent, and
`jax.jit(jax.vmap(train)).lower(keys)` at 8 agents. This module lowers each once (no XLA
compile, ~1-2 s) and counts its StableHLO text (`lowered.as_text()`) with
`benchmarks.compile_child.program_size`, which the compile-time benchmark reports too:

* `lines`: the text's lines;
* `ops`: the lines that begin an MLIR operation: after the indentation and an optional
  `%results =`, a dotted op name (`stablehlo.add`, `chlo.square`, `func.call`,
  `sdy.sharding_constraint`, the generic `"stablehlo.case"`) or `func`'s short forms `call`
  and `return`. Lines that only close or open a region (`}`, `} do {`, `cond {`,
  `reducer(...)`) and the `module` line are not ops.

The counts are pinned per jax minor version (`PINS`; the text differs between jax
versions). More than `TOLERANCE` growth fails: the program got bigger, so its compile got
slower; if the growth is wanted, update the pin deliberately and say why in the commit.
More than `TOLERANCE` shrinkage fails too, so that the pin follows a smaller program down
and the gate stays tight. Wall-clock compile times are `benchmarks/compile_time.py`'s.
"""

from __future__ import annotations

from pathlib import Path

import jax
import pytest

import purejaxppo as pjp
from benchmarks.compile_child import program_size

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "cartpole.yaml"
#: Relative change (either way) from a pin that fails the gate.
TOLERANCE = 0.10
#: `{jax minor version: {program: {"lines": n, "ops": n}}}`, from `program_size`.
#: 0.10: measured 2026-12-02 on jax / jaxlib 0.10.2 (x86_64 CPU).
PINS = {
    "0.10": {
        "train_1": {"lines": 3683, "ops": 3495},
        "train_vmap8": {"lines": 4215, "ops": 4027},
    },
}


def jax_minor() -> str:
    return ".".join(jax.__version__.split(".")[:2])


@pytest.fixture(scope="module")
def sizes() -> dict[str, dict[str, int]]:
    """Each program lowered once per module."""
    train = pjp.make_train(pjp.PPOConfig.from_yaml(CONFIG))
    key = jax.random.key(0)
    lowered = {
        "train_1": jax.jit(train).lower(key),
        "train_vmap8": jax.jit(jax.vmap(train)).lower(jax.random.split(key, 8)),
    }
    return {name: program_size(low.as_text()) for name, low in lowered.items()}


def verdict(program: str, count: str, measured: int, pinned: int) -> str | None:
    """Why `measured` fails against `pinned` (None: within `TOLERANCE`)."""
    change = measured / pinned - 1
    where = (
        f"{program} {count}: measured {measured}, pinned {pinned} ({change:+.1%}) on jax "
        f"{jax.__version__}; PINS[{jax_minor()!r}] in {Path(__file__).name}"
    )
    if change > TOLERANCE:
        return (
            f"{where}: the program grew more than {TOLERANCE:.0%}, so it compiles slower. "
            "Find what grew (lowered.as_text()), or, if the growth is wanted, update the pin "
            "deliberately and say why in the commit."
        )
    if change < -TOLERANCE:
        return (
            f"{where}: the program shrank more than {TOLERANCE:.0%}. Lower the pin to the "
            "measured count so the gate stays tight (say why in the commit)."
        )
    return None


@pytest.mark.parametrize("program", ["train_1", "train_vmap8"])
def test_program_size_is_within_the_pin(sizes, program):
    pins = PINS.get(jax_minor())
    if pins is None:
        pytest.fail(
            f"no program-size pin for jax {jax_minor()} (pinned: {sorted(PINS)}); the "
            f"measured sizes: {sizes}. Add PINS[{jax_minor()!r}] = these counts in "
            f"{Path(__file__).name}, with the date and jax version in a comment, after "
            "checking that the program did not grow for another reason (compare "
            "lowered.as_text() under both jax versions)."
        )
    failures = [
        verdict(program, count, sizes[program][count], pinned)
        for count, pinned in pins[program].items()
    ]
    assert [f for f in failures if f] == []


def test_lowering_is_deterministic_and_ops_exclude_region_lines():
    text = """\
module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<i32>) -> tensor<i32> {
    %0:2 = stablehlo.while(%iterArg = %arg0) : tensor<i32>
    cond {
      %c = stablehlo.constant dense<1> : tensor<i32>
      stablehlo.return %c : tensor<i32>
    } do {
      %1 = "stablehlo.case"(%iterArg) ({
      }) : (tensor<i32>) -> tensor<i32>
    }
    %2 = call @g(%0) : (tensor<i32>) -> tensor<i32>
    return %2 : tensor<i32>
  }
}"""
    # ops: func.func, while, constant, stablehlo.return, "stablehlo.case", call, return
    assert program_size(text) == {"lines": 14, "ops": 7}
    # the same config lowers to the same text (the pin is a count, not a sample)
    train = pjp.make_train(pjp.PPOConfig.from_yaml(CONFIG).replace(total_timesteps=1024))
    key = jax.random.key(0)
    assert jax.jit(train).lower(key).as_text() == jax.jit(train).lower(key).as_text()


def test_verdict_names_measured_pinned_and_what_to_do():
    assert verdict("train_1", "ops", 105, 100) is None
    grew = verdict("train_1", "ops", 111, 100)
    assert "measured 111, pinned 100 (+11.0%)" in grew and "say why in the commit" in grew
    shrank = verdict("train_1", "lines", 89, 100)
    assert "shrank" in shrank and "Lower the pin" in shrank
