"""Builds the `gpu-trace` results file from the files of a `trace_gpu.sh` call.

Each input is `library:agents:FILES`, FILES being `perfetto.json.gz,hlo.txt.gz` (the raw
trace came back) or `summary.log,hlo.txt.gz` (only the printed summary did: the device call
returns few files). The phases of one update come from `trace_update.summarize` /
`summarize_log`; parameter initialisation (the orthogonal init's QR, once per run) is
reported apart, since a traced run of 10 updates over-weights it.

    python -m benchmarks.gpu.trace_results --device "NVIDIA H200" --updates 10 \\
        ours:4096:perfetto-ours-4096-auto.json.gz,hlo-ours-4096-auto.txt.gz \\
        rejax:4096:rejax-4096.log,hlo-rejax-4096.txt.gz --out benchmarks/results/gpu-trace.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from benchmarks import trace_update
from benchmarks.harness import portable


def row(spec: str, updates: int) -> dict:
    library, agents, files = spec.split(":", 2)
    first, hlo = files.split(",")
    text = gzip.open(hlo, "rt").read()
    if first.endswith(".json.gz"):
        with gzip.open(first, "rt") as f:
            summary = trace_update.summarize(json.load(f), text, updates)
        source = "profiler trace"
    else:
        summary = trace_update.summarize_log(Path(first).read_text().splitlines(), text)
        source = "printed trace summary (the raw trace did not come back from the device)"
    phases = dict(summary["phases_ms_per_update"])
    init = phases.pop("other", 0.0)  # parameter initialisation, once per run
    rest = sum(v for k, v in phases.items() if k not in ("rollout", "epochs"))
    return {
        "library": library,
        "agents": int(agents),
        "rollout_ms": phases.get("rollout", 0.0),
        "epochs_ms": phases.get("epochs", 0.0),
        "rest_ms": rest,
        "update_ms": phases.get("rollout", 0.0) + phases.get("epochs", 0.0) + rest,
        "init_ms_per_traced_update": init,
        "phases_ms_per_update": phases,
        "source": source,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--device", required=True)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--note", default="")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rows = [row(spec, args.updates) for spec in args.inputs]
    record = {
        "what": "device time of one CartPole update per phase, from kernel traces "
        "(benchmarks/trace_update.py; GPU command buffers matched to the loops they run)",
        "device": args.device,
        "note": args.note,
        "command": portable(" ".join(sys.argv)),
        "rows": rows,
    }
    args.out.write_text(json.dumps(record, indent=1))
    for r in rows:
        print(
            f"{r['library']:6s} {r['agents']:5d}: rollout {r['rollout_ms']:.2f}  epochs "
            f"{r['epochs_ms']:.2f}  rest {r['rest_ms']:.2f}  update {r['update_ms']:.2f} ms"
        )


if __name__ == "__main__":
    main()
