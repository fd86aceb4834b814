"""CLI defaults (#16): every CPU core for sweeps, and the persistent compile cache."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

EXE = os.path.join(os.path.dirname(sys.executable), "purejaxppo")
TINY = ["--total-timesteps", "256", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]


def _python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_cpu_devices_default_to_the_usable_cores_unless_chosen():
    code = (
        "from purejaxppo.platform import configure_cpu_devices, usable_cores\n"
        "set_to = configure_cpu_devices()\n"
        "import jax\n"
        "print(set_to, usable_cores(), jax.device_count())"
    )
    set_to, cores, count = _python(code).split()
    if int(cores) > 1:
        assert set_to == cores == count
    else:
        assert set_to == "None" and count == "1"
    # The user's choice wins: an env var, or an XLA_FLAGS device count.
    assert _python(code, JAX_NUM_CPU_DEVICES="3").split()[::2] == ["None", "3"]
    flags = "--xla_force_host_platform_device_count=3"
    assert _python(code, XLA_FLAGS=flags).split()[::2] == ["None", "3"]
    # An explicit request; and too late once the backend has started.
    assert _python(code.replace("configure_cpu_devices()", "configure_cpu_devices(4)")).split()[
        ::2
    ] == ["4", "4"]
    late = "import jax; jax.devices()\n" + code
    assert _python(late).split()[0] == "None"
    with pytest.raises(ValueError, match="--devices=0"):
        from purejaxppo.platform import configure_cpu_devices

        configure_cpu_devices(0)


def test_train_fills_the_compile_cache_and_no_compile_cache_keeps_it_empty(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "PUREJAXPPO_COMPILE_CACHE": str(cache)}
    env.pop("PUREJAXPPO_NO_COMPILE_CACHE", None)
    off = subprocess.run(
        [EXE, "train", "--run-dir", str(tmp_path / "a"), "--no-compile-cache", *TINY],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert off.returncode == 0, off.stderr
    assert not cache.exists() or not any(cache.iterdir())
    runs, stored = [], []
    for name in ("b", "c"):
        done = subprocess.run(
            [EXE, "train", "--run-dir", str(tmp_path / name), *TINY],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append((tmp_path / name / "metrics.csv").read_text())
        stored.append({p.name: p.stat().st_mtime_ns for p in (cache / "programs").iterdir()})
    assert any(cache.iterdir())  # compiled programs were stored
    assert runs[0] == runs[1]  # a program from the cache computes the same numbers
    # The run's init and segment were exported by the first run (`stored_programs`) and
    # loaded by the second: none of its entries written again (a segment length the
    # second run's timing alone chose would add its own).
    assert len(stored[0]) >= 4
    assert {name: stored[1].get(name) for name in stored[0]} == stored[0]


#: The commands of many runs that store their programs: argv after the command's name,
#: the flag naming its output, the file holding its numbers, and the columns compared.
MANY_RUNS = {
    "seeds": (["train", "--num-seeds", "3", *TINY], "--run-dir", "metrics.csv", None),
    "sweep": (
        ["sweep", "--seeds", "2", "--grid", "ent_coef=0,0.01", *TINY],
        "--out",
        "runs.csv",
        None,
    ),
    "tune": (
        ["tune", "--trials", "3", "--search", "learning_rate=log_uniform:1e-4:1e-2", *TINY],
        "--out",
        "trials.csv",
        ["number", "value_episode_return", "params_learning_rate"],
    ),
}


@pytest.mark.parametrize("command", sorted(MANY_RUNS))
def test_many_runs_store_their_programs_over_two_devices_and_compute_the_same(tmp_path, command):
    """`train --num-seeds`, `sweep` and `tune` over 2 CPU devices: their `[R]` runs'
    programs, a `shard_map` over the devices, are exported by the first run and loaded by
    the second, whose numbers are those of the run without the store
    (`--no-compile-cache`: plain `jax.jit`)."""
    argv, out_flag, results, columns = MANY_RUNS[command]
    cache = tmp_path / "cache"
    env = {**os.environ, "JAX_NUM_CPU_DEVICES": "2", "PUREJAXPPO_COMPILE_CACHE": str(cache)}
    env.pop("PUREJAXPPO_NO_COMPILE_CACHE", None)
    numbers, stored = [], []
    for name, off in (("off", ["--no-compile-cache"]), ("b", []), ("c", [])):
        run = [EXE, *argv, out_flag, str(tmp_path / name), *off]
        done = subprocess.run(run, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        table = pd.read_csv(tmp_path / name / results)
        numbers.append(table if columns is None else table[columns])
        if not off:
            stored.append({p.name: p.stat().st_mtime_ns for p in (cache / "programs").iterdir()})
    pd.testing.assert_frame_equal(numbers[0], numbers[1], check_exact=True)
    pd.testing.assert_frame_equal(numbers[1], numbers[2], check_exact=True)
    # an export and its record per program (a sweep without its bar: one whole-run program)
    assert len(stored[0]) >= 2
    assert {name: stored[1].get(name) for name in stored[0]} == stored[0]


def test_sweep_warns_once_when_many_runs_share_one_cpu_device_of_a_multicore_machine(
    monkeypatch,
):
    import warnings

    import jax

    from purejaxppo import parallel, platform
    from purejaxppo.drivers.sweeps import driver as sweeps

    mesh = parallel.make_mesh(jax.devices("cpu")[:1], parallel.RUNS_AXIS)
    monkeypatch.setattr(platform, "usable_cores", lambda: 4)
    monkeypatch.setattr(sweeps, "_WARNED_ONE_CPU_DEVICE", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sweeps._warn_one_cpu_device(mesh, num_runs=1)  # one run: nothing to split
        sweeps._warn_one_cpu_device(mesh, num_runs=8)
        sweeps._warn_one_cpu_device(mesh, num_runs=8)  # once per process
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "8 runs on one CPU device" in messages[0]
    assert 'jax.config.update("jax_num_cpu_devices", 4)' in messages[0]
