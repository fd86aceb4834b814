"""PyTorch export (`purejaxppo.export.export_torch`): parity with the JAX network.

The main parity check runs in a fresh Python process that imports torch and numpy only
(it asserts that neither jax nor purejaxppo is loaded), as a user's deployment would.
Hidden sizes are non-square (48, 24) and every parameter is perturbed away from its init
(biases and log_std are 0 at init; the 0.01-scaled policy head would make near-ties), so a
missing transpose, a dropped bias or log_std, or a wrong activation shows as a large error.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.networks import ActorCritic, action_spec
from purejaxppo.rollout import to_env_action

# torch is a test requirement (pip install -e ".[test,torch]" installs torch==2.13.0).

HIDDEN = (48, 24)
NUM_OBS = 1000
TOL = 1e-5

# Run as `python check.py data.npz policy.pt` in a fresh process: loads the TorchScript file
# and, separately, the state_dict into the exported module source; prints the max abs
# errors as JSON on the last line, then asserts them.
CHECK_SCRIPT = r"""
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import torch

TOL = float(sys.argv[3])
data_path, policy = Path(sys.argv[1]), Path(sys.argv[2])
for name in ("jax", "jaxlib", "flax", "purejaxppo"):
    assert name not in sys.modules, f"{name} was imported"
data = np.load(data_path)
meta = json.loads(policy.with_suffix(".json").read_text())
continuous = meta["action_kind"] == "continuous"
obs = torch.from_numpy(data["obs"])
errors = {}
details = {}  # where each maximum error is: printed if the check fails


def max_err(key, got, want):
    got = got.detach().numpy().astype(np.float64)
    assert got.shape == want.shape, (key, got.shape, want.shape)
    diff = np.abs(got - want.astype(np.float64))
    if diff.size == 0:
        return 0.0
    at = np.unravel_index(np.argmax(diff), diff.shape)
    details[key] = f"at {tuple(map(int, at))}: got {got[at]!r}, want {want[at]!r}"
    return float(diff[at])


def compare(tag, net):
    with torch.no_grad():
        actor_out, value = net(obs)
        greedy = net.act_greedy(obs)
    for key, got in (("actor_out", actor_out), ("value", value)):
        errors[f"{tag}/{key}"] = max_err(f"{tag}/{key}", got, data[key])
    if continuous:
        errors[f"{tag}/log_std"] = max_err(f"{tag}/log_std", net.log_std, data["log_std"])
        errors[f"{tag}/greedy"] = max_err(f"{tag}/greedy", greedy, data["greedy"])
        errors[f"{tag}/bounds"] = max(
            max_err(f"{tag}/low", net.action_low, data["action_low"]),
            max_err(f"{tag}/high", net.action_high, data["action_high"]),
        )
    else:
        assert greedy.dtype == torch.int64, greedy.dtype
        # Number of differing greedy actions: must be 0 (identical actions).
        errors[f"{tag}/greedy_mismatches"] = int(np.sum(greedy.numpy() != data["greedy"]))


compare("torchscript", torch.jit.load(str(policy)))

spec = importlib.util.spec_from_file_location("exported_policy", policy.with_suffix(".module.py"))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
net = getattr(module, meta["class_name"])(**meta["constructor"])
net.load_state_dict(torch.load(policy.with_suffix(".state_dict.pt")))
net.eval()
compare("state_dict", net)

for name in ("jax", "jaxlib", "flax", "purejaxppo"):
    assert name not in sys.modules, f"{name} was imported"
