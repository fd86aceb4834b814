"""PyTorch and ONNX export: parity with the JAX network for every policy kind.

JAX computes reference outputs for random params (drawn with numpy from
`jax.eval_shape(networks.init)`: kernels N(0, 1/fan_in), biases / log_std N(0, 0.5^2),
the policy head x4 so Gaussian means leave the bounds), saved as npz. ONE fresh Python
process that imports torch and numpy only (it asserts jax / flax / purejaxppo stay
unloaded, as a deployment would) checks every case through the three routes: the module
source + state_dict, the `torch.export` program (.pt2) and TorchScript where written.
Recurrent cases run T steps of N envs with resets mid-sequence and compare the state at
every step; a second torch run starts mid-sequence from JAX's state (state handover).
A mutated copy (one square kernel transposed) must FAIL parity, so the check can fail.
ONNX graphs are checked with onnxruntime in this process.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

import purejaxppo as pjp
from purejaxppo.envs.spaces import MultiDiscrete
from purejaxppo.networks import apply_action_mask, make_networks, reset_state, select_action

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOL = 1e-5
N = 16  # envs (feed-forward: observations)
T = 8  # steps of the recurrent cases
HANDOVER = 4  # torch starts from JAX's state at this step
RESETS = np.zeros((T, N), bool)
RESETS[0] = True
RESETS[3, 0] = RESETS[5, 1] = RESETS[6, 1] = True


class SpacesEnv:
    """Just the spaces of an environment (what make_networks and the export read)."""

    name = "SpacesEnv"
    default_params = None

    def __init__(self, obs_space, action_space):
        self._obs, self._act = obs_space, action_space

    def observation_space(self, params=None):
        return self._obs

    def action_space(self, params=None):
        return self._act


def _box(shape, low=-1.0, high=1.0, dtype=jnp.float32):
    return spaces.Box(low, high, shape, dtype)


DICT_MASK_ENV = SpacesEnv(
    spaces.Dict(
        {
            "frame": _box((6, 6, 2), 0.0, 1.0),
            "vec": _box((5,)),
            "action_mask": _box((5,), 0, 1, jnp.bool_),
        }
    ),
    spaces.Discrete(5),
)
MD_MASK_ENV = SpacesEnv(
    spaces.Dict({"obs": _box((3,)), "action_mask": _box((5,), 0, 1, jnp.bool_)}),
    MultiDiscrete((2, 3)),
)
TUPLE_ENV = SpacesEnv(spaces.Tuple([_box((3,)), _box((2, 2))]), spaces.Discrete(3))
BOX_ENV = SpacesEnv(_box((5,)), spaces.Box(-1.0, 2.0, (2, 3), jnp.float32))
UINT8_ENV = SpacesEnv(_box((9, 7, 3), 0, 255, jnp.uint8), spaces.Discrete(4))
ATARI_ENV = SpacesEnv(_box((84, 84, 4), 0, 255, jnp.uint8), spaces.Discrete(6))
NATURE = dict(encoder="nature", hidden_sizes=(512,), activation="relu", share_encoder=True)
MINATAR_CNN = dict(encoder="cnn", cnn_channels=(4,), cnn_kernel_sizes=(3,), cnn_strides=(1,))

# name -> (env id or SpacesEnv, config changes)
CASES = {
    "mlp-discrete": ("CartPole-v1", dict(hidden_sizes=(24, 24))),
    "mlp-continuous": ("Pendulum-v1", dict(activation="relu")),
    "squashed-box": (BOX_ENV, dict(squash_actions=True, activation="gelu")),
    "box-2x3": (BOX_ENV, dict(activation="elu")),
    "multi-discrete": ("ProbeMultiDiscrete-v0", {}),
    "multi-binary": ("ProbeMultiBinary-v0", dict(activation="silu")),
    "cnn-minatar-shared": ("Breakout-MinAtar", dict(MINATAR_CNN, share_encoder=True)),
    "nature-atari": (ATARI_ENV, NATURE),
    "impala-uint8": (UINT8_ENV, dict(encoder="impala", impala_channels=(3, 4), conv_impl="xla")),
    "dict-image-mask": (DICT_MASK_ENV, dict(MINATAR_CNN, activation="leaky_relu")),
    "masked-probe": ("ProbeMaskedAction-v0", {}),
    "multi-discrete-mask": (MD_MASK_ENV, {}),
    "tuple-obs": (TUPLE_ENV, {}),
    "lstm-shared": ("CartPole-v1", dict(recurrent="lstm", recurrent_size=6)),
    "gru-separate": ("Pendulum-v1", dict(recurrent="gru", recurrent_size=6, share_encoder=False)),
    "lstm-cnn-minatar": ("Breakout-MinAtar", dict(MINATAR_CNN, recurrent="lstm", recurrent_size=6)),
    "lstm-dict-mask": (DICT_MASK_ENV, dict(recurrent="lstm", recurrent_size=6)),
    "transformer": (
        "CartPole-v1",
        dict(recurrent="transformer", transformer_dim=8, transformer_heads=2, memory_len=3),
    ),
    # issue 40: head_hidden_sizes, recurrent_layers, latent_dim
    "head-hidden": ("Pendulum-v1", dict(head_hidden_sizes=(10, 6), activation="relu")),
    "lstm-linear-heads": ("CartPole-v1", dict(recurrent="lstm", head_hidden_sizes=())),
    "lstm-stacked-3": ("CartPole-v1", dict(recurrent="lstm", recurrent_size=5, recurrent_layers=3)),
    "gru-stacked-separate": (
        "Pendulum-v1",
        dict(recurrent="gru", recurrent_size=6, recurrent_layers=2, share_encoder=False),
    ),
    "dict-latent": (DICT_MASK_ENV, dict(MINATAR_CNN, latent_dim=7, head_hidden_sizes=(9,))),
}
ONNX_CASES = (
    "mlp-discrete",
    "mlp-continuous",
    "cnn-minatar-shared",
    "nature-atari",
    "lstm-shared",
    "dict-image-mask",
    "transformer",
    "lstm-stacked-3",
    "dict-latent",
)
MUTATE = ("mlp-discrete", "encoders.0.inputs.0.mlp.dense.1.weight")  # [24, 24]


def make_case(name):
    """(config, env, env_params, networks) of a case."""
    env_id, changes = CASES[name]
    env_name = env_id if isinstance(env_id, str) else "CartPole-v1"  # unused with env
    config = pjp.PPOConfig(env_name=env_name, **{"hidden_sizes": (12, 8), **changes})
    if isinstance(env_id, str):
        env, env_params = pjp.make_env(env_id)
    else:
        env, env_params = env_id, None
    return config, env, env_params, make_networks(config, env, env_params)


def random_params(networks, seed=0):
    """Params of the network's names and shapes, drawn with numpy (no init to compile)."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = "/".join(str(k.key) for k in path)
        if leaf.ndim >= 2:
            x = rng.normal(0.0, 1.0 / math.sqrt(math.prod(leaf.shape[:-1])), leaf.shape)
        else:
            x = rng.normal(0.0, 0.5, leaf.shape) + (1.0 if name.endswith("scale") else 0.0)
        if name.endswith("actor_head/out/kernel"):
            x = 4.0 * x
        return x.astype(np.float32)

    shapes = jax.eval_shape(networks.init, jax.random.key(0))
    return jax.tree_util.tree_map_with_path(draw, shapes)


