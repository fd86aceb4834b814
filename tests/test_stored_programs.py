"""A single run's programs stored as `jax.export`s (`stored_programs`): bitwise the
`jax.jit` program's output, loaded when nothing they depend on changed, exported again
when something did, and never stored from Python unless asked.

One tiny CartPole config; its `jax.jit` reference is computed once for the module.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo import stored_programs
from purejaxppo.drivers.program import local_program
from purejaxppo.platform import PROGRAMS_SUBDIRECTORY

CONFIG = pjp.PPOConfig(num_envs=4, num_steps=8, hidden_sizes=(8,), total_timesteps=4 * 8 * 3)


def _digest(tree) -> str:
    """SHA-256 of every leaf's bytes (a PRNG key as its key data)."""
    h = hashlib.sha256()
    for x in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        h.update(np.asarray(x).tobytes())
    return h.hexdigest()


def _run(config, directory) -> str:
    """Init, then segments of 2 and 1 updates, through `local_program` with the store in
    `directory` (None: off); the digest of the final runner state and metrics."""
    with stored_programs.store_in(directory):
        program = local_program(config)
    runner = program.init(jax.random.key(config.seed))
    runner, first = program.segment(2)(runner, program.hparams)
    runner, last = program.segment(1)(runner, program.hparams)
    return _digest((runner, first, last))


@pytest.fixture(scope="module")
def reference() -> str:
    return _run(CONFIG, None)


def _stamps(directory) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}


class _Exports:
    """Counts the `jax.export.export` calls (programs traced and stored)."""

    def __init__(self, monkeypatch):
        self.count = 0
        real = jax.export.export

        def counted(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(jax.export, "export", counted)


def test_stored_programs_compute_the_jit_bits_and_load_on_the_next_start(
    tmp_path, reference, monkeypatch
):
    store = tmp_path / "programs"
    exports = _Exports(monkeypatch)
    assert _run(CONFIG, store) == reference  # exported and stored: init, segment/2, /1
    assert exports.count == 3
    names = sorted(p.suffix for p in store.iterdir())
    assert names == [".jaxexport"] * 3 + [".json"] * 3
    stamps = _stamps(store)
    assert _run(CONFIG, store) == reference  # loaded: nothing traced, nothing written
    assert exports.count == 3
    assert _stamps(store) == stamps
    # Another config is another key: its own programs beside the first ones.
    other = CONFIG.replace(clip_coef=0.1)
    _run(other, store)
    assert exports.count == 6 and len(list(store.iterdir())) == 12


def test_a_changed_module_file_or_a_new_module_exports_again(tmp_path, reference, monkeypatch):
    store = tmp_path / "programs"
    module = tmp_path / "user_module_of_exported_test.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    exports = _Exports(monkeypatch)
    assert _run(CONFIG, store) == reference
    assert exports.count == 3
    try:  # a module loaded now that the entries did not record: traced again
        importlib.import_module(module.stem)
        assert _run(CONFIG, store) == reference
        assert exports.count == 6
        assert _run(CONFIG, store) == reference  # recorded now: loaded
        assert exports.count == 6
        # A recorded file that changed: traced again.
        module.write_text("VALUE = 22\n")
        stat = module.stat()
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        assert _run(CONFIG, store) == reference
        assert exports.count == 9
    finally:
        sys.modules.pop(module.stem, None)


def test_a_corrupt_or_partial_entry_is_exported_again(tmp_path, reference, monkeypatch):
    store = tmp_path / "programs"
    assert _run(CONFIG, store) == reference
    blobs = sorted(store.glob("*.jaxexport"))
    metas = sorted(store.glob("*.json"))
    blobs[0].write_bytes(blobs[0].read_bytes()[:100])  # cut short
    metas[1].write_text("{")  # a partial write of another
    (store / metas[2].name.replace(".json", ".jaxexport")).unlink()  # the export gone
    exports = _Exports(monkeypatch)
    assert _run(CONFIG, store) == reference
    assert exports.count == 3
    exports.count = 0
    assert _run(CONFIG, store) == reference  # the rewritten entries load
    assert exports.count == 0


def test_an_unwritable_store_runs_the_export_from_memory(tmp_path, reference):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert _run(CONFIG, blocked / "programs") == reference
    assert blocked.read_text() == ""


def test_a_program_export_refuses_runs_as_jit(tmp_path):
    def with_callback(x):  # a host callback: `jax.export` refuses it
        doubled = jax.pure_callback(lambda v: v * 2, jax.ShapeDtypeStruct((3,), np.float32), x)
        return doubled + 1

    program = stored_programs.program("callback", with_callback, CONFIG, tmp_path / "programs")
    out = program(np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 3.0, 5.0])
    assert not (tmp_path / "programs").exists()


def test_off_without_a_directory_or_for_a_warm_start(tmp_path, monkeypatch):
    exports = _Exports(monkeypatch)
    assert stored_programs.stored_in() is None
    with stored_programs.store_in(tmp_path / "programs"):
        assert stored_programs.stored_in() == tmp_path / "programs"
        runner = local_program(CONFIG).init(jax.random.key(0))  # stored
        warm = local_program(CONFIG, init_params=runner.train_state.params)
        warm.segment(1)(warm.init(jax.random.key(1)), warm.hparams)  # a warm start: not
    assert stored_programs.stored_in() is None
    assert exports.count == 1


def test_a_runs_directory_leaves_out_host_calls_single_warm_starts_and_processes(
    tmp_path, monkeypatch
):
    directory_for = stored_programs.directory_for
    assert directory_for(host_calls=False, warm_start=False) is None  # the store is off
    with stored_programs.store_in(tmp_path):
        assert directory_for(host_calls=False, warm_start=False) == tmp_path
        assert directory_for(host_calls=True, warm_start=False) is None
        assert directory_for(host_calls=False, warm_start=True) is None
        monkeypatch.setattr(jax, "process_count", lambda: 2)
        assert directory_for(host_calls=False, warm_start=False) is None


def test_a_kind_with_host_calls_is_never_exported(tmp_path, monkeypatch):
    """A gymnasium env (`kinds.EnvKind.host_calls`) runs as `jax.jit`, without the trace
    `jax.export` would refuse."""
    exports = _Exports(monkeypatch)
    config = CONFIG.replace(env_name="gymnasium:CartPole-v1")
    with stored_programs.store_in(tmp_path / "programs"):
        program = local_program(config)
    assert program.fns.kind.host_calls
    runner, metrics = program.segment(1)(program.init(jax.random.key(0)), program.hparams)
    assert np.asarray(metrics["episode_length"]).shape == (1,)
    assert exports.count == 0
    assert not (tmp_path / "programs").exists()


def test_the_cli_stores_only_as_the_process_own_command(tmp_path, monkeypatch):
    """`main(argv)` from Python leaves the store off (a test's or a notebook's patched
    functions are in no file); the `purejaxppo` command itself: `tests/test_platform.py`."""
    from purejaxppo.cli import main

    monkeypatch.setenv("PUREJAXPPO_COMPILE_CACHE", str(tmp_path / "cache"))
    tiny = ["--total-timesteps", "64", "--num-steps", "8", "--num-envs", "4"]
    argv = ["train", "--run-dir", str(tmp_path / "run"), *tiny, "--hidden-sizes", "8"]
    assert main([*argv, "--no-progress"]) == 0
    assert not (tmp_path / "cache" / PROGRAMS_SUBDIRECTORY).exists()