print(json.dumps(errors))
bad = {k: v for k, v in errors.items() if v > TOL}
assert not bad, f"errors above {TOL}: {bad}; {[details.get(k) for k in bad]}"
"""


# --------------------------------------------------------------------- helpers


def _setup(env_name, activation="tanh", hidden_sizes=HIDDEN, seed=0):
    """Config, env, random (perturbed) params and the JAX module for `env_name`."""
    config = pjp.PPOConfig(env_name=env_name, hidden_sizes=hidden_sizes, activation=activation)
    env, env_params = pjp.make_env(env_name)
    spec = action_spec(env, env_params)
    init, _ = pjp.make_networks(config, env, env_params)
    key_init, key_noise = jax.random.split(jax.random.key(seed))
    params = init(key_init)
    # Perturb every leaf: kernels by N(0, 1/fan_in) (O(1) outputs, no near-tied logits),
    # biases and log_std (zeros at init) by N(0, 0.5^2).
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(key_noise, len(leaves))
    leaves = [
        leaf
        + jax.random.normal(k, leaf.shape)
        * (1.0 / math.sqrt(leaf.shape[0]) if leaf.ndim == 2 else 0.5)
        for k, leaf in zip(keys, leaves, strict=True)
    ]
    params = jax.tree.unflatten(treedef, leaves)
    # A larger policy head: Gaussian means beyond the Box bounds (clipped greedy actions).
    head = params["params"]["actor"][f"Dense_{len(hidden_sizes)}"]
    head["kernel"] = 4.0 * head["kernel"]
    return config, env, env_params, spec, params


def _expected(config, env, env_params, spec, params, num_obs=NUM_OBS, seed=1):
    """Random observations and the JAX network's outputs on them (CPU)."""
    space = env.observation_space(env_params)
    obs_shape = tuple(space.shape)
    if np.all(np.asarray(space.low) == 0) and np.all(np.asarray(space.high) == 1):
        # Binary feature maps (MinAtar): sparse 0/1 observations as the env gives them.
        bits = jax.random.bernoulli(jax.random.key(seed), 0.2, (num_obs, *obs_shape))
        obs = bits.astype(jnp.float32)
    else:
        obs = 2.0 * jax.random.normal(jax.random.key(seed), (num_obs, *obs_shape), jnp.float32)
    module = ActorCritic(
        num_outputs=spec.num_actions,
        hidden_sizes=tuple(config.hidden_sizes),
        activation=config.activation,
        continuous=not spec.discrete,
    )
    actor_out, value, log_std = module.apply(params, obs)
    # Greedy action as purejaxppo defines it: the distribution's mode, as the env takes it.
    _, apply = pjp.make_networks(config, env, env_params)
    dist, value2 = apply(params, obs)
    greedy = to_env_action(spec, dist.mode())
    np.testing.assert_array_equal(value, value2)
    data = {
        "obs": np.asarray(obs, np.float32),
        "actor_out": np.asarray(actor_out),
        "value": np.asarray(value),
        "greedy": np.asarray(greedy),
    }
    if spec.discrete:
        # Test-data sanity: no near-ties, so float error cannot flip an argmax.
        top2 = np.sort(data["actor_out"], axis=-1)[:, -2:]
        assert np.min(top2[:, 1] - top2[:, 0]) > 1e-4
    else:
        data["log_std"] = np.asarray(log_std)
        data["action_low"] = np.asarray(spec.low, np.float32)
        data["action_high"] = np.asarray(spec.high, np.float32)
        assert np.all(data["log_std"] != 0)
        # Test-data sanity: both clipped and unclipped greedy actions occur.
        clipped = (data["greedy"] == data["action_low"]) | (data["greedy"] == data["action_high"])
        assert 0 < clipped.mean() < 1, clipped.mean()
    return data


