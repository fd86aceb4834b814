"""Encoders: default MLP unchanged, Nature CNN, IMPALA + CoordConv, dict / tuple inputs,
shared encoders, image normalisation and config validation (export: test_export_torch.py)."""

from __future__ import annotations

import collections
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from gymnax.environments import spaces

import purejaxppo as pjp
from purejaxppo.networks import observation_inputs
from purejaxppo.networks.layers import Conv2D, coord_channels, max_pool


class SpacesEnv:
    """Just the spaces of an environment (all `make_networks` reads)."""

    name = "SpacesEnv"
    default_params = None

    def __init__(self, obs_space, action_space=None):
        self._obs = obs_space
        self._act = action_space if action_space is not None else spaces.Discrete(3)

    def observation_space(self, params=None):
        return self._obs

    def action_space(self, params=None):
        return self._act


def _shapes(params):
    flat = jax.tree_util.tree_flatten_with_path(params["params"])[0]
    return {"/".join(k.key for k in path): tuple(leaf.shape) for path, leaf in flat}


def _param_shapes(config, env, env_params=None):
    """Param shapes by tracing `init` only (jax.eval_shape: no compile, no compute)."""
    _nets = pjp.make_networks(config, env, env_params)
    init, _ = _nets.init, _nets.apply
    return _shapes(jax.eval_shape(init, jax.random.key(0)))


def _init(config, env, env_params=None, seed=0):
    _nets = pjp.make_networks(config, env, env_params)
    init, apply = _nets.init, _nets.apply
    return jax.jit(init)(jax.random.key(seed)), jax.jit(apply)


# --------------------------------------------------------------------- default network


