"""Every gymnax-registered id (and every probe id) works through make_env and make_train."""

import jax
import numpy as np
import pytest

import purejaxppo as pjp

TINY = pjp.PPOConfig(
    num_envs=2, num_steps=4, total_timesteps=16, num_minibatches=2, hidden_sizes=(8,)
)
# MNISTBandit-bsuite downloads MNIST when constructed; CI has no network, so it is left out.
IDS = [i for i in pjp.registered_env_ids() if i != "MNISTBandit-bsuite"]


def test_probe_ids_are_registered_with_gymnax():
    import gymnax

    for n in range(1, 8):
        env, _ = gymnax.make(f"Probe{n}-v0")
        assert env.name == f"Probe{n}-v0"


@pytest.mark.parametrize("env_id", IDS)
def test_train_traces_for_every_registered_env(env_id):
    config = TINY.replace(env_name=env_id)
    out = jax.eval_shape(pjp.make_train(config), jax.random.key(0))
    assert out.metrics["episode_return"].shape == (config.num_updates,)


@pytest.mark.parametrize("env_id", ["Breakout-MinAtar", "Reacher-misc"])
def test_train_runs_on_image_and_multidim_continuous_envs(env_id):
    # Breakout: boolean [10, 10, 4] observations, flattened; Reacher: 2-D Box actions.
    out = jax.jit(pjp.make_train(TINY.replace(env_name=env_id)))(jax.random.key(0))
    for name in ("pg_loss", "v_loss", "entropy", "grad_norm"):
        assert np.all(np.isfinite(out.metrics[name])), name


@pytest.mark.parametrize(
    "typo, first, absent",
    [
        ("CartPol-v1", "CartPole-v1", "Probe"),  # no unrelated probe ids
        ("Acrobot-v0", "Acrobot-v1", "Probe"),
        ("breakout-minatar", "Breakout-MinAtar", "-v"),  # MinAtar ids only
        ("Probe8-v0", "Probe1-v0", "CartPole"),
    ],
)
def test_env_suggestions_rank_by_similarity_within_the_family(typo, first, absent):
    with pytest.raises(ValueError, match="Close matches") as err:
        pjp.make_env(typo)
    close = str(err.value).split("Close matches: ")[1].rstrip(".").split(", ")
    assert close[0] == first and not any(absent in name for name in close), close
