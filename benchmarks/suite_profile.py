"""Where the test suite's time goes: JAX compile events of every process pytest starts.

    python -m benchmarks.suite_profile                      # README's test command, profiled
    python -m benchmarks.suite_profile -- tests/test_kinds.py -n 2 --dist loadfile
    python -m benchmarks.suite_profile --report EVENTS_DIR --durations pytest.log

`pytest` runs with a `sitecustomize` on `PYTHONPATH` (written to a temporary folder, the
standard library only) that every Python process the tests start loads too: once `jax` is
imported it listens to JAX's own compile events (`jax._src.monitoring`: trace, lowering,
XLA compile, persistent-cache load; a cache hit's "XLA compile" event times its load)
and wraps the persistent cache's hit / miss log calls
(the program's name and cache key), and writes each event, with the test that was running
(`PYTEST_CURRENT_TEST`, inherited by subprocesses), as one JSON line per process. The
report adds them up:

* by module: pytest's seconds (`--durations=0`: setup + call + teardown), trace, lower and
  XLA compile seconds, programs compiled, cache hits, and the seconds of the Python
  processes the tests started (from start to exit, overlapping the test's own);
* small programs (XLA compile under a second: eager ops, `jax.random` calls, small jits)
  against the big ones;
* the same program compiled more than once (same cache key): concurrent processes, and
  programs with host callbacks, which the persistent cache does not keep.

Results: `benchmarks/results/suite-profile-cpu-<time>.{json,md}`. The events are read
from a folder of JSON lines, so a profiled `.ci/run` can be reported later
(`--hook DIR` writes the hook; `PJP_SUITE_PROFILE_DIR=EVENTS PYTHONPATH=DIR bash .ci/run`,
then `--report EVENTS --durations LOG`, LOG holding pytest's `--durations=0` lines).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT, machine, markdown_lines, stamp, write_results

#: Where the hook writes (one `p<pid>.jsonl` per process); unset, it does nothing.
EVENTS_ENV = "PJP_SUITE_PROFILE_DIR"
#: The README's test command's pytest arguments, plus per-test seconds.
PYTEST_ARGS = ["-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider", "--durations=0"]
#: XLA compile seconds at or above which a program counts as big.
BIG_S = 1.0
COMPILE_EVENTS = {
    "jaxpr_trace_duration": "trace",
    "jaxpr_to_mlir_module_duration": "lower",
    "backend_compile_duration": "compile",
    "cache_retrieval_time_sec": "load",
}

HOOK = '''"""benchmarks.suite_profile's hook: JAX compile events of this process, as JSON lines."""
import atexit, importlib.abc, importlib.util, json, os, sys, time

_DIR = os.environ.get("PJP_SUITE_PROFILE_DIR")