def test_default_mlp_is_cleanrl_agent():
    """The default network is CleanRL's `Agent`: two tanh MLPs on the flat observation."""
    config = pjp.PPOConfig()
    env, env_params = pjp.make_env("CartPole-v1")
    _nets = pjp.make_networks(config, env, env_params)
    init, apply = _nets.init, _nets.apply
    params = init(jax.random.key(0))
    assert _shapes(params) == {
        "actor_encoder/obs_mlp/dense_0/kernel": (4, 64),
        "actor_encoder/obs_mlp/dense_0/bias": (64,),
        "actor_encoder/obs_mlp/dense_1/kernel": (64, 64),
        "actor_encoder/obs_mlp/dense_1/bias": (64,),
        "actor_head/out/kernel": (64, 2),
        "actor_head/out/bias": (2,),
        "critic_encoder/obs_mlp/dense_0/kernel": (4, 64),
        "critic_encoder/obs_mlp/dense_0/bias": (64,),
        "critic_encoder/obs_mlp/dense_1/kernel": (64, 64),
        "critic_encoder/obs_mlp/dense_1/bias": (64,),
        "critic_head/out/kernel": (64, 1),
        "critic_head/out/bias": (1,),
    }
    p = jax.tree.map(np.asarray, params["params"])
    # CleanRL's init: orthogonal kernels (gain sqrt 2 hidden, 0.01 policy, 1.0 value),
    # zero biases.
    for tower, head_gain in (("actor", 0.01), ("critic", 1.0)):
        w = p[f"{tower}_encoder"]["obs_mlp"]["dense_1"]["kernel"]
        np.testing.assert_allclose(w.T @ w, 2.0 * np.eye(64), atol=1e-4)
        head = p[f"{tower}_head"]["out"]["kernel"]
        np.testing.assert_allclose(head.T @ head, head_gain**2 * np.eye(head.shape[1]), atol=1e-5)
        assert not np.any(p[f"{tower}_head"]["out"]["bias"])
    # The forward pass, in NumPy.
    obs = np.asarray(jax.random.normal(jax.random.key(1), (5, 4)))

    def mlp(tower):
        x = obs
        for i in range(2):
            layer = p[f"{tower}_encoder"]["obs_mlp"][f"dense_{i}"]
            x = np.tanh(x @ layer["kernel"] + layer["bias"])
        return x @ p[f"{tower}_head"]["out"]["kernel"] + p[f"{tower}_head"]["out"]["bias"]

    dist, value = apply(params, obs)
    np.testing.assert_allclose(value, mlp("critic")[:, 0], rtol=1e-5, atol=1e-6)
    logits = mlp("actor")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(dist.logits, log_probs, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------- config


def test_config_fields_defaults_and_round_trip():
    c = pjp.PPOConfig()
    assert (c.encoder, c.share_encoder, c.squash_actions) == ("mlp", None, False)
    assert not c.shares_encoder and c.replace(recurrent="gru").shares_encoder
    assert (c.cnn_channels, c.cnn_kernel_sizes, c.cnn_strides) == (
        (32, 64, 64),
        (8, 4, 3),
        (4, 2, 1),
    )
    assert c.impala_channels == (16, 32, 32)
    c = pjp.PPOConfig(encoder="impala", impala_channels=[8, 16], share_encoder=True)
    d = c.to_dict()
    assert d["impala_channels"] == [8, 16] and d["cnn_channels"] == [32, 64, 64]
    assert pjp.PPOConfig.from_dict(yaml.safe_load(yaml.safe_dump(d))) == c


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"encoder": "cnnn"}, r"encoder='cnnn': must be one of .*did you mean cnn"),
        ({"encoder": 3}, "encoder must be a string"),
        ({"cnn_channels": []}, r"cnn_channels=\[\]: must be a non-empty list"),
        ({"impala_channels": [16, 0]}, r"impala_channels=\[16, 0\]: must be a non-empty"),
        ({"cnn_strides": [0, 1, 1]}, r"cnn_strides=\[0, 1, 1\]"),
        ({"cnn_kernel_sizes": [3, 3]}, r"cnn_kernel_sizes=\[3, 3\]: must have one entry per conv"),
        ({"cnn_channels": [16], "cnn_kernel_sizes": [3]}, r"cnn_strides=\[4, 2, 1\]: must have"),
        ({"share_encoder": "yes"}, "share_encoder must be true or false"),
        ({"conv_impl": "cudnn"}, r"conv_impl='cudnn': must be one of"),
        ({"transformer_dim": 10, "transformer_heads": 4}, r"transformer_dim=10: must be divisible"),
        ({"squash_actions": 1}, "squash_actions must be true or false"),
    ],
)
def test_config_validation(changes, match):
    with pytest.raises(ValueError, match=match):
        pjp.PPOConfig(**changes)


def test_settings_that_do_not_fit_the_env_raise():
    cartpole = pjp.make_env("CartPole-v1")
    with pytest.raises(ValueError, match=r"encoder='cnn' needs image observations.*\[\[4\]\]"):
        pjp.make_networks(pjp.PPOConfig(encoder="cnn"), *cartpole)
    minatar = pjp.make_env("Breakout-MinAtar")  # 10x10: the Nature 8x8/4, 4x4/2, 3x3 stack fails
    with pytest.raises(ValueError, match=r"cnn_kernel_sizes=\[8, 4, 3\], cnn_strides=\[4, 2, 1\]"):
        pjp.make_networks(pjp.PPOConfig(encoder="cnn"), *minatar)
    with pytest.raises(ValueError, match="squash_actions=True: only Box actions.*discrete"):
        pjp.make_networks(pjp.PPOConfig(squash_actions=True), *cartpole)
    unbounded = SpacesEnv(spaces.Box(-1, 1, (3,)), spaces.Box(-jnp.inf, jnp.inf, (2,)))
    with pytest.raises(ValueError, match="squash_actions=True needs finite action bounds"):
        pjp.make_networks(pjp.PPOConfig(squash_actions=True), unbounded, None)


# --------------------------------------------------------------------- conv building blocks


