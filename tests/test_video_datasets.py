"""#13 episode videos and trajectory datasets (untrained policies: no training compile)."""

import os

import jax
import numpy as np
import pytest
from PIL import Image

import purejaxppo as pjp
from purejaxppo.acting.datasets import collect, load_episodes
from purejaxppo.acting.video import make_renderer, record_episode, save_episode_video


def policy_for(env_name: str, seed: int = 0) -> pjp.Policy:
    config = pjp.PPOConfig(env_name=env_name, hidden_sizes=(16,))
    env, env_params = pjp.make_env(env_name)
    networks = pjp.make_networks(config, env, env_params)
    return pjp.Policy(networks.init(jax.random.key(seed)), config, env, env_params)


@pytest.fixture(scope="module")
def cartpole():
    return policy_for("CartPole-v1")


def test_gif_has_the_episode_length_in_frames(cartpole, tmp_path):
    path, episode = save_episode_video(cartpole, tmp_path / "cartpole.gif", jax.random.key(1))
    assert 1 <= episode.length < 500
    with Image.open(path) as gif:
        assert gif.n_frames == episode.length
    # The recorded episode is the greedy one (same key, same steps).
    again = record_episode(cartpole, jax.random.key(1))
    assert again.length == episode.length and again.episode_return == episode.episode_return


@pytest.mark.parametrize("greedy", [True, False])
def test_first_of_records_the_first_episode_evaluate_plays(cartpole, greedy):
    """`record_episode(first_of=E)` is episode 0 of `evaluate(num_episodes=E)` with the
    same key: the same steps, so the same return (what `eval --video` reports)."""
    key = jax.random.key(4)
    result = pjp.evaluate(cartpole, num_episodes=5, key=key, greedy=greedy)
    returns = result.returns
    episode = record_episode(cartpole, key, greedy=greedy, first_of=5)
    assert episode.length == result.lengths[0]
    assert episode.episode_return == pytest.approx(float(returns[0]), abs=1e-4)
    assert len(set(np.round(returns, 3))) > 1  # the other episodes differ
    with pytest.raises(ValueError, match="first_of=0"):
        record_episode(cartpole, key, first_of=0)


def test_observation_renderers(tmp_path):
    policy = policy_for("Probe2-v0")  # one-step episodes: one frame
    path, episode = save_episode_video(policy, tmp_path / "episode.gif")
    with Image.open(path) as gif:
        assert gif.n_frames == episode.length == 1
    env, env_params = pjp.make_env("Breakout-MinAtar")
    obs, state = env.reset(jax.random.key(0), env_params)
    frame = make_renderer(env, env_params)(state, obs)
    assert frame.shape == (10 * 16, 10 * 16, 3) and frame.dtype == np.uint8
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 2  # paddle, ball, bricks, empty


def test_video_bad_input_overwrites_nothing(cartpole, tmp_path):
    existing = tmp_path / "out.gif"
    existing.write_bytes(b"keep me")
    with pytest.raises(ValueError, match="exists"):
        save_episode_video(cartpole, existing)
    assert existing.read_bytes() == b"keep me"
    with pytest.raises(ValueError, match=r"\.gif or \.mp4"):
        save_episode_video(cartpole, tmp_path / "out.avi")
    acrobot = policy_for("Acrobot-v1")
    with pytest.raises(ValueError, match="no renderer for Acrobot-v1"):
        make_renderer(acrobot.env, acrobot.env_params)
    with pytest.raises(ValueError, match="no renderer"):
        save_episode_video(acrobot, tmp_path / "acrobot.gif")
    assert not (tmp_path / "acrobot.gif").exists()


def test_collected_dataset_round_trips(cartpole, tmp_path, monkeypatch):
    key = jax.random.key(3)
    # Small chunks and flushes: the episodes cross chunk boundaries and several files.
    result = collect(
        cartpole, 12, tmp_path / "data", key, minari_id="test/cartpole-v0",
        chunk_steps=8, flush_steps=40, info_keys=["discount"],
    )  # fmt: skip
    expected = pjp.evaluate(cartpole, num_episodes=12, key=key)
    np.testing.assert_array_equal(result.returns, expected.returns)
    np.testing.assert_array_equal(result.lengths, expected.lengths)
    assert len(result.files) > 1
    data = load_episodes(tmp_path / "data")
    assert sorted(data["episode_ids"]) == list(range(12))
    steps = int(expected.lengths.sum())
    assert data["obs"].shape == (steps, 4) and data["action"].shape == (steps,)
    assert data["info/discount"].shape == (steps,)
    returns = {i: data["reward"][data["episode_id"] == i].sum() for i in range(12)}
    np.testing.assert_allclose([returns[i] for i in range(12)], expected.returns)
    # Each episode ends in exactly one terminated / truncated step, its last.
    assert int(np.sum(data["terminated"] | data["truncated"])) == 12
    assert np.all(data["log_prob"] <= 0)

    import minari  # the test extra installs it

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "data" / "minari"))
    dataset = minari.load_dataset("test/cartpole-v0")
    assert dataset.total_episodes == 12 and dataset.total_steps == steps
    by_id = {e.id: float(e.rewards.sum()) for e in dataset.iterate_episodes()}
    np.testing.assert_allclose([by_id[i] for i in range(12)], expected.returns)
    assert os.environ["MINARI_DATASETS_PATH"].endswith("minari")


def test_episodes_cut_at_max_steps_end_truncated(cartpole, tmp_path):
    """An episode still running at `max_steps` is written with `truncated` on its last
    step (a time limit), never `terminated`."""
    collect(cartpole, 3, tmp_path / "data", jax.random.key(3), max_steps=4)
    data = load_episodes(tmp_path / "data")
    for i in range(3):
        steps = data["episode_id"] == i
        assert int(steps.sum()) == 4  # an untrained CartPole policy lasts > 4 steps
        assert data["truncated"][steps].tolist() == [False, False, False, True]
        assert not data["terminated"][steps].any()


def test_collect_bad_input_overwrites_nothing(cartpole, tmp_path):
    with pytest.raises(ValueError, match="num_episodes=0"):
        collect(cartpole, 0, tmp_path / "none")
    assert not (tmp_path / "none").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("keep")
    with pytest.raises(ValueError, match="exists"):
        collect(cartpole, 2, existing)
    assert [p.name for p in existing.iterdir()] == ["keep.txt"]
    with pytest.raises(ValueError, match="minari_id"):
        collect(cartpole, 2, tmp_path / "bad_id", minari_id="no version")
    assert not (tmp_path / "bad_id").exists()


def test_a_stopped_collect_writes_its_finished_episodes_and_stays_partial(cartpole, tmp_path):
    asked = []  # stop after the second chunk of 8 steps: the episodes ended by then

    def stop() -> bool:
        asked.append(1)
        return len(asked) == 2

    data = tmp_path / "data"
    result = collect(cartpole, 12, data, jax.random.key(3), chunk_steps=8, stop=stop)
    expected = pjp.evaluate(cartpole, num_episodes=12, key=jax.random.key(3))
    assert not result.complete and result.num_episodes < 12
    ended = expected.lengths <= 16  # the episodes over by step 16 (2 chunks)
    assert result.num_episodes == ended.sum()
    np.testing.assert_array_equal(result.returns, expected.returns[ended])
    assert (tmp_path / "data" / "collect.partial").exists()
    with pytest.raises(ValueError, match="partial dataset"):
        load_episodes(tmp_path / "data")