def random_obs(space, batch, rng):
    """Observations of a space `[*batch, ...]` (float32; images 0/1 or 0..255, masks 0/1)."""
    if isinstance(space, spaces.Dict):
        obs = {k: random_obs(s, batch, rng) for k, s in space.spaces.items()}
        if "action_mask" in obs:  # at least one valid action per row
            obs["action_mask"][..., 0] = 1.0
        return obs
    if isinstance(space, spaces.Tuple):
        return tuple(random_obs(s, batch, rng) for s in space.spaces)
    shape = (*batch, *space.shape)
    dtype = np.dtype(space.dtype)
    if dtype == np.bool_ or (len(space.shape) == 3 and np.all(np.asarray(space.high) == 1)):
        return (rng.random(shape) < 0.4).astype(np.float32)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 256, shape).astype(np.float32)
    return rng.normal(0.0, 2.0, shape).astype(np.float32)


def obs_leaves(obs, path=()):
    """{path: array} of an observation (dict keys / tuple indices)."""
    if isinstance(obs, dict):
        return {p: x for k in sorted(obs) for p, x in obs_leaves(obs[k], (*path, k)).items()}
    if isinstance(obs, tuple):
        return {p: x for i, o in enumerate(obs) for p, x in obs_leaves(o, (*path, i)).items()}
    return {path: obs}