@pytest.mark.parametrize(
    ("kernel", "stride", "padding"),
    [(3, 1, "VALID"), (8, 4, "VALID"), (4, 2, "VALID"), (3, 1, "SAME"), (3, 2, "SAME")],
)
@pytest.mark.parametrize("impl", ["im2col", "xla"])
def test_conv2d_equals_flax_conv(kernel, stride, padding, impl):
    x = jax.random.normal(jax.random.key(0), (3, 11, 10, 5))
    module = Conv2D(7, kernel, stride, padding, impl=impl)
    params = module.init(jax.random.key(1), x)
    params = jax.tree.map(lambda p: p + 0.1, params)  # non-zero bias
    reference = jax.jit(nn.Conv(7, (kernel, kernel), (stride, stride), padding=padding).apply)(
        params, x
    )
    got = jax.jit(module.apply)(params, x)
    assert got.shape == reference.shape
    np.testing.assert_allclose(got, reference, atol=1e-5)


@pytest.mark.parametrize("encoder", ["cnn", "impala"])
def test_conv_paths_share_checkpoints(encoder):
    """conv_impl im2col (CPU default) and xla (GPU / TPU default, cuDNN) have the same
    parameters: params initialised with one compute the same outputs with the other."""
    env, env_params = pjp.make_env("Breakout-MinAtar")
    base = pjp.PPOConfig(
        env_name="Breakout-MinAtar", encoder=encoder, cnn_channels=[8], cnn_kernel_sizes=[3],
        cnn_strides=[1], impala_channels=[4, 8], hidden_sizes=(16,), conv_impl="im2col",
    )  # fmt: skip
    obs = jax.random.bernoulli(jax.random.key(1), 0.3, (6, 10, 10, 4))
    params, apply_im2col = _init(base, env, env_params)
    xla = pjp.make_networks(base.replace(conv_impl="xla"), env, env_params)
    assert jax.tree.map(np.shape, jax.eval_shape(xla.init, jax.random.key(0))) == jax.tree.map(
        np.shape, params
    )
    dist_a, value_a = apply_im2col(params, obs)
    dist_b, value_b = jax.jit(xla.apply)(params, obs)
    np.testing.assert_allclose(value_a, value_b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dist_a.logits, dist_b.logits, rtol=1e-5, atol=1e-5)
    # "auto" is im2col on this CPU backend.
    assert pjp.PPOConfig().conv_impl == "auto" and jax.default_backend() == "cpu"
    from purejaxppo.networks.layers import resolve_conv_impl

    assert resolve_conv_impl("auto") == "im2col"


def test_mlp_encoder_rescales_uint8_images():
    """uint8 pixels reach the MLP encoder divided by 255, as they reach the conv encoders."""
    env = SpacesEnv(spaces.Box(0, 255, (6, 6, 3), jnp.uint8), spaces.Discrete(2))
    float_env = SpacesEnv(spaces.Box(0.0, 1.0, (6, 6, 3)), spaces.Discrete(2))
    config = pjp.PPOConfig(hidden_sizes=(8,))
    params, apply = _init(config, env)
    _, float_apply = _init(config, float_env)
    pixels = jax.random.randint(jax.random.key(1), (4, 6, 6, 3), 0, 256).astype(jnp.uint8)
    np.testing.assert_allclose(
        apply(params, pixels)[1], float_apply(params, pixels / 255.0)[1], rtol=1e-5, atol=1e-6
    )
    assert float(jnp.max(jnp.abs(apply(params, pixels)[1]))) < 10.0


@pytest.mark.parametrize("size", [(10, 10), (11, 9), (5, 5), (1, 1), (2, 3)])
def test_max_pool_equals_flax(size):
    x = jax.random.normal(jax.random.key(0), (2, *size, 3))
    reference = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
    np.testing.assert_array_equal(max_pool(x, 3, 2), reference)