def _run_check(data_path, policy_path):
    proc = subprocess.run(
        [sys.executable, "-c", CHECK_SCRIPT, str(data_path), str(policy_path), str(TOL)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(data_path.parent),
    )
    lines = proc.stdout.strip().splitlines()
    errors = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    return proc, errors


@pytest.fixture(scope="module", params=["CartPole-v1", "Pendulum-v1"])
def exported(request, tmp_path_factory):
    """An export of random params for a discrete and a continuous env, with JAX outputs."""
    env_name = request.param
    tmp = tmp_path_factory.mktemp(env_name)
    config, env, env_params, spec, params = _setup(env_name, activation="tanh")
    data = _expected(config, env, env_params, spec, params)
    np.savez(tmp / "expected.npz", **data)
    from purejaxppo.export import export_torch

    policy = export_torch(params, config, tmp / "policy.pt")
    return {
        "dir": tmp,
        "policy": policy,
        "data": tmp / "expected.npz",
        "config": config,
        "env": env,
        "env_params": env_params,
        "spec": spec,
        "params": params,
    }


# --------------------------------------------------------------------- tests


def test_import_purejaxppo_does_not_import_torch():
    code = (
        "import sys, purejaxppo, purejaxppo.export\n"
        "from purejaxppo.export import export_torch\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_export_files(exported):
    policy = exported["policy"]
    assert policy == exported["dir"] / "policy.pt"
    for suffix in (".pt", ".state_dict.pt", ".module.py", ".json"):
        assert policy.with_suffix(suffix).is_file(), suffix
    source = policy.with_suffix(".module.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all("jax" not in line and "purejaxppo" not in line for line in imports), imports
    meta = json.loads(policy.with_suffix(".json").read_text())
    spec = exported["spec"]
    assert meta["obs_shape"] == list(
        exported["env"].observation_space(exported["env_params"]).shape
    )
    assert meta["action_kind"] == ("discrete" if spec.discrete else "continuous")
    assert meta["num_actions"] == spec.num_actions
    assert meta["hidden_sizes"] == list(HIDDEN)
    assert meta["activation"] == "tanh"


def test_parity_in_fresh_torch_only_process(exported):
    proc, errors = _run_check(exported["data"], exported["policy"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert errors is not None
    keys = {"actor_out", "value", "greedy_mismatches" if exported["spec"].discrete else "log_std"}
    for tag in ("torchscript", "state_dict"):
        for key in keys:
            assert errors[f"{tag}/{key}"] <= TOL, errors


def test_parity_check_catches_missing_transpose(exported, tmp_path):
    """Proves the parity check can fail: an export without the kernel transpose."""
    import torch

    from purejaxppo.export import torch as export_mod

    spec = exported["spec"]
    obs_shape = tuple(exported["env"].observation_space(exported["env_params"]).shape)
    flat = export_mod._flatten_params(exported["params"])
    wrong = export_mod._state_dict_from_params(flat, obs_shape, spec, HIDDEN, transpose=False)
    good = torch.load(exported["policy"].with_suffix(".state_dict.pt"))
    # Non-square layers: the untransposed kernels do not even load.
    module = export_mod.load_module_source(exported["policy"].with_suffix(".module.py"))
    meta = json.loads(exported["policy"].with_suffix(".json").read_text())
    net = module.ActorCritic(**meta["constructor"])
    with pytest.raises(RuntimeError, match="size mismatch"):
        net.load_state_dict({k: torch.tensor(v) for k, v in wrong.items()})
    # The silent version of the bug (reshape instead of transpose) loads; the same
    # fresh-process check must then fail on the state_dict path, and only there.
    reshaped = {k: torch.tensor(v).reshape(good[k].shape) for k, v in wrong.items()}
    for name in ("policy.pt", "policy.module.py", "policy.json"):
        shutil.copy(exported["dir"] / name, tmp_path / name)
    torch.save(reshaped, tmp_path / "policy.state_dict.pt")
    shutil.copy(exported["data"], tmp_path / "expected.npz")
    proc, errors = _run_check(tmp_path / "expected.npz", tmp_path / "policy.pt")
    assert proc.returncode != 0, proc.stdout
    assert "errors above" in proc.stderr
    assert errors["torchscript/actor_out"] <= TOL and errors["torchscript/value"] <= TOL
    assert errors["state_dict/actor_out"] > 1e-2, errors
    assert errors["state_dict/value"] > 1e-2, errors


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    ("env_name", "activation"),
    [
        ("CartPole-v1", "relu"),
        ("CartPole-v1", "gelu"),
        ("CartPole-v1", "silu"),
        ("CartPole-v1", "elu"),
        ("CartPole-v1", "leaky_relu"),
        ("Pendulum-v1", "gelu"),
        ("Breakout-MinAtar", "relu"),  # [10, 10, 4] observations: flattening order
    ],
)
def test_parity_activations_and_obs_shapes(env_name, activation, tmp_path):
    """In-process (torch beside jax) parity for every activation and a 3-d observation."""
    import torch

    from purejaxppo.export import export_torch

    config, env, env_params, spec, params = _setup(env_name, activation=activation, seed=3)
    data = _expected(config, env, env_params, spec, params, num_obs=200, seed=4)
    policy = export_torch(params, config, tmp_path / "sub" / "p.pt", env, env_params)
    net = torch.jit.load(str(policy))
    with torch.no_grad():
        obs = torch.tensor(data["obs"])
        actor_out, value = net(obs)
        greedy = net.act_greedy(obs).numpy()
    np.testing.assert_allclose(actor_out.numpy(), data["actor_out"], rtol=0, atol=TOL)
    np.testing.assert_allclose(value.numpy(), data["value"], rtol=0, atol=TOL)
    if spec.discrete:
        np.testing.assert_array_equal(greedy, data["greedy"])
    else:
        np.testing.assert_allclose(net.log_std.detach().numpy(), data["log_std"], atol=TOL)
        np.testing.assert_allclose(greedy, data["greedy"], rtol=0, atol=TOL)


def test_sources_train_state_train_output_and_vmapped(tmp_path):
    import torch

    from purejaxppo.export import export_torch

    config, env, env_params, _, params = _setup("CartPole-v1")
    _, _, _, _, params2 = _setup("CartPole-v1", seed=7)

    def exported_state(source, name, **kw):
        policy = export_torch(source, config, tmp_path / f"{name}.pt", env, env_params, **kw)
        return torch.load(policy.with_suffix(".state_dict.pt"))

    ref = exported_state(params, "params")
    state = pjp.TrainState(params=params, opt_state=None)
    output = pjp.TrainOutput(train_state=state, runner_state=None, metrics={})
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), params2, params)
    for name, source, kw in [
        ("state", state, {}),
        ("output", output, {}),
        ("inner", params["params"], {}),
        ("vmapped", stacked, {"index": 1}),
    ]:
        got = exported_state(source, name, **kw)
        assert got.keys() == ref.keys()
        for k in ref:
            torch.testing.assert_close(got[k], ref[k], rtol=0, atol=0, msg=f"{name}: {k}")
    with pytest.raises(ValueError, match="leading axis of 2 agents.*index"):
        export_torch(stacked, config, tmp_path / "x.pt", env, env_params)


def test_mismatched_config_raises_clear_value_error(tmp_path):
    from purejaxppo.export import export_torch

    config, env, env_params, _, params = _setup("CartPole-v1")
    out = tmp_path / "p.pt"
    # Same depth, different width: names the mis-shaped arrays and the sizes seen.
    with pytest.raises(ValueError, match=r"actor/Dense_1/kernel has shape \(48, 24\)") as err:
        export_torch(params, config.replace(hidden_sizes=[48, 32]), out, env, env_params)
    assert "hidden_sizes=[48, 24]" in str(err.value)  # what the params look like
    assert "expected hidden_sizes=[48, 32]" in str(err.value)
    # Different depth: names the missing / unexpected layers.
    with pytest.raises(ValueError, match=r"unexpected \['actor/Dense_2/bias'"):
        export_torch(params, config.replace(hidden_sizes=[48]), out, env, env_params)
    # Continuous params (with log_std) for a discrete env.
    p_config, p_env, p_env_params, _, p_params = _setup("Pendulum-v1")
    with pytest.raises(ValueError, match="log_std"):
        export_torch(p_params, p_config.replace(env_name="CartPole-v1"), out)
    # An activation the exporter does not know (PPOConfig validates; bypassed here).
    bad = config.replace()
    object.__setattr__(bad, "activation", "swish")
    with pytest.raises(ValueError, match="activation='swish'"):
        export_torch(params, bad, out, env, env_params)
    with pytest.raises(ValueError, match="no complete checkpoint"):
        export_torch(str(tmp_path), config, out, env, env_params)
    with pytest.raises(ValueError, match="cannot export from a int"):
        export_torch(3, config, out, env, env_params)
    assert not out.exists()
