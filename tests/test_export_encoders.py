"""PyTorch export of the encoder networks (Nature CNN, IMPALA + CoordConv, shared encoders).

Every parameter is perturbed away from its init (biases are 0 at init), so a wrong kernel
layout (flax `[kh, kw, in, out]` vs torch `[out, in, kh, kw]`), a wrong flatten order
(JAX flattens H, W, C; torch convs run on NCHW), a missing CoordConv channel, a max-pool
padded on the wrong side or a missing normalisation shows as a large error. One case runs
the exported files in a fresh process that imports torch only.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

import purejaxppo as pjp
from purejaxppo.networks import action_spec
from purejaxppo.rollout import to_env_action

TOL = 1e-5


class SpacesEnv:
    """Just the spaces of an environment (what make_networks and export_torch read)."""

    name = "SpacesEnv"
    default_params = None

    def __init__(self, obs_space, action_space):
        self._obs, self._act = obs_space, action_space

    def observation_space(self, params=None):
        return self._obs

    def action_space(self, params=None):
        return self._act


def _perturbed_params(config, env, env_params, seed=0):
    init, _ = pjp.make_networks(config, env, env_params)
    params = jax.jit(init)(jax.random.key(seed))
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed + 1), len(leaves))
    # Kernels by N(0, 1/fan_in) (O(1) outputs), biases and log_std by N(0, 0.5^2).
    leaves = [
        leaf
        + jax.random.normal(k, leaf.shape)
        * (1.0 / math.sqrt(math.prod(leaf.shape[:-1])) if leaf.ndim >= 2 else 0.5)
        for k, leaf in zip(keys, leaves, strict=True)
    ]
    return jax.tree.unflatten(treedef, leaves)


def _expected(config, env, env_params, params, obs):
    _, apply = pjp.make_networks(config, env, env_params)
    dist, value = jax.jit(apply)(params, obs)
    spec = action_spec(env, env_params)
    data = {
        "obs": np.asarray(obs),
        "value": np.asarray(value),
        "greedy": np.asarray(to_env_action(spec, dist.mode())),
    }
    if spec.discrete:
        data["log_probs"] = np.asarray(dist.logits)  # normalised logits
        top2 = np.sort(data["log_probs"], axis=-1)[:, -2:]
        assert np.min(top2[:, 1] - top2[:, 0]) > 1e-4  # no near-ties in the test data
    else:
        data["mean"] = np.asarray(dist.mean())
    return data


def _minatar_obs(n, seed):
    bits = jax.random.bernoulli(jax.random.key(seed), 0.2, (n, 10, 10, 4))
    return bits.astype(jnp.float32)


CASES = {
    "cnn-shared": (
        "Breakout-MinAtar",
        dict(encoder="cnn", cnn_channels=[8, 16], cnn_kernel_sizes=[3, 3], cnn_strides=[1, 2]),
        dict(hidden_sizes=[32], activation="relu", share_encoder=True),
    ),
    "impala-shared": (
        "Breakout-MinAtar",
        dict(encoder="impala", impala_channels=[4]),
        dict(hidden_sizes=[16], activation="relu", share_encoder=True),
    ),
    "mlp-shared-continuous": ("Pendulum-v1", {}, dict(hidden_sizes=[16, 8], share_encoder=True)),
}


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("case", list(CASES))
def test_encoder_export_parity(case, tmp_path):
    import torch

    from purejaxppo.export import export_torch

    env_name, encoder, rest = CASES[case]
    config = pjp.PPOConfig(env_name=env_name, **encoder, **rest)
    env, env_params = pjp.make_env(env_name)
    params = _perturbed_params(config, env, env_params)
    if env_name == "Breakout-MinAtar":
        obs = _minatar_obs(200, seed=3)
    else:
        obs = 2.0 * jax.random.normal(jax.random.key(3), (200, 3))
    data = _expected(config, env, env_params, params, obs)
    policy = export_torch(params, config, tmp_path / "p.pt")
    meta = json.loads(policy.with_suffix(".json").read_text())
    assert meta["class_name"] == "EncoderActorCritic" and meta["encoder"] == config.encoder
    net = torch.jit.load(str(policy))
    with torch.no_grad():
        actor_out, value = net(torch.tensor(data["obs"]))
        greedy = net.act_greedy(torch.tensor(data["obs"])).numpy()
    np.testing.assert_allclose(value.numpy(), data["value"], rtol=TOL, atol=TOL)
    if "log_probs" in data:
        log_probs = torch.log_softmax(actor_out, dim=-1).numpy()
        np.testing.assert_allclose(log_probs, data["log_probs"], rtol=TOL, atol=TOL)
        np.testing.assert_array_equal(greedy, data["greedy"])
    else:
        np.testing.assert_allclose(actor_out.numpy(), data["mean"], rtol=TOL, atol=TOL)
        np.testing.assert_allclose(greedy, data["greedy"], atol=TOL)
        np.testing.assert_allclose(
            net.log_std.detach().numpy(), params["params"]["log_std"], atol=TOL
        )
    # Shared encoders export one encoder; separate ones two.
    keys = set(torch.load(policy.with_suffix(".state_dict.pt")))
    assert any(k.startswith("critic_encoder.") for k in keys) == (not config.share_encoder)


# Run as `python -c CHECK data.npz policy.pt` in a fresh process: torch and numpy only.
CHECK = r"""
import importlib.util, json, sys
from pathlib import Path
import numpy as np
import torch

