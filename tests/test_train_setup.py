"""The training setup: `train.py` builds on `train_setup.py`, which does not import
`train.py` back."""

import ast
from pathlib import Path

import pytest

import purejaxppo as pjp
from purejaxppo.train_setup import prepare

PACKAGE = Path(pjp.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every `purejaxppo.*` module imported by the file, at the top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("purejaxppo")}


def test_no_train_setup_circle():
    assert "purejaxppo.train" not in imported_modules(PACKAGE / "train_setup.py")
    assert "purejaxppo.train_setup" in imported_modules(PACKAGE / "train.py")


def test_prepare_checks_before_compiling():
    config = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=64, num_minibatches=2)
    setup = prepare(config)
    assert (setup.num_envs, setup.num_steps, setup.kind.name) == (4, 8, "jax")
    assert setup.metric_names == pjp.METRICS
    with pytest.raises(ValueError, match="callback_every=0"):
        prepare(config, callback_every=0)
    with pytest.raises(ValueError, match="num_envs=4 must be divisible by the number of devices 3"):
        prepare(config, num_shards=3, axis_name="d")
    with pytest.raises(ValueError, match="num_shards=2 needs an axis_name"):
        prepare(config, num_shards=2)
    with pytest.raises(ValueError, match="action_histogram=True: needs Discrete"):
        prepare(config.replace(env_name="Pendulum-v1", action_histogram=True))
    hist = prepare(config.replace(action_histogram=True))
    assert hist.num_actions == 2 and hist.metric_names[-2:] == ("action_frac/0", "action_frac/1")


def test_resolve_once_for_every_caller():
    """`kinds.resolve` is the one env-setup sequence: rows only for training, the
    refusals of the table, and `make_init` from a resolved setup or from scratch alike."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from purejaxppo import kinds
    from purejaxppo.train_setup import make_init

    config = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=64, num_minibatches=2)
    acting = kinds.resolve(config, operations=("policy",))
    assert acting.kind is kinds.JAX and acting.rows is None
    assert acting.networks.action_spec.num_actions == 2  # CartPole: Discrete(2)
    training = kinds.resolve(config, operations=("train",))
    assert training.rows is not None and training.rows.info_keys == ()
    with pytest.raises(ValueError, match="no rows to reset"):
        make_init(config, acting)
    # The same state whether make_init resolves the env itself or is handed it.
    key = jax.random.key(3)
    given, own = make_init(config, training)(key), make_init(config)(key)

    def data(x):
        return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x

    for a, b in zip(jax.tree.leaves(given), jax.tree.leaves(own), strict=True):
        np.testing.assert_array_equal(data(a), data(b))
    # A refusal is the table's own message, raised before the networks are built.
    host = config.replace(env_name="gymnasium:CartPole-v1")
    with pytest.raises(ValueError) as info:
        kinds.resolve(host, operations=("train", "data_parallel"))
    assert str(info.value) == str(kinds.HOST.error("data_parallel", "gymnasium:CartPole-v1"))


def test_resolve_acting_is_what_evaluation_videos_and_datasets_play():
    """`kinds.resolve_acting`: the kind's check, the env as the networks read it, its
    episodes and (outside the host loop) its rows; the host loop has no rows."""
    from purejaxppo import kinds
    from purejaxppo.envs import episodes

    config = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=64, num_minibatches=2)
    setup = kinds.resolve(config, operations=("policy",))
    acting = kinds.resolve_acting("eval", setup.env, setup.env_params, setup.networks)
    assert acting.kind is kinds.JAX and acting.env is setup.env
    assert acting.episodes is episodes.STEPS and acting.rows is not None
    assert acting.networks is setup.networks and acting.env_params is setup.env_params
    assert setup.episodes is None  # `resolve` leaves acting's episodes to `resolve_acting`
    host = config.replace(env_name="gymnasium:CartPole-v1")
    host_setup = kinds.resolve(host, operations=("policy",))
    host_env = kinds.resolve_env(host)[0]
    played = kinds.resolve_acting("collect", host_env, None, host_setup.networks)
    assert played.kind is kinds.HOST and played.rows is None and played.env is host_env


def test_policy_of_custom_networks_normalizes_as_training():
    """`Policy` resolves its networks as training does (`kinds.resolve`): custom networks
    get the run's observation normalisation, so the policy's value is training's."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import numpy as np

    from purejaxppo.networks import networks_from_modules

    class Mlp(nn.Module):
        features: int
        squeeze: bool = False

        @nn.compact
        def __call__(self, obs):
            out = nn.Dense(self.features)(nn.tanh(nn.Dense(8)(obs)))
            return out[..., 0] if self.squeeze else out

    config = pjp.PPOConfig(
        num_envs=4,
        num_steps=16,
        total_timesteps=4 * 16 * 2,
        num_minibatches=2,
        normalize_observations=True,
    )
    env, env_params = pjp.make_env("CartPole-v1")
    networks = networks_from_modules(Mlp(2), Mlp(1, squeeze=True), env, env_params)
    fns = pjp.make_train_fns(config, networks=networks)
    params = jax.jit(fns.train)(jax.random.key(0)).train_state.params
    obs = jnp.array([[1.0, 2.0, 0.3, -1.0]])
    _, value = fns.apply(params, obs)
    policy = pjp.Policy(params, config, networks=networks)
    assert policy.networks.normalization is not None
    # Unnormalised, the value differs in the first digit (-1.34 against -0.03 here).
    np.testing.assert_allclose(policy.get_action(obs).value, value, rtol=1e-5, atol=1e-6)