def _write(record):
    record.update(pid=os.getpid(), test=os.environ.get("PYTEST_CURRENT_TEST", ""), t=time.time())
    with open(os.path.join(_DIR, f"p{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\\n")


def _install():
    from jax._src import compiler, monitoring

    def duration(event, seconds, **_):
        name = event.rsplit("/", 1)[-1]
        if name in ("jaxpr_trace_duration", "jaxpr_to_mlir_module_duration",
                    "backend_compile_duration", "cache_retrieval_time_sec"):
            _write({"ev": name, "s": seconds})

    monitoring.register_event_duration_secs_listener(duration)
    hit, miss = compiler.log_persistent_cache_hit, compiler.log_persistent_cache_miss

    def logged_hit(name, key):
        _write({"ev": "hit", "name": name, "key": key})
        return hit(name, key)

    def logged_miss(name, key):
        _write({"ev": "miss", "name": name, "key": key})
        return miss(name, key)

    compiler.log_persistent_cache_hit, compiler.log_persistent_cache_miss = logged_hit, logged_miss


class _AfterJax(importlib.abc.MetaPathFinder):
    """Runs `_install` right after `import jax` finishes (and never imports it itself)."""

    def find_spec(self, name, path, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        real = spec.loader

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return real.create_module(spec)

            def exec_module(self, module):
                real.exec_module(module)
                try:
                    _install()
                except Exception as err:  # another jax: the events' names moved
                    _write({"ev": "hook_failed", "error": repr(err)})

        spec.loader = Loader()
        return spec


if _DIR:
    _START = time.time()
    _write({"ev": "start", "argv": sys.argv[:4]})
    atexit.register(lambda: _write({"ev": "exit", "s": time.time() - _START}))
    sys.meta_path.insert(0, _AfterJax())
'''


def test_of(record: dict) -> str:
    """The test id without pytest's phase (`PYTEST_CURRENT_TEST` ends with ` (call)`)."""
    return re.sub(r" \((setup|call|teardown)\)$", "", record.get("test", ""))


def module_of(test: str) -> str:
    """The test's file (`tests/test_x.py`), or "(outside a test)" for an empty id."""
    return test.split("::")[0] or "(outside a test)"


def read_events(folder: Path) -> tuple[list[dict], list[dict]]:
    """`(programs, processes)` from the hook's files. A program is a dict: name, key, hit,
    test, pid, and its trace / lower / compile / load seconds; its trace and lowering
    are the events before its cache hit / miss in its process, its XLA compile and cache
    load the ones after; a process is its start record with its seconds to exit (None when
    it did not exit normally)."""
    programs, processes = [], []
    for path in sorted(folder.glob("p*.jsonl")):
        pending = {"trace": 0.0, "lower": 0.0}
        process = None
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a process killed mid-line
                continue
            event = record["ev"]
            if event == "start":
                process = {"test": test_of(record), "argv": record["argv"], "s": None}
                processes.append(process)
            elif event == "exit" and process is not None:
                process["s"] = record["s"]
            elif event in ("hit", "miss"):
                program = dict(pending, name=record["name"], key=record["key"])
                program.update(hit=event == "hit", test=test_of(record), pid=record["pid"])
                program.update(compile=0.0, load=0.0)
                programs.append(program)
                pending = {"trace": 0.0, "lower": 0.0}
            elif event in COMPILE_EVENTS:
                field = COMPILE_EVENTS[event]
                if field in ("trace", "lower"):
                    pending[field] += record["s"]
                elif programs and programs[-1]["pid"] == record["pid"]:
                    programs[-1][field] += record["s"]
    return programs, processes


def read_durations(log: Path) -> dict[str, float]:
    """Seconds per test (setup + call + teardown) from pytest's `--durations=0` lines."""
    seconds: dict[str, float] = collections.Counter()
    for line in log.read_text().splitlines():
        match = re.match(r"\s*([\d.]+)s (?:setup|call|teardown)\s+(\S+)", line)
        if match:
            seconds[match.group(2)] += float(match.group(1))
    return seconds


def summarize(programs: list[dict], processes: list[dict], durations: dict) -> dict:
    """The report's numbers (see the module docstring), over the programs compiled while a
    test ran (not pytest's collection, nor commands run after it, e.g. `.ci/run`'s gate)."""
    outside = [p for p in programs if not p["test"]]
    programs = [p for p in programs if p["test"]]
    modules: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for test, seconds in durations.items():
        modules[module_of(test)]["pytest_s"] += seconds
    for p in programs:
        row = modules[module_of(p["test"])]
        for field in ("trace", "lower", "compile", "load"):
            row[f"{field}_s"] += p[field]
        row["hits" if p["hit"] else "compiled"] += 1
    for proc in processes:
        if proc["test"] and proc["s"] is not None:
            modules[module_of(proc["test"])]["process_s"] += proc["s"]
            modules[module_of(proc["test"])]["processes"] += 1

    def totals(group: list[dict]) -> dict:
        return {
            "programs": len(group),
            **{f"{f}_s": round(sum(p[f] for p in group), 1) for f in ("trace", "lower", "compile")},
        }

    big = [p for p in programs if p["compile"] >= BIG_S]
    small = [p for p in programs if p["compile"] < BIG_S]
    by_key = collections.defaultdict(list)
    for p in programs:
        if not p["hit"] and p["compile"] > 0:
            by_key[p["key"]].append(p)
    repeated = {k: v for k, v in by_key.items() if len(v) > 1}
    repeats = sorted(repeated.values(), key=lambda v: -sum(p["compile"] for p in v[1:]))
    names = collections.Counter()
    for p in big:
        names[p["name"]] += p["compile"]
    return {
        "pytest_s": round(sum(durations.values()), 1),
        "outside_tests": totals(outside),
        "big": totals(big),
        "small": totals(small),
        "hits": sum(p["hit"] for p in programs),
        "processes": len([p for p in processes if p["test"]]),
        "process_s": round(sum(p["s"] or 0 for p in processes if p["test"]), 1),
        "recompiled": {
            "programs": len(repeated),
            "extra_compile_s": round(sum(p["compile"] for v in repeats for p in v[1:]), 1),
            "top": [
                {"name": v[0]["name"], "times": len(v), "tests": sorted({p["test"] for p in v})[:3]}
                for v in repeats[:10]
            ],
        },
        "big_by_name": [{"name": n, "compile_s": round(s, 1)} for n, s in names.most_common(10)],
        "modules": sorted(
            (
                {"module": m, **{k: round(v, 1) for k, v in row.items()}}
                for m, row in modules.items()
            ),
            key=lambda r: -r.get("pytest_s", 0),
        ),
    }


def markdown(record: dict) -> str:
    s = record["summary"]
    lines = [
        f"# Where the test suite's time goes ({record['stamp']})",
        "",
        f"`{record['command']}`; pytest's seconds over every test: **{s['pytest_s']:.0f}**.",
        "",
    ]
    rows = [
        [kind, s[kind]["programs"], s[kind]["trace_s"], s[kind]["lower_s"], s[kind]["compile_s"]]
        for kind in ("big", "small")
    ]
    head = [f"programs (XLA compile >= {BIG_S:g} s: big)", "n", "trace s", "lower s", "compile s"]
    lines += markdown_lines([head, *rows], ["---", "--:", "--:", "--:", "--:"])
    r = s["recompiled"]
    lines += [
        "",
        f"Persistent-cache hits: {s['hits']}. Python processes the tests started: "
        f"{s['processes']}, {s['process_s']:.0f} s from start to exit. The same program "
        f"compiled again: {r['programs']} programs, {r['extra_compile_s']:.0f} s.",
        "",
    ]
    columns = ["pytest_s", "trace_s", "lower_s", "compile_s", "compiled", "hits", "process_s"]
    head = ["module", "pytest s", "trace s", "lower s", "compile s", "compiled", "hits"]
    head.append("processes s")
    body = [[m["module"], *(f"{m.get(c, 0):.0f}" for c in columns)] for m in s["modules"][:25]]
    lines += markdown_lines([head, *body], ["---"] + ["--:"] * 7)
    return "\n".join(lines) + "\n"


def run_pytest(args: list[str], events: Path, log: Path) -> int:
    """The suite with the hook on every process's path; pytest's output to `log`."""
    hook_dir = Path(tempfile.mkdtemp(prefix="suite-profile-hook-"))
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    env = dict(os.environ, **{EVENTS_ENV: str(events)})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")]))
    with log.open("w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hook", type=Path, help="write the hook to this folder, no run")
    parser.add_argument("--report", type=Path, help="a folder of events to report, no run")
    parser.add_argument("--durations", type=Path, help="with --report: pytest's output")
    parser.add_argument("--out", type=Path, default=None, help="results path, no suffix")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args(argv)
    when = stamp()
    if args.hook:
        args.hook.mkdir(parents=True, exist_ok=True)
        (args.hook / "sitecustomize.py").write_text(HOOK)
        print(f"PYTHONPATH={args.hook} {EVENTS_ENV}=<an empty folder> <command>")
        return 0
    if args.report:
        events, log = args.report, args.durations
    else:
        events = Path(tempfile.mkdtemp(prefix="suite-profile-events-"))
        log = events / "pytest.log"
        code = run_pytest(args.pytest_args or PYTEST_ARGS, events, log)
        print(f"pytest exited {code}; its output: {log}")
    programs, processes = read_events(events)
    durations = read_durations(log) if log and log.exists() else {}
    record = machine(stamp=when, summary=summarize(programs, processes, durations))
    out = args.out or RESULTS / f"suite-profile-cpu-{when}"
    write_results(out, record, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