def test_coord_channels():
    out = coord_channels(jnp.full((2, 3, 2, 1), 7.0))
    assert out.shape == (2, 3, 2, 3)
    np.testing.assert_array_equal(out[..., 0], 7.0)
    np.testing.assert_allclose(out[0, :, :, 1], [[-1, 1], [-1, 1], [-1, 1]])  # x: column
    np.testing.assert_allclose(out[0, :, :, 2], [[-1, -1], [0, 0], [1, 1]])  # y: row


# --------------------------------------------------------------------- encoders


def test_nature_cnn_on_atari_frames():
    """84x84x4 uint8 frames: the Nature DQN shapes (20x20x32, 9x9x64, 7x7x64 = 3136)."""
    env = SpacesEnv(spaces.Box(0, 255, (84, 84, 4), jnp.uint8), spaces.Discrete(6))
    config = pjp.PPOConfig(
        encoder="cnn", hidden_sizes=(512,), activation="relu", share_encoder=True
    )
    assert _param_shapes(config, env) == {
        "encoder/obs_cnn/conv_0/kernel": (8, 8, 4, 32),
        "encoder/obs_cnn/conv_0/bias": (32,),
        "encoder/obs_cnn/conv_1/kernel": (4, 4, 32, 64),
        "encoder/obs_cnn/conv_1/bias": (64,),
        "encoder/obs_cnn/conv_2/kernel": (3, 3, 64, 64),
        "encoder/obs_cnn/conv_2/bias": (64,),
        "encoder/obs_mlp/dense_0/kernel": (7 * 7 * 64, 512),
        "encoder/obs_mlp/dense_0/bias": (512,),
        "actor_head/out/kernel": (512, 6),
        "actor_head/out/bias": (6,),
        "critic_head/out/kernel": (512, 1),
        "critic_head/out/bias": (1,),
    }
    # A narrower stack to compute with: uint8 frames are divided by 255, so the same
    # network on float frames in [0, 1] agrees.
    config = config.replace(
        cnn_channels=[4], cnn_kernel_sizes=[8], cnn_strides=[4], hidden_sizes=[8]
    )
    params, apply = _init(config, env)
    frames = jax.random.randint(jax.random.key(1), (2, 84, 84, 4), 0, 256).astype(jnp.uint8)
    dist, value = apply(params, frames)
    assert dist.logits.shape == (2, 6) and value.shape == (2,)
    float_env = SpacesEnv(spaces.Box(0.0, 1.0, (84, 84, 4)), spaces.Discrete(6))
    _nets = pjp.make_networks(config, float_env, None)
    _, float_apply = _nets.init, _nets.apply
    _, float_value = jax.jit(float_apply)(params, frames.astype(jnp.float32) / 255.0)
    np.testing.assert_allclose(value, float_value, rtol=1e-5, atol=1e-6)


def test_nature_encoder_is_the_fixed_nature_torso():
    """encoder="nature" builds the same parameters as the Nature "cnn" settings, and any
    other stack or head is refused naming the field."""
    env = SpacesEnv(spaces.Box(0, 255, (84, 84, 4), jnp.uint8), spaces.Discrete(6))
    nature = pjp.PPOConfig(
        encoder="nature", hidden_sizes=(512,), activation="relu", share_encoder=True
    )
    cnn = nature.replace(encoder="cnn")
    assert _param_shapes(nature, env) == _param_shapes(cnn, env)
    assert _param_shapes(nature, env)["encoder/obs_mlp/dense_0/kernel"] == (3136, 512)
    with pytest.raises(ValueError, match=r"hidden_sizes=\[64, 64\]: encoder='nature'"):
        pjp.PPOConfig(encoder="nature")
    with pytest.raises(
        ValueError, match=r"cnn_strides=\[2, 2, 1\]: .*set cnn_strides: \[4, 2, 1\]"
    ):
        nature.replace(cnn_strides=(2, 2, 1))
    with pytest.raises(ValueError, match=r"activation='tanh': encoder='nature'"):
        nature.replace(activation="tanh")