def test_the_setup_decides_the_loop_plan_once():
    """`prepare` decides the update's loop layout (`TrainSetup.plan`), and the builders
    of the program lay their loops out by the plan they are given, not by the config:
    `make_learn` with the "unrolled" plan has no `cond` (flat epochs) even for a config
    whose `loop_layout` is "compact"."""
    import jax
    import jax.numpy as jnp

    from purejaxppo.learning import make_learn
    from purejaxppo.loops import loop_plan
    from purejaxppo.train import plan_rollout

    config = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=64, num_minibatches=2)
    for layout in ("auto", "compact", "unrolled"):
        assert prepare(config.replace(loop_layout=layout)).plan == loop_plan(layout)
    assert prepare(config).plan.layout == "compact"  # "auto" on the CPU
    compact = config.replace(loop_layout="compact")
    setup = prepare(compact)
    fns = pjp.make_train_fns(compact)
    runner = fns.init(jax.random.key(0))
    rollout = plan_rollout(compact, setup)
    _, traj, *_ = jax.eval_shape(lambda r: rollout(r.train_state.params, r.env, r.key), runner)
    traj = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), traj)

    def jaxpr_text(plan):
        learn = make_learn(compact, setup.networks, plan)
        args = (runner.train_state, traj, runner.env.policy_state, jax.random.key(1))
        return str(jax.make_jaxpr(learn)(*args, fns.hparams, runner.update_step))

    assert " cond[" in jaxpr_text(setup.plan)
    assert " cond[" not in jaxpr_text(loop_plan("unrolled"))
    # The program's builders take the plan; none decides it again.
    for name in ("train.py", "update.py", "rollout.py"):
        assert "loop_plan(" not in (PACKAGE / name).read_text(), name
    learning = ast.parse((PACKAGE / "learning.py").read_text())
    make_learn_def = next(
        n for n in learning.body if isinstance(n, ast.FunctionDef) and n.name == "make_learn"
    )
    called = {
        n.func.id
        for n in ast.walk(make_learn_def)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert "make_update_epochs" in called and "loop_plan" not in called


def test_train_fns_carry_the_configs_hyperparams():
    """`TrainFns.hparams` is `Hyperparams.from_config(config)`: what `train(key)` runs
    with, and what the single-run driver gives `run`."""
    import jax
    import numpy as np

    from purejaxppo.hyperparams import Hyperparams

    config = pjp.PPOConfig(
        num_envs=4, num_steps=8, total_timesteps=64, num_minibatches=2, ent_coef=0.02, gamma=0.9
    )
    fns = pjp.make_train_fns(config)
    expected = Hyperparams.from_config(config)
    assert type(fns.hparams) is Hyperparams
    for got, want in zip(jax.tree.leaves(fns.hparams), jax.tree.leaves(expected), strict=True):
        assert got.dtype == want.dtype and got.shape == ()
        np.testing.assert_array_equal(got, want)
    assert float(fns.hparams.ent_coef) == np.float32(0.02)
