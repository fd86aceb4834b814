"""Export errors and safety: mismatched params, vmapped params (index), overwrite refusal,
non-finite params, custom networks, missing onnx, the CLI. Random params from
`jax.eval_shape` (no JAX compilation); CartPole MLP, the cheapest network."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest
import torch

import purejaxppo as pjp
from purejaxppo.export import export_onnx, export_torch
from purejaxppo.networks import make_networks

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _setup(hidden_sizes=(16, 8), seed=0):
    config = pjp.PPOConfig(env_name="CartPole-v1", hidden_sizes=hidden_sizes)
    networks = make_networks(config, *pjp.make_env("CartPole-v1"))
    rng = np.random.default_rng(seed)
    shapes = jax.eval_shape(networks.init, jax.random.key(0))
    params = jax.tree.map(lambda s: rng.normal(0, 0.5, s.shape).astype(np.float32), shapes)
    return config, networks, params


def _flat(params):
    return params["params"]


def test_mismatched_params_list_what_differs(tmp_path):
    config, _, params = _setup()
    other, _, _ = _setup(hidden_sizes=(16, 12))
    with pytest.raises(ValueError, match="actor_encoder/obs_mlp/dense_1/kernel has shape") as err:
        export_torch(params, other, tmp_path / "p.pt")
    assert "expected (16, 12)" in str(err.value)
    del _flat(params)["critic_head"]
    _flat(params)["extra"] = {"kernel": np.zeros((2, 2), np.float32)}
    with pytest.raises(
        ValueError, match=r"missing \['critic_head/out/bias'.*unexpected \['extra/kernel'\]"
    ):
        export_torch(params, config, tmp_path / "p.pt")
    assert not list(tmp_path.iterdir())


def test_index_selects_one_vmapped_agent(tmp_path):
    config, _, params = _setup()
    _, _, params_1 = _setup(seed=1)
    stacked = jax.tree.map(lambda a, b: np.stack([a, b]), params, params_1)
    with pytest.raises(ValueError, match="leading axis of 2 agents.*pass index=i"):
        export_torch(stacked, config, tmp_path / "a.pt")
    with pytest.raises(ValueError, match="index=5 is out of range"):
        export_torch(stacked, config, tmp_path / "a.pt", index=5)
    with pytest.raises(ValueError, match="index=0 was given but the params have no leading"):
        export_torch(params, config, tmp_path / "a.pt", index=0)
    export_torch(stacked, config, tmp_path / "a.pt", index=1)
    export_torch(params_1, config, tmp_path / "b.pt")
    got = torch.load(tmp_path / "a.state_dict.pt")
    want = torch.load(tmp_path / "b.state_dict.pt")
    assert got.keys() == want.keys()
    for k in got:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=0)


def test_overwrite_is_refused_and_keeps_the_old_files(tmp_path):
    config, _, params = _setup()
    _, _, params_1 = _setup(seed=1)
    export_torch(params, config, tmp_path / "policy.pt")
    export_onnx(params, config, tmp_path / "policy.onnx")  # beside the torch files
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert {p.name for p in before} == {
        "policy.pt", "policy.pt2", "policy.state_dict.pt", "policy.module.py", "policy.json",
        "policy.onnx", "policy.onnx.json",
    }  # fmt: skip
    with pytest.raises(FileExistsError, match="policy.pt exists; pass overwrite=True"):
        export_torch(params_1, config, tmp_path / "policy.pt")
    (tmp_path / "policy.pt").unlink()  # one file gone: the others still block the export
    with pytest.raises(FileExistsError, match="policy.pt2 exists"):
        export_torch(params_1, config, tmp_path / "policy.pt")
    with pytest.raises(FileExistsError, match="policy.onnx exists"):
        export_onnx(params_1, config, tmp_path / "policy.onnx")
    for path, data in before.items():
        assert path.name == "policy.pt" or path.read_bytes() == data, path
    export_torch(params_1, config, tmp_path / "policy.pt", overwrite=True)
    assert (tmp_path / "policy.state_dict.pt").read_bytes() != before[
        tmp_path / "policy.state_dict.pt"
    ]
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]  # no temp dirs left


def test_a_failure_inside_the_commit_keeps_the_old_export_whole(tmp_path, monkeypatch):
    import os

    config, _, params = _setup()
    _, _, params_1 = _setup(seed=1)
    export_torch(params, config, tmp_path / "policy.pt")
    export_onnx(params, config, tmp_path / "policy.onnx")
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    replace, calls = os.replace, []

    def fails_late(src, dst):  # the old files are aside, 2 new ones are in: then it fails
        calls.append(dst)
        if len(calls) == 8 or (len(calls) == 3 and str(dst).endswith(".onnx")):
            raise OSError("no space left")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", fails_late)
    with pytest.raises(OSError, match="no space left"):
        export_torch(params_1, config, tmp_path / "policy.pt", overwrite=True)
    calls.clear()
    with pytest.raises(OSError, match="no space left"):
        export_onnx(params_1, config, tmp_path / "policy.onnx", overwrite=True)
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temp dir either


def test_non_finite_params_are_refused(tmp_path):
    config, _, params = _setup()
    _flat(params)["critic_head"]["out"]["bias"][0] = np.nan
    with pytest.raises(ValueError, match="param critic_head/out/bias is not finite"):
        export_torch(params, config, tmp_path / "p.pt")
    with pytest.raises(ValueError, match="not finite"):
        export_onnx(params, config, tmp_path / "p.onnx")
    assert not list(tmp_path.iterdir())


def test_custom_networks_are_refused(tmp_path):
    config, networks, params = _setup()
    with pytest.raises(ValueError, match="export needs the built-in networks"):
        export_torch(params, config, tmp_path / "p.pt", networks=networks._replace(module=None))


def test_missing_onnx_names_the_extra(tmp_path, monkeypatch):
    config, _, params = _setup()
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r'pip install "purejaxppo\[onnx\]"'):
        export_onnx(params, config, tmp_path / "p.onnx")


def test_import_purejaxppo_does_not_import_torch_or_onnx():
    import subprocess

    code = (
        "import sys, purejaxppo, purejaxppo.export\n"
        "assert 'torch' not in sys.modules and 'onnx' not in sys.modules\n"
        "print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
