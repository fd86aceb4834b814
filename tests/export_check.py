"""Torch-only parity check of exported policies (run by test_export_torch.py).

`python export_check.py cases.json`: for each case folder (policy.* files and the JAX
reference expected.npz) runs the module source + state_dict, the .pt2 program and the
TorchScript file (where written) and prints `{case: {route/output: max abs error}}` as
JSON on the last line. Imports torch and numpy only, and asserts that jax, flax and
purejaxppo were never imported (a deployment without them).
"""

import importlib.util
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

FORBIDDEN = ("jax", "jaxlib", "flax", "purejaxppo")
warnings.simplefilter("ignore")
torch.set_grad_enabled(False)


def max_err(got, want):
    got = np.asarray(got.detach().numpy() if isinstance(got, torch.Tensor) else got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.max(np.abs(got - want))) if got.size else 0.0


def mismatches(got, want):
    """Greedy actions: count of differing entries (integers) or max abs error (floats)."""
    got = got.numpy()
    if np.issubdtype(want.dtype, np.integer):
        assert got.shape == want.shape, (got.shape, want.shape)
        return int(np.sum(got != want))
    return max_err(got, want)


def build_obs(structure, arrays, path=()):
    if isinstance(structure, dict):
        return {k: build_obs(v, arrays, (*path, k)) for k, v in structure.items()}
    if isinstance(structure, list):
        return tuple(build_obs(v, arrays, (*path, i)) for i, v in enumerate(structure))
    return arrays[path]


def load_module(folder):
    spec = importlib.util.spec_from_file_location("exported_policy", folder / "policy.module.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def observations(meta, data, t=None):
    arrays = {}
    for entry in meta["observation"]["arrays"]:
        x = data["obs." + "/".join(map(str, entry["path"]))]
        arrays[tuple(entry["path"])] = torch.from_numpy(x if t is None else x[t])
    return build_obs(meta["observation"]["structure"], arrays)


def check_feed_forward(net, meta, data, errors, tag, greedy=True):
    actor_out, value = net(observations(meta, data))
    errors[f"{tag}/actor_out"] = max_err(actor_out, data["actor_out"])
    errors[f"{tag}/value"] = max_err(value, data["value"])
    if greedy:
        errors[f"{tag}/greedy"] = mismatches(
            net.act_greedy(observations(meta, data)), data["greedy"]
        )


def check_recurrent(net, meta, data, errors, tag, greedy=True, first=0):
    steps = data["resets"].shape[0]
    state = torch.from_numpy(data["state_in"][first]) if first else None
    worst = {}
    for t in range(first, steps):
        obs = observations(meta, data, t)
        if state is None:
            state = (
                net.initial_state(data["resets"].shape[1])
                if greedy
                else torch.zeros_like(torch.from_numpy(data["state_in"][0]))
            )
        if t > first or not first:
            done = torch.from_numpy(data["resets"][t])
            state = (
                net.reset_state(state, done)
                if greedy
                else torch.where(done[:, None], torch.zeros_like(state), state)
            )
        got = {"state_in": max_err(state, data["state_in"][t])}
        if greedy:
            action, _ = net.act_greedy(obs, state)
            got["greedy"] = mismatches(action, data["greedy"][t])
        actor_out, value, state = net(obs, state)
        got["actor_out"] = max_err(actor_out, data["actor_out"][t])
        got["value"] = max_err(value, data["value"][t])
        got["state_out"] = max_err(state, data["state_out"][t])
        for k, v in got.items():
            worst[k] = max(worst.get(k, 0), v)
    for k, v in worst.items():
        errors[f"{tag}/{k}"] = v


def check_case(folder, case):
    meta = json.loads((folder / "policy.json").read_text())
    data = dict(np.load(folder / "expected.npz"))
    check = check_recurrent if case["stateful"] else check_feed_forward
    errors = {}
    module = load_module(folder)
    state_dict = torch.load(folder / "policy.state_dict.pt")
    net = getattr(module, meta["class_name"])(**meta["constructor"])
    net.load_state_dict(state_dict, strict=True)
    net.eval()
    check(net, meta, data, errors, "module")
    if case["stateful"]:  # state handover: torch continues from JAX's mid-sequence state
        check(net, meta, data, errors, "module_handover", first=4)
    if meta["action"]["kind"] == "continuous":
        errors["module/log_std"] = max_err(net.log_std, data["log_std"])
    program = torch.export.load(folder / "policy.pt2").module()
    check(program, meta, data, errors, "pt2", greedy=False)
    if meta["torchscript"]["written"]:
        check(torch.jit.load(str(folder / "policy.pt")), meta, data, errors, "torchscript")
    if "mutate" in case:  # a wrong transpose must show
        bad = dict(state_dict)
        bad[case["mutate"]] = bad[case["mutate"]].T.contiguous()
        net.load_state_dict(bad, strict=True)
        mutated = {}
        check(net, meta, data, mutated, "mutated", greedy=False)
        errors.update(mutated)
    return errors


def main():
    cases = json.loads(Path(sys.argv[1]).read_text())
    results = {name: check_case(Path(case["dir"]), case) for name, case in cases.items()}
    for name in FORBIDDEN:
        assert name not in sys.modules, f"{name} was imported"
    print(json.dumps(results))


if __name__ == "__main__":
    main()