def test_observation_normalisation_rules():
    rules = {
        "uint8 0..255": (spaces.Box(0, 255, (8, 8, 3), jnp.uint8), (0.0, 255.0)),
        "bool frames": (spaces.Box(0, 1, (8, 8, 3), jnp.bool_), (0.0, 1.0)),
        "float [0, 1]": (spaces.Box(0.0, 1.0, (8, 8, 3)), (0.0, 1.0)),
        "float [0, 2]": (spaces.Box(0.0, 2.0, (8, 8, 3)), (0.0, 2.0)),  # Pong-misc
        "float unbounded": (spaces.Box(-jnp.inf, jnp.inf, (8, 8, 3)), (0.0, 1.0)),
        "vector": (spaces.Box(0, 255, (5,), jnp.uint8), (0.0, 1.0)),  # not an image: raw
    }
    for what, (space, want) in rules.items():
        (spec,) = observation_inputs(space)
        assert (spec.shift, spec.scale) == want, what
    # MinAtar's bool frames reach the conv as 0.0 / 1.0.
    env = SpacesEnv(spaces.Box(0, 1, (10, 10, 4), jnp.bool_))
    config = pjp.PPOConfig(encoder="cnn", cnn_channels=[4], cnn_kernel_sizes=[3], cnn_strides=[1])
    params, apply = _init(config, env)
    bits = jax.random.bernoulli(jax.random.key(0), 0.3, (3, 10, 10, 4))
    np.testing.assert_array_equal(
        apply(params, bits)[1], apply(params, bits.astype(jnp.float32))[1]
    )


def test_impala_with_coord_channels():
    env = SpacesEnv(spaces.Box(0, 1, (10, 10, 4)), spaces.Discrete(3))
    config = pjp.PPOConfig(encoder="impala", hidden_sizes=(256,), activation="relu")
    shapes = _param_shapes(config, env)
    # Input 4 channels + 2 CoordConv channels; stages 10 -> 5 -> 3 -> 2 (ceil halving).
    assert shapes["actor_encoder/obs_impala/stage_0/conv/kernel"] == (3, 3, 4 + 2, 16)
    assert shapes["actor_encoder/obs_impala/stage_0/block_0/conv_0/kernel"] == (3, 3, 16, 16)
    assert shapes["actor_encoder/obs_impala/stage_1/conv/kernel"] == (3, 3, 16, 32)
    assert shapes["actor_encoder/obs_impala/stage_2/block_1/conv_1/kernel"] == (3, 3, 32, 32)
    assert shapes["actor_encoder/obs_mlp/dense_0/kernel"] == (2 * 2 * 32, 256)
    # 3 stages x 2 blocks x 2 convs x (kernel, bias); the critic has its own copy.
    assert sum("/block_" in k and k.startswith("actor_encoder/") for k in shapes) == 24
    assert {k.replace("critic_encoder/", "actor_encoder/") for k in shapes} == {
        k for k in shapes if not k.startswith("critic_encoder/")
    }
    # A one-stage network to compute with.
    config = config.replace(impala_channels=[4], hidden_sizes=[8])
    params, apply = _init(config, env)
    obs = jax.random.uniform(jax.random.key(1), (4, 10, 10, 4))
    dist, value = apply(params, obs)
    assert dist.logits.shape == (4, 3) and value.shape == (4,)
    # The coordinate channels feed the first conv: zeroing their kernel slice changes the
    # output (it would not if they were missing or constant-free).
    kernel = params["params"]["critic_encoder"]["obs_impala"]["stage_0"]["conv"]["kernel"]
    assert kernel.shape == (3, 3, 6, 4)
    no_coords = jax.tree.map(lambda x: x, params)
    no_coords["params"]["critic_encoder"]["obs_impala"]["stage_0"]["conv"]["kernel"] = kernel.at[
        :, :, 4:
    ].set(0.0)
    assert float(jnp.max(jnp.abs(apply(no_coords, obs)[1] - value))) > 1e-4