data, policy = np.load(sys.argv[1]), Path(sys.argv[2])
meta = json.loads(policy.with_suffix(".json").read_text())
obs = torch.from_numpy(data["obs"])
nets = {"torchscript": torch.jit.load(str(policy))}
spec = importlib.util.spec_from_file_location("m", policy.with_suffix(".module.py"))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
net = getattr(module, meta["class_name"])(**meta["constructor"])
net.load_state_dict(torch.load(policy.with_suffix(".state_dict.pt")))
nets["state_dict"] = net.eval()
errors = {}
with torch.no_grad():
    for tag, net in nets.items():
        logits, value = net(obs)
        log_probs = torch.log_softmax(logits, -1).numpy()
        errors[tag + "/log_probs"] = float(np.abs(log_probs - data["log_probs"]).max())
        errors[tag + "/value"] = float(np.abs(value.numpy() - data["value"]).max())
        errors[tag + "/greedy"] = int((net.act_greedy(obs).numpy() != data["greedy"]).sum())
for name in ("jax", "jaxlib", "flax", "purejaxppo"):
    assert name not in sys.modules, name
print(json.dumps(errors))
"""


def test_uint8_frames_export_in_a_fresh_torch_process(tmp_path):
    """Atari-like uint8 frames [36, 36, 3] (normalised by 1/255) through a strided CNN."""
    from purejaxppo.export import export_torch

    env = SpacesEnv(spaces.Box(0, 255, (36, 36, 3), jnp.uint8), spaces.Discrete(5))
    config = pjp.PPOConfig(
        encoder="cnn",
        cnn_channels=[8, 8],
        cnn_kernel_sizes=[8, 4],
        cnn_strides=[4, 2],
        hidden_sizes=[16],
        activation="relu",
    )
    params = _perturbed_params(config, env, None, seed=4)
    frames = jax.random.randint(jax.random.key(5), (100, 36, 36, 3), 0, 256).astype(jnp.uint8)
    data = _expected(config, env, None, params, frames)
    np.savez(tmp_path / "data.npz", **data)
    policy = export_torch(params, config, tmp_path / "policy.pt", env, None)
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_path / "data.npz"), str(policy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    for key, error in errors.items():
        assert error <= (0 if key.endswith("greedy") else TOL), errors


def test_encoder_export_errors(tmp_path):
    from purejaxppo.export import export_torch

    env_name, encoder, rest = CASES["cnn-shared"]
    config = pjp.PPOConfig(env_name=env_name, **encoder, **rest)
    env, env_params = pjp.make_env(env_name)
    params = _perturbed_params(config, env, env_params)
    # Params of another conv width: names the mis-shaped arrays.
    with pytest.raises(ValueError, match=r"encoder/obs_cnn/Conv2D_1/kernel has shape"):
        export_torch(params, config.replace(cnn_channels=[8, 12]), tmp_path / "p.pt")
    # Params of a shared encoder for a config with separate ones.
    with pytest.raises(ValueError, match=r"missing \['actor_encoder/"):
        export_torch(params, config.replace(share_encoder=False), tmp_path / "p.pt")
    assert not (tmp_path / "p.pt").exists()


@pytest.mark.parametrize(
    ("env_name", "changes", "match"),
    [
        ("Pendulum-v1", {"squash_actions": True}, "squash_actions=True has no PyTorch export yet"),
        ("ProbeMultiDiscrete-v0", {}, r"multi_discrete actions \(MultiDiscrete\(\[3, 2, 4\]\)\)"),
        ("ProbeMultiBinary-v0", {}, r"multi_binary actions \(MultiBinary\(4\)\) have no PyTorch"),
    ],
)
def test_export_refuses_what_it_does_not_support(env_name, changes, match, tmp_path):
    from purejaxppo.export import export_torch

    config = pjp.PPOConfig(env_name=env_name, hidden_sizes=(8,), **changes)
    with pytest.raises(ValueError, match=match):  # refused before the params are read
        export_torch({"params": {}}, config, tmp_path / "p.pt")
    assert not (tmp_path / "p.pt").exists()