def jax_reference(config, env, env_params, networks, params, seed=1):
    """Random observations and the JAX outputs on them: npz arrays."""
    rng = np.random.default_rng(seed)
    space = env.observation_space(env_params if env_params is not None else env.default_params)
    spec, module = networks.action_spec, networks.module
    mask_key = config.action_mask_key if isinstance(space, spaces.Dict) else None
    mask_key = mask_key if mask_key in getattr(space, "spaces", {}) else None

    def outputs(state, obs):
        new_state, actor_out, value, _ = module.apply(params, state, obs)
        if mask_key is not None:
            actor_out = apply_action_mask(actor_out, obs[mask_key])
        batch = value.shape[0]
        step_state = state if networks.stateful else ()
        _, dist, _ = networks.step(params, step_state, obs, jnp.zeros((batch,), bool))
        greedy, _ = select_action(spec, dist, value, jax.random.key(0), 0.0)
        return new_state, actor_out, value, greedy

    data = {}
    if not networks.stateful:
        obs = random_obs(space, (N,), rng)
        _, actor_out, value, greedy = jax.jit(lambda o: outputs(None, o))(obs)
        leaves = obs_leaves(obs)
        ref = {"actor_out": actor_out, "value": value, "greedy": greedy}
    else:
        obs = random_obs(space, (T, N), rng)
        leaves = obs_leaves(obs)

        @jax.jit
        def step(state, obs_t, reset):
            state = reset_state(state, reset, networks.initial_state(N))
            return state, *outputs(state, obs_t)

        state = networks.initial_state(N)
        steps = []
        for t in range(T):
            obs_t = jax.tree.map(lambda x, t=t: x[t], obs)
            state_in, state, actor_out, value, greedy = step(state, obs_t, RESETS[t])
            steps.append((state_in, state, actor_out, value, greedy))
        names = ("state_in", "state_out", "actor_out", "value", "greedy")
        ref = {n: np.stack([np.asarray(s[i]) for s in steps]) for i, n in enumerate(names)}
        data["resets"] = RESETS
    for path in leaves:
        data[f"obs.{'/'.join(map(str, path))}"] = leaves[path]
    data.update({k: np.asarray(v) for k, v in ref.items()})
    if spec.kind == "continuous":
        data["log_std"] = np.asarray(params["params"]["log_std"])
        clipped = np.isin(data["greedy"], [spec.low.min(), spec.high.max()])
        assert 0 < clipped.mean() < 1 or config.squash_actions or networks.stateful
    return data


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every case exported (torch; ONNX for ONNX_CASES) with its JAX reference."""
    from purejaxppo.export import export_onnx, export_torch

    root = tmp_path_factory.mktemp("export")
    cases = {}
    for name in CASES:
        config, env, env_params, networks = make_case(name)
        params = random_params(networks, seed=len(cases))
        folder = root / name
        folder.mkdir()
        export_torch(params, config, folder / "policy.pt", env, env_params)
        if name in ONNX_CASES:
            export_onnx(params, config, folder / "onnx" / "policy.onnx", env, env_params)
        np.savez(
            folder / "expected.npz", **jax_reference(config, env, env_params, networks, params)
        )
        cases[name] = {"dir": str(folder), "stateful": networks.stateful}
    cases[MUTATE[0]]["mutate"] = MUTATE[1]
    (root / "cases.json").write_text(json.dumps(cases))
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("export_check.py")),
            str(root / "cases.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    (root / "errors.json").write_text(lines[-1])  # for inspection
    return {"root": root, "errors": json.loads(lines[-1])}


@pytest.mark.parametrize("name", list(CASES))
def test_torch_parity_in_a_fresh_torch_only_process(exported, name):
    errors = exported["errors"][name]
    meta = json.loads((exported["root"] / name / "policy.json").read_text())
    routes = {"module", "pt2"} | ({"torchscript"} if meta["torchscript"]["written"] else set())
    if name.startswith(("lstm", "gru", "transformer")):
        routes.add("module_handover")  # torch continued from JAX's mid-sequence state
    assert {k.split("/")[0] for k in errors} - {"mutated"} == routes
    bad = {k: v for k, v in errors.items() if not k.startswith("mutated") and v > TOL}
    assert not bad, bad


def test_torchscript_written_for_array_observations_only(exported):
    for name in CASES:
        meta = json.loads((exported["root"] / name / "policy.json").read_text())
        plain = name not in (
            "dict-image-mask",
            "multi-discrete-mask",
            "tuple-obs",
            "lstm-dict-mask",
            "dict-latent",
        )
        plain = plain and name != "masked-probe"
        assert meta["torchscript"]["written"] == plain, (name, meta["torchscript"])
        assert (exported["root"] / name / "policy.pt").exists() == plain


def test_mutated_params_fail_parity(exported):
    errors = exported["errors"][MUTATE[0]]
    assert errors["mutated/actor_out"] > 1e-2, errors  # the actor tower's kernel
    assert errors["mutated/value"] <= TOL, errors  # separate critic tower: untouched


def test_files_and_metadata(exported):
    folder = exported["root"] / "lstm-dict-mask"
    meta = json.loads((folder / "policy.json").read_text())
    assert meta["format_version"] == 2 and meta["class_name"] == "RecurrentActorCritic"
    assert meta["inputs"] == ["obs_action_mask", "obs_frame", "obs_vec", "state"]
    assert meta["outputs"] == ["actor_out", "value", "state_out"]
    assert meta["state_size"] == 12 and meta["state_layout"] == "[c, h]"
    assert meta["observation"]["action_mask_key"] == "action_mask"
    assert set(meta["files"]) == {"module_source", "state_dict", "pt2"}  # no TorchScript
    source = (folder / "policy.module.py").read_text()
    from purejaxppo.export import torch_modules

    assert source == Path(torch_modules.__file__).read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import", "from"))]
    assert all("jax" not in line and "purejaxppo" not in line for line in imports), imports
    box = json.loads((exported["root"] / "box-2x3" / "policy.json").read_text())
    assert box["action"]["shape"] == [2, 3] and box["action"]["low"] == [-1.0] * 6


@pytest.mark.parametrize("name", ONNX_CASES)
def test_onnx_parity_with_onnxruntime(exported, name):
    import onnxruntime as ort

    folder = exported["root"] / name
    data = np.load(folder / "expected.npz")
    meta = json.loads((folder / "onnx" / "policy.onnx.json").read_text())
    session = ort.InferenceSession(str(folder / "onnx" / "policy.onnx"))
    assert [i.name for i in session.get_inputs()] == meta["onnx_inputs"] == meta["inputs"]
    assert [o.name for o in session.get_outputs()] == meta["outputs"]
    feeds = {
        a["input_name"]: data["obs." + "/".join(map(str, a["path"]))]
        for a in meta["observation"]["arrays"]
    }
    if meta["state_size"] == 0:
        actor_out, value = session.run(None, feeds)
        np.testing.assert_allclose(actor_out, data["actor_out"], rtol=0, atol=TOL)
        np.testing.assert_allclose(value, data["value"], rtol=0, atol=TOL)
        return
    state = np.zeros((N, meta["state_size"]), np.float32)
    for t in range(T):
        state = np.where(data["resets"][t][:, None], 0.0, state).astype(np.float32)
        step = {k: v[t] for k, v in feeds.items()}
        actor_out, value, state = session.run(None, {**step, "state": state})
        np.testing.assert_allclose(actor_out, data["actor_out"][t], rtol=0, atol=TOL)
        np.testing.assert_allclose(value, data["value"][t], rtol=0, atol=TOL)
        np.testing.assert_allclose(state, data["state_out"][t], rtol=0, atol=TOL)
