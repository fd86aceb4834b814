"""A warm start without tracing: CartPole's training program loaded from a serialized
`jax.export` against traced, lowered and loaded from JAX's persistent compile cache.

A warm `purejaxppo train` still traces and lowers every program (the persistent cache's
key is computed from the lowered module), about a third of its launch to first update
(`benchmarks.compile_time`'s `first_update_split` kind). This measures what skipping
them would give, before any driver is built on it. Two paths, each in fresh processes
sharing one persistent compile cache per path:

* `jit`: `jax.jit(train).trace(key).lower()`, then `.compile()` (a cache load when warm)
  and the run, as the CLI does today.
* `export`: cold, `jax.export.export(jax.jit(train))` (trace and lower), its bytes written
  to a file, and the call of the exported program (`jax.jit(exported.call)`: its own
  compile, cached); warm, the bytes read and deserialized (`jax.export.deserialize`) and
  the same call, a cache load: nothing is traced but the call's small wrapper.

`train` is `make_train(configs/cartpole.yaml)` at `--total-timesteps` (default 4096, 8
updates), taking the key's raw data (uint32 `[2]`) and returning the output's leaves
(`jax.export` serializes only registered pytree types). Every process hashes the leaves
of its output (SHA-256 of their bytes; a PRNG key leaf as its raw data): the two paths must agree
bitwise.

Columns (seconds, each the minimum over `--rounds` interleaved rounds): `import` (`import
purejaxppo` and JAX), `setup` (the config and `make_train`: the env, the networks and the
modules they import; the `export` path's warm start skips it), `trace + lower` (`jit`;
`export`'s cold export, its serialization included), `deserialize` (`export`, warm), `compile + run` (the program's compile or
cache load and its run), `total` (the process's work after its imports).

    python -m benchmarks.export_warm_start                 # 3 rounds (~2 min on 2 cores)
    python -m benchmarks.export_warm_start --rounds 1 --out /tmp/export

Writes `benchmarks/results/export-warm-start-<platform>-<time>.{json,md}` and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import (
    RESULTS,
    ROOT,
    atomic_write,
    machine,
    markdown_lines,
    run_json_process,
    stamp,
    write_results,
)

PATHS = ("jit", "export")
CONFIG = ROOT / "configs" / "cartpole.yaml"
COLUMNS = (
    ("import_s", "import"),
    ("setup_s", "setup"),
    ("trace_lower_s", "trace + lower"),
    ("deserialize_s", "deserialize"),
    ("compile_run_s", "compile + run"),
    ("total_s", "total"),
)


def child(path: str, blob: Path, total_timesteps: int) -> dict:
    """One process of `path` (`jit` or `export`): cold when `blob` (the exported bytes)
    does not exist yet, else warm. Returns its timings and the hash of its output."""
    start = time.perf_counter()
    import hashlib

    import jax
    import numpy as np

    import purejaxppo as pjp
    from purejaxppo.platform import enable_compile_cache

    if enable_compile_cache() is None:
        raise RuntimeError("the persistent compile cache is off in the child")
    imported = time.perf_counter()
    data = jax.random.key_data(jax.random.key(0))
    out: dict = {"import_s": imported - start}

    def program():
        config = pjp.PPOConfig.from_yaml(CONFIG, total_timesteps=total_timesteps)
        train = pjp.make_train(config)

        def raw_leaves(raw):
            leaves = jax.tree.leaves(train(jax.random.wrap_key_data(raw)))
            is_key = jax.dtypes.prng_key
            return [
                jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, is_key) else x
                for x in leaves
            ]

        return jax.jit(raw_leaves)

    if path == "jit" or not blob.exists():
        jitted = program()
        out["setup_s"] = time.perf_counter() - imported
    begin = time.perf_counter()
    if path == "jit":
        lowered = jitted.trace(data).lower()
        traced = time.perf_counter()
        leaves = lowered.compile()(data)
        out["trace_lower_s"] = traced - begin
    elif not blob.exists():
        exported = jax.export.export(jitted)(jax.ShapeDtypeStruct(data.shape, data.dtype))
        serialized = exported.serialize()
        atomic_write(blob, lambda tmp: Path(tmp).write_bytes(serialized))
        traced = time.perf_counter()
        leaves = jax.jit(exported.call)(data)
        out["trace_lower_s"] = traced - begin
    else:
        exported = jax.export.deserialize(bytearray(blob.read_bytes()))
        traced = time.perf_counter()
        leaves = jax.jit(exported.call)(data)
        out["deserialize_s"] = traced - begin
    leaves = jax.device_get(jax.block_until_ready(leaves))
    done = time.perf_counter()
    digest = hashlib.sha256()
    for leaf in leaves:
        digest.update(np.ascontiguousarray(leaf).tobytes())
    out.update(compile_run_s=done - traced, total_s=done - imported, hash=digest.hexdigest())
    return out


def run_round(round_index: int, total_timesteps: int, timeout: float) -> list[dict]:
    """One cold and one warm process per path, each path with a fresh compile cache."""
    rows = []
    for path in PATHS:
        with tempfile.TemporaryDirectory(prefix="export-warm-start-") as work:
            env = {k: v for k, v in os.environ.items() if k != "PUREJAXPPO_NO_COMPILE_CACHE"}
            env["PUREJAXPPO_COMPILE_CACHE"] = str(Path(work) / "cache")
            blob = Path(work) / "train.jaxexport"
            cmd = [sys.executable, "-m", "benchmarks.export_warm_start", "--child", path]
            cmd += ["--blob", str(blob), "--total-timesteps", str(total_timesteps)]
            for start in ("cold", "warm"):
                result = run_json_process(cmd, env=env, timeout=timeout)
                rows.append({"path": path, "start": start, "round": round_index, **result})
                print(f"{path:<7} {start}: {json.dumps(result)}", flush=True)
                if "error" in result:
                    break
    return rows


def table(rows: list[dict]) -> list[str]:
    """Markdown lines: one row per path and start, each cell the minimum over rounds, and
    whether every process of the table gave the same output bits."""
    cells = [["path", "start", *(header for _, header in COLUMNS)]]
    for path in PATHS:
        for start in ("cold", "warm"):
            mine = [r for r in rows if r["path"] == path and r["start"] == start]
            ok = [r for r in mine if "error" not in r]
            line = [f"`{path}`", start]
            for key, _ in COLUMNS:
                values = [r[key] for r in ok if key in r]
                line.append(f"{min(values):.2f}" if values else "")
            cells.append(line if ok else [f"`{path}`", start, "failed"] + [""] * (len(COLUMNS) - 1))
    return markdown_lines(cells, ["---", "---"] + ["--:"] * len(COLUMNS))


def markdown(record: dict) -> str:
    """The Markdown of a results record: how it was measured, whether every process gave
    the same output bits, then `table` of its rows."""
    hashes = {r["hash"] for r in record["rows"] if "hash" in r}
    if not hashes:
        bits = "no process finished"
    elif len(hashes) == 1:
        bits = "every process gave the same output bits"
    else:
        bits = f"the outputs differ: {len(hashes)} distinct hashes"
    lines = [
        f"`{record['command']}` on {record['date']}: {record['platform']}, "
        f"{record['cpu_count']} cores, jax {record['versions'].get('jax')}, load average "
        f"{record['load_average']} at the start, {record['load_average_end']} at the end. "
        f"Seconds, each cell the minimum over {record['rounds']} round(s); {bits}.",
        "",
        *table(record["rows"]),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--total-timesteps", type=int, default=4096, help="of the program")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix")
    parser.add_argument("--child", choices=PATHS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--blob", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.blob, args.total_timesteps)), flush=True)
        return 0
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: must be at least 1")
    if args.total_timesteps < 1:
        parser.error(f"--total-timesteps {args.total_timesteps}: must be at least 1")
    record = machine()
    rows = []
    for round_index in range(args.rounds):
        rows += run_round(round_index, args.total_timesteps, args.timeout)
    import jax

    platform = jax.default_backend()
    out = args.out or RESULTS / f"export-warm-start-{platform}-{stamp()}"
    record.update(what=__doc__.split("\n")[0], rounds=args.rounds, platform=platform)
    record["rows"] = rows
    write_results(out, record, markdown)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
