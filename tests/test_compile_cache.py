"""The persistent compile cache is the default on every platform (CPU, GPU, TPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from purejaxppo.platform import CACHE_DIR_ENV, NO_CACHE_ENV, compile_cache_setting


@pytest.mark.parametrize("platforms", [None, "cpu", "cuda", "gpu", "rocm", "tpu", "cuda,cpu"])
def test_the_cache_is_on_by_default_whatever_the_platform(platforms, tmp_path):
    environ = {"XDG_CACHE_HOME": str(tmp_path)}
    if platforms is not None:
        environ["JAX_PLATFORMS"] = platforms
    assert compile_cache_setting(environ) == tmp_path / "purejaxppo" / "jax"
    # ... and off the same way everywhere.
    assert compile_cache_setting({**environ, NO_CACHE_ENV: "1"}) is None
    assert compile_cache_setting(environ, enabled=False) is None


def test_cache_setting_from_the_environment(tmp_path):
    moved = tmp_path / "elsewhere"
    assert compile_cache_setting({CACHE_DIR_ENV: str(moved), "XDG_CACHE_HOME": "/x"}) == moved
    assert compile_cache_setting({NO_CACHE_ENV: "0", CACHE_DIR_ENV: str(moved)}) == moved
    assert compile_cache_setting({NO_CACHE_ENV: "", CACHE_DIR_ENV: str(moved)}) == moved
    assert compile_cache_setting({NO_CACHE_ENV: "yes", CACHE_DIR_ENV: str(moved)}) is None
    assert compile_cache_setting({}) == Path.home() / ".cache" / "purejaxppo" / "jax"
