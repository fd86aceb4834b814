"""PyTorch export of recurrent (LSTM / GRU) policies: step-by-step parity with JAX.

Each case runs T = 20 steps of N = 3 envs, with episode resets in the middle, through JAX
(`make_recurrent_networks(...).step`, zeroing the state of the envs that reset) and
through the exported TorchScript module (`reset_state`, then `forward` / `act_greedy`),
and compares log-probs (or the Gaussian mean), values and states at every step; greedy
actions must be identical. The params are random, biases included (they are 0 at init),
and the widths all differ (encoder features 5, core 6), so a wrong gate order, a GRU bias
on the wrong side of the reset gate, a swapped [c, h] or a missing transpose shows as a
large error. Params and observations are drawn with numpy (no eager JAX ops) and each
case compiles one JAX step, to keep the file fast.
"""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.networks import action_spec, make_recurrent_networks
from purejaxppo.rollout import to_env_action

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")

TOL = 1e-5
T, N = 20, 3
# RESETS[t, n]: env n's previous episode ended, so its state is zeroed before step t.
RESETS = np.zeros((T, N), bool)
RESETS[0] = True  # fresh envs (the state starts at zero anyway)
RESETS[[5, 14], 0] = True
RESETS[[9, 10], 1] = True  # two episodes in a row, the first one step long

CASES = {
    "lstm-mlp-discrete": dict(env_name="CartPole-v1", recurrent="lstm"),
    "gru-mlp-continuous": dict(env_name="Pendulum-v1", recurrent="gru", activation="gelu"),
    "lstm-cnn-minatar": dict(
        env_name="Breakout-MinAtar",
        recurrent="lstm",
        encoder="cnn",
        cnn_channels=[4],
        cnn_kernel_sizes=[3],
        cnn_strides=[1],
        activation="relu",
    ),
}


def _config(**changes) -> pjp.PPOConfig:
    return pjp.PPOConfig(**{"hidden_sizes": (8, 5), "recurrent_size": 6, **changes})


def _random_params(init, seed=0):
    """Params of `init`'s names and shapes, drawn with numpy (no JAX init to compile).

    Kernels N(0, 1/fan_in) (O(1) pre-activations), biases and log_std N(0, 0.5^2): all
    nonzero, unlike the init's biases.
    """
    rng = np.random.default_rng(seed)

    def draw(leaf):
        scale = 1.0 / math.sqrt(math.prod(leaf.shape[:-1])) if len(leaf.shape) >= 2 else 0.5
        return (scale * rng.standard_normal(leaf.shape)).astype(np.float32)

    return jax.tree.map(draw, jax.eval_shape(init, jax.random.key(0)))


def _observations(env, env_params, seed):
    """[T, N, *obs_shape] float32: random bit frames for MinAtar, N(0, 2^2) vectors else."""
    rng = np.random.default_rng(seed)
    shape = (T, N, *env.observation_space(env_params).shape)
    if len(shape) == 5:
        return (rng.random(shape) < 0.2).astype(np.float32)
    return (2.0 * rng.standard_normal(shape)).astype(np.float32)


def _jax_step_fn(nets, spec):
    """jit(reset, then one step): (params, state [N, S], obs [N, ...], reset [N]) -> outputs."""

    def step(params, hidden, obs, reset):
        hidden = jnp.where(reset[:, None], 0.0, hidden)
        hidden, dist, value = nets.step(params, hidden, obs)
        # Discrete: normalised logits (log-probs); Box: the Gaussian mean.
        actor = dist.logits if spec.discrete else dist.mean()
        return hidden, actor, value, to_env_action(spec, dist.mode())

    return jax.jit(step)


def _jax_steps(case, obs, start=None, first=0):
    """JAX steps `first`..T-1 from `start` (default zeros): stacked outputs [T - first, N, ...]."""
    hidden = np.zeros((N, case["state_size"]), np.float32) if start is None else start
    out = {"actor": [], "value": [], "state": [], "greedy": []}
    for t in range(first, T):
        hidden, actor, value, greedy = case["step"](case["params"], hidden, obs[t], RESETS[t])
        for key, x in zip(out, (actor, value, hidden, greedy), strict=True):
            out[key].append(np.asarray(x))
    return {k: np.stack(v) for k, v in out.items()}