def test_share_encoder():
    env, env_params = pjp.make_env("Breakout-MinAtar")
    base = dict(encoder="cnn", cnn_channels=[4], cnn_kernel_sizes=[3], cnn_strides=[1])
    base["hidden_sizes"] = (16,)
    obs = jax.random.bernoulli(jax.random.key(1), 0.3, (6, 10, 10, 4)).astype(jnp.float32)
    for share in (True, False):
        config = pjp.PPOConfig(**base, share_encoder=share)
        params, apply = _init(config, pjp.make_env("Breakout-MinAtar")[0])
        top = set(params["params"])
        want = {"encoder"} if share else {"actor_encoder", "critic_encoder"}
        assert top == want | {"actor_head", "critic_head"}
        grads = jax.grad(lambda p, apply=apply: apply(p, obs)[1].sum())(params)["params"]
        # The value's gradient reaches the shared encoder, and never the actor's own one.
        name = "encoder" if share else "actor_encoder"
        norm = optax_norm(grads[name])
        assert (norm > 0) if share else (norm == 0)
    del env_params


def optax_norm(tree):
    return math.sqrt(sum(float(jnp.sum(jnp.square(x))) for x in jax.tree.leaves(tree)))


def test_mlp_share_encoder_and_continuous_heads():
    env, env_params = pjp.make_env("Pendulum-v1")
    config = pjp.PPOConfig(env_name="Pendulum-v1", share_encoder=True, hidden_sizes=(32, 16))
    params, apply = _init(config, env, env_params)
    assert _shapes(params) == {
        "encoder/obs_mlp/dense_0/kernel": (3, 32),
        "encoder/obs_mlp/dense_0/bias": (32,),
        "encoder/obs_mlp/dense_1/kernel": (32, 16),
        "encoder/obs_mlp/dense_1/bias": (16,),
        "actor_head/out/kernel": (16, 1),
        "actor_head/out/bias": (1,),
        "critic_head/out/kernel": (16, 1),
        "critic_head/out/bias": (1,),
        "log_std": (1,),
    }
    dist, value = apply(params, jnp.ones((2, 3)))
    assert dist.event_shape == (1,) and value.shape == (2,)


def test_dict_and_tuple_observations():
    image = spaces.Box(0, 1, (10, 10, 4), jnp.bool_)
    vector = spaces.Box(-1.0, 1.0, (3,))
    env = SpacesEnv(spaces.Dict({"vector": vector, "image": image}), spaces.Discrete(3))
    config = pjp.PPOConfig(
        encoder="cnn", cnn_channels=[8], cnn_kernel_sizes=[3], cnn_strides=[1], hidden_sizes=(16,)
    )
    params, apply = _init(config, env)
    shapes = _shapes(params)
    # Per-key encoders: a conv + MLP for the image, an MLP for the vector, concatenated.
    assert shapes["actor_encoder/image_cnn/conv_0/kernel"] == (3, 3, 4, 8)
    assert shapes["actor_encoder/image_mlp/dense_0/kernel"] == (8 * 8 * 8, 16)
    assert shapes["actor_encoder/vector_mlp/dense_0/kernel"] == (3, 16)
    assert shapes["actor_head/out/kernel"] == (2 * 16, 3)
    assert not any("vector_cnn" in k for k in shapes)
    key_image, key_vector = jax.random.split(jax.random.key(1))
    obs = {
        "image": jax.random.bernoulli(key_image, 0.3, (5, 10, 10, 4)),
        "vector": jax.random.uniform(key_vector, (5, 3), minval=-1, maxval=1),
    }
    dist, value = apply(params, obs)
    assert dist.logits.shape == (5, 3) and value.shape == (5,)
    # The order of the keys in the dict does not matter (sorted by name).
    reordered = collections.OrderedDict([("vector", obs["vector"]), ("image", obs["image"])])
    np.testing.assert_array_equal(apply(params, reordered)[1], value)
    # Both inputs reach the value.
    grads = jax.grad(
        lambda o: apply(params, {"image": o[0], "vector": o[1]})[1].sum(),
    )((obs["image"].astype(jnp.float32), obs["vector"]))
    assert all(float(jnp.abs(g).sum()) > 0 for g in grads)
    # A tuple observation: entries named by index.
    tuple_env = SpacesEnv(spaces.Tuple([vector, vector]), spaces.Discrete(2))
    params, apply = _init(pjp.PPOConfig(hidden_sizes=(8,)), tuple_env)
    assert {k.split("/")[1] for k in _shapes(params) if "encoder" in k} == {"0_mlp", "1_mlp"}
    dist, value = apply(params, (obs["vector"], -obs["vector"]))
    assert dist.logits.shape == (5, 2)
    # Towers on their own entries (MAPPO's `tower_inputs`): only entries the observation has.
    env_params = env.default_params
    with pytest.raises(ValueError, match=r"the critic encodes \('state',\), but the observation's "
                       r"encoded entries are \['image', 'vector'\]"):  # fmt: skip
        pjp.make_networks(config, env, env_params, tower_inputs=(("vector",), ("state",)))
    with pytest.raises(ValueError, match="share_encoder=True: the actor and the critic see"):
        pjp.make_networks(config.replace(share_encoder=True), env, env_params,
                          tower_inputs=(("vector",), ("image",)))  # fmt: skip