def _torch_steps(net, discrete, obs, start=None, first=0):
    """The exported module's steps `first`..T-1 from `start`, stacked like `_jax_steps`."""
    import torch

    state = net.initial_state(N) if start is None else torch.as_tensor(np.asarray(start))
    out = {"actor": [], "value": [], "state": [], "greedy": []}
    with torch.no_grad():
        for t in range(first, T):
            state = net.reset_state(state, torch.from_numpy(RESETS[t]))
            x = torch.from_numpy(obs[t])
            actor_out, value, new_state = net(x, state)
            greedy, greedy_state = net.act_greedy(x, state)
            torch.testing.assert_close(greedy_state, new_state, rtol=0, atol=0)
            state = new_state
            out["actor"].append(torch.log_softmax(actor_out, -1) if discrete else actor_out)
            out["value"].append(value)
            out["state"].append(state)
            out["greedy"].append(greedy)
    return {k: np.stack([x.numpy() for x in v]) for k, v in out.items()}


def _max_errors(got, want):
    """Max abs differences per output; greedy: the number of differing actions."""
    errors = {
        k: float(np.abs(got[k].astype(np.float64) - want[k]).max())
        for k in ("actor", "value", "state")
    }
    errors["greedy_mismatches"] = int(np.sum(~np.isclose(got["greedy"], want["greedy"], atol=TOL)))
    return errors


def _assert_parity(got, want, what):
    assert got["state"].shape == want["state"].shape, (got["state"].shape, want["state"].shape)
    errors = _max_errors(got, want)
    print(what, json.dumps(errors))
    assert all(v <= TOL for k, v in errors.items() if k != "greedy_mismatches"), (what, errors)
    assert errors["greedy_mismatches"] == 0, (what, errors)


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    """One exported case: config, random params, jitted JAX step, TorchScript module."""
    import torch

    from purejaxppo.export import export_torch

    config = _config(**CASES[request.param])
    env, env_params = pjp.make_env(config.env_name)
    nets = make_recurrent_networks(config, env, env_params)
    spec = action_spec(env, env_params)
    params = _random_params(nets.init)
    policy = export_torch(params, config, tmp_path_factory.mktemp(request.param) / "policy.pt")
    obs = _observations(env, env_params, seed=3)
    case = dict(
        name=request.param,
        config=config,
        spec=spec,
        params=params,
        state_size=nets.initial_hidden(1).shape[1],
        step=_jax_step_fn(nets, spec),
        policy=policy,
        net=torch.jit.load(str(policy)),
        obs=obs,
    )
    case["expected"] = _jax_steps(case, obs)
    if spec.discrete:  # no near-ties: greedy actions are well defined
        top2 = np.sort(case["expected"]["actor"], axis=-1)[..., -2:]
        assert np.min(top2[..., 1] - top2[..., 0]) > 1e-4
    return case


def test_parity_step_by_step_with_resets(case):
    expected = case["expected"]
    got = _torch_steps(case["net"], case["spec"].discrete, case["obs"])
    _assert_parity(got, expected, case["name"])
    # The resets matter: the state before each reset is far from zero.
    for t, n in zip(*np.nonzero(RESETS[1:]), strict=True):
        assert np.abs(expected["state"][t, n]).max() > 0.1
    if not case["spec"].discrete:
        np.testing.assert_allclose(
            case["net"].log_std.detach().numpy(), case["params"]["params"]["log_std"], atol=TOL
        )


def test_state_layout_is_shared_with_jax(case):
    """A JAX state continues in torch mid-sequence, and a torch state in JAX."""
    import torch

    config, obs, first = case["config"], case["obs"], 7
    meta = json.loads(case["policy"].with_suffix(".json").read_text())
    size = config.recurrent_size
    assert meta["state_size"] == (2 * size if config.recurrent == "lstm" else size)
    assert meta["state_layout"] == ("[c, h]" if config.recurrent == "lstm" else "[h]")
    assert tuple(case["net"].initial_state(N).shape) == (N, meta["state_size"])
    jax_state = case["expected"]["state"][first - 1]  # after step first - 1
    remainder = {k: v[first:] for k, v in case["expected"].items()}
    got = _torch_steps(case["net"], case["spec"].discrete, obs, start=jax_state, first=first)
    _assert_parity(got, remainder, case["name"] + " jax->torch")
    torch_state = _torch_steps(case["net"], case["spec"].discrete, obs)["state"][first - 1]
    got = _jax_steps(case, obs, start=torch_state, first=first)
    _assert_parity(got, remainder, case["name"] + " torch->jax")
    if config.recurrent == "lstm":
        # [c, h]: the second half is torch.nn.LSTMCell's h (|h| < 1), the first its c.
        x = case["net"].encoder(torch.from_numpy(obs[first]))
        c, h = torch.from_numpy(jax_state[:, :size]), torch.from_numpy(jax_state[:, size:])
        h_next, c_next = case["net"].core.cell(x, (h, c))
        want = case["expected"]["state"][first]
        np.testing.assert_allclose(c_next.detach().numpy(), want[:, :size], atol=TOL)
        np.testing.assert_allclose(h_next.detach().numpy(), want[:, size:], atol=TOL)


def test_module_source_and_state_dict_match_the_torchscript_file(case):
    """The second way to load: the `.module.py` class, then the `.state_dict.pt` weights."""
    import torch

    from purejaxppo.export.torch import load_module_source

    policy = case["policy"]
    meta = json.loads(policy.with_suffix(".json").read_text())
    assert (
        meta["class_name"] == "RecurrentActorCritic"
        and meta["recurrent"] == case["config"].recurrent
    )
    module = load_module_source(policy.with_suffix(".module.py"))
    net = getattr(module, meta["class_name"])(**meta["constructor"])
    net.load_state_dict(torch.load(policy.with_suffix(".state_dict.pt")))
    got = _torch_steps(net.eval(), case["spec"].discrete, case["obs"])
    _assert_parity(got, case["expected"], case["name"] + " state_dict")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.script in torch 2.13
def test_reset_state_and_initial_state(tmp_path):
    """`reset_state` zeroes exactly the rows of `done` (bool or 0/1), like Policy.reset."""
    import torch

    from purejaxppo.export.torch import MODULE_SOURCE, load_module_source

    (tmp_path / "policy.module.py").write_text(MODULE_SOURCE)
    module = load_module_source(tmp_path / "policy.module.py")
    net = module.RecurrentActorCritic([4], 2, [8, 5], recurrent="lstm", recurrent_size=4)
    net = torch.jit.script(net)
    state = torch.arange(1.0, 25.0).reshape(3, 8)
    for done in (torch.tensor([True, False, True]), torch.tensor([1, 0, 1])):
        reset = net.reset_state(state, done)
        assert (reset[[0, 2]] == 0).all() and torch.equal(reset[1], state[1])
    zeros = net.initial_state(4)
    assert zeros.shape == (4, 8) and zeros.dtype == torch.float32 and not zeros.any()
    with pytest.raises(ValueError, match="recurrent must be 'lstm' or 'gru', got 'rnn'"):
        module.RecurrentActorCritic([4], 2, [8], recurrent="rnn")


def test_export_errors(tmp_path):
    from purejaxppo.export import export_torch

    config = _config(env_name="CartPole-v1", recurrent="gru")
    env, env_params = pjp.make_env(config.env_name)
    params = _random_params(make_recurrent_networks(config, env, env_params).init)
    out = tmp_path / "p.pt"
    # GRU params for an LSTM config: names the LSTM gates missing, the GRU ones unexpected.
    with pytest.raises(ValueError, match=r"missing \['core/hf/bias'.*unexpected \['core/hn/"):
        export_torch(params, config.replace(recurrent="lstm"), out)
    # Another core width: names the mis-shaped core kernels.
    with pytest.raises(ValueError, match=r"core/hn/kernel has shape \(6, 6\), expected \(4, 4\)"):
        export_torch(params, config.replace(recurrent_size=4), out)
    # Recurrent params for a feed-forward config, and the other way round.
    with pytest.raises(ValueError, match=r"missing \['actor/Dense_0/bias'"):
        export_torch(params, config.replace(recurrent=None), out)
    init, _ = pjp.make_networks(config.replace(recurrent=None), env, env_params)
    with pytest.raises(ValueError, match=r"missing \['actor_head/Dense_0/bias'"):
        export_torch(_random_params(init), config, out)
    # Still refused, before the params are read.
    squashed = _config(env_name="Pendulum-v1", recurrent="lstm", squash_actions=True)
    with pytest.raises(ValueError, match="squash_actions=True has no PyTorch export yet"):
        export_torch({"params": {}}, squashed, out)
    multi = _config(env_name="ProbeMultiDiscrete-v0", recurrent="gru")
    with pytest.raises(ValueError, match=r"multi_discrete actions .* have no PyTorch export"):
        export_torch({"params": {}}, multi, out)
    assert not out.exists()