def test_impala_gradients_and_squashed_training():
    """IMPALA: finite, non-zero PPO-loss gradients in every conv; a squashed Gaussian: two
    PPO updates with finite numbers. (The "cnn" encoder trains in test_cnn.py.)"""
    env, env_params = pjp.make_env("Breakout-MinAtar")
    config = pjp.PPOConfig(encoder="impala", impala_channels=[4], hidden_sizes=(8,))
    params, apply = _init(config, env, env_params)
    obs = jax.random.bernoulli(jax.random.key(1), 0.3, (16, 10, 10, 4)).astype(jnp.float32)
    actions = jax.random.randint(jax.random.key(2), (16,), 0, 3)

    def loss(p):
        dist, value = apply(p, obs)
        return (
            -jnp.mean(dist.log_prob(actions))
            - 0.01 * jnp.mean(dist.entropy())
            + jnp.mean(jnp.square(value - 1.0))
        )

    grads = jax.jit(jax.grad(loss))(params)["params"]
    flat = jax.tree_util.tree_flatten_with_path(grads)[0]
    for name, g in (("/".join(k.key for k in path), leaf) for path, leaf in flat):
        assert np.all(np.isfinite(g)), name
        if name.endswith("kernel"):
            assert float(jnp.abs(g).sum()) > 0, name

    tiny = dict(num_envs=4, num_steps=8, num_minibatches=2, update_epochs=1, total_timesteps=64)
    config = pjp.PPOConfig(env_name="Pendulum-v1", squash_actions=True, hidden_sizes=(16,), **tiny)
    out = jax.jit(pjp.make_train(config))(jax.random.key(0))
    for name in ("pg_loss", "v_loss", "entropy", "approx_kl", "grad_norm"):
        assert np.all(np.isfinite(out.metrics[name])), name
    policy = pjp.Policy.from_train_output(out, config)
    env, env_params = pjp.make_env(config.env_name)
    obs, _ = env.reset(jax.random.key(1), env_params)
    action, output = policy.act(obs, jax.random.key(2), temperature=0.0, return_model_output=True)
    # Greedy squashed action: mid + half * tanh(mean) with Pendulum's bounds [-2, 2].
    np.testing.assert_allclose(action, 2.0 * np.tanh(output["mean"]), rtol=1e-6)
    assert bool(env.action_space(env_params).contains(action))
