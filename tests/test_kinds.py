"""One env interface (`purejaxppo.kinds`): every operation works on every kind or is
refused from one table (the table itself: `tests/test_kinds_table.py`). Cells that work
are run on small configs: gymnasium CartPole (eval, eval_freq with
`best/`, video, a factory from Python), EnvPool InvertedPendulum (eval, collect), EnvPool
Breakout (video, the raw game score as the headline), JaxMARL MPE with IPPO and MAPPO
(eval, eval_freq with `best/`, video)."""

from __future__ import annotations

import contextlib
import io
import json

import gymnasium
import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo import kinds
from purejaxppo.cli import main
from purejaxppo.train import make_train_fns

GYM = "gymnasium:CartPole-v1"


# ------------------------------------------------------------------ gymnasium (host)
@pytest.fixture(scope="module")
def host_policy():
    """A CartPole policy trained 3 updates on gymnasium envs made by a factory."""
    config = pjp.PPOConfig(env_name=GYM, num_envs=4, num_steps=32, total_timesteps=4 * 32 * 3)
    out = make_train_fns(config, env=lambda: gymnasium.make("CartPole-v1")).train(jax.random.key(0))
    assert np.asarray(out.metrics["episode_return"]).shape == (3,)
    return pjp.Policy.from_train_output(out, config)


def test_gymnasium_evaluate_plays_one_episode_per_env(host_policy):
    result = pjp.evaluate(host_policy, num_episodes=3, key=jax.random.key(1))
    # CartPole pays 1 per step: each episode's return is its length, at most 500.
    np.testing.assert_array_equal(result.returns, result.lengths.astype(np.float32))
    assert result.returns.shape == (3,) and (1 <= result.lengths).all()
    assert (result.lengths <= 500).all()
    again = pjp.evaluate(host_policy, num_episodes=3, key=jax.random.key(1))
    np.testing.assert_array_equal(result.returns, again.returns)  # seeded from the key
    greedy = pjp.evaluate(host_policy, num_episodes=3, key=jax.random.key(1), greedy=True)
    assert greedy.returns.shape == (3,)


def test_gymnasium_video_frames_are_gymnasiums_own(host_policy):
    from purejaxppo.acting.video import make_renderer, record_episode, render_episode

    episode = record_episode(host_policy, jax.random.key(0))
    frames = render_episode(episode, make_renderer(host_policy.env, host_policy.env_params))
    assert len(frames) == episode.length == episode.episode_return
    assert frames[0].shape == (400, 600, 3) and frames[0].dtype == np.uint8
    assert not np.array_equal(frames[0], frames[-1])


def test_gymnasium_video_first_of_is_the_first_episode_evaluate_plays(host_policy):
    from purejaxppo.acting.video import record_episode

    key = jax.random.key(2)
    result = pjp.evaluate(host_policy, num_episodes=4, key=key)  # sampled
    episode = record_episode(host_policy, key, greedy=False, first_of=4)
    assert episode.length == result.lengths[0] == episode.episode_return == result.returns[0]


def test_gymnasium_collect_writes_the_episodes_evaluate_plays(host_policy, tmp_path):
    result = pjp.collect(host_policy, 3, tmp_path / "data", jax.random.key(1), parallel=2)
    data = pjp.load_episodes(tmp_path / "data")
    assert result.num_episodes == 3 and len(data["episode_return"]) == 3
    np.testing.assert_array_equal(data["reward"], np.ones_like(data["reward"]))
    np.testing.assert_array_equal(data["episode_return"], result.lengths.astype(np.float32))
    # Every episode ends with its last step, and only there.
    ends = np.logical_or(data["terminated"], data["truncated"])
    assert int(ends.sum()) == 3 and data["obs"].shape == (int(result.lengths.sum()), 4)
    with pytest.raises(ValueError, match="host env"):
        pjp.collect(host_policy, 1, tmp_path / "other", info_keys=("x",))
    greedy = pjp.collect(host_policy, 2, tmp_path / "g", jax.random.key(3), greedy=True)
    cold = pjp.collect(host_policy, 2, tmp_path / "t0", jax.random.key(3), temperature=0.0)
    np.testing.assert_array_equal(greedy.returns, cold.returns)
    for bad in ({"temperature": -1.0}, {"temperature": 0.5, "greedy": True}):
        with pytest.raises(ValueError, match="temperature"):
            pjp.collect(host_policy, 1, tmp_path / "never", **bad)
    assert not (tmp_path / "never").exists()


def test_a_factory_that_is_no_gymnasium_env_is_refused_by_name():
    config = pjp.PPOConfig(env_name=GYM, num_envs=2, num_steps=8, total_timesteps=32)
    with pytest.raises(ValueError, match="returned int, not a gymnasium.Env"):
        pjp.make_train(config, env=lambda: 3)
    with pytest.raises(ValueError, match="a gymnasium.Env instance.*pass a factory"):
        pjp.make_train(config, env=gymnasium.make("CartPole-v1"))
    made = []

    def mixed():
        made.append(None)
        return gymnasium.make("CartPole-v1" if len(made) % 2 else "Acrobot-v1")

    with pytest.raises(ValueError, match="different spaces"):
        pjp.make_train(config, env=mixed)(jax.random.key(0))


def test_gymnasium_cli_run_evaluates_during_training_and_after(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--env-name", GYM, "--run-dir", str(run), "--no-progress"]
    argv += ["--num-envs", "4", "--num-steps", "32", "--total-timesteps", str(4 * 32 * 4)]
    argv += ["--eval-freq", "2", "--eval-episodes", "2", "--save-freq", "2"]
    assert main(argv) == 0
    assert sorted(p.name for p in (run / "checkpoints" / "best").iterdir())  # best/ written
    assert "last evaluation (train, update 4, 2 episodes): " in capsys.readouterr().out
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{GYM}: 2 episodes" in out and "mean length" in out
    assert main(["eval", str(run), "--episodes", "2", "--all-steps"]) == 0
    assert (run / "eval_steps.csv").is_file()
    # collect from an earlier checkpoint at a chosen temperature (0: greedy).
    data = tmp_path / "data"
    argv = ["collect", str(run), "--episodes", "2", "--out", str(data), "--step", "2"]
    assert main([*argv, "--temperature", "0"]) == 0
    meta = json.loads((data / "metadata.json").read_text())
    assert meta["temperature"] == 0.0 and meta["config"]["env_name"] == GYM


class BrokenCartPole(gymnasium.Wrapper):
    """CartPole whose step raises (or pays a NaN reward) at its 3rd step."""

    metadata = {"render_modes": []}  # gymnasium.make reads it from the class

    def __init__(self, nan: bool = False):
        super().__init__(gymnasium.make("CartPole-v1"))
        self.nan, self.t = nan, 0

    def step(self, action):
        self.t += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.t == 3 and not self.nan:
            raise RuntimeError("the simulator broke\n  and said more on a second line")
        return obs, float("nan") if self.t == 3 else reward, terminated, truncated, info


def test_an_error_in_the_users_env_is_one_line_naming_it(tmp_path, capsys):
    from purejaxppo.envs.host import EnvError

    config = pjp.PPOConfig(env_name=GYM, num_envs=2, num_steps=8, total_timesteps=32)
    with pytest.raises(EnvError) as info:
        pjp.make_train(config, env=BrokenCartPole)(jax.random.key(0))
    assert str(info.value) == (
        "env gymnasium:CartPole-v1 raised in step: RuntimeError: the simulator broke"
    )
    with pytest.raises(EnvError, match=r"non-finite reward nan \(env 0\) in step"):
        pjp.make_train(config, env=lambda: BrokenCartPole(nan=True))(jax.random.key(0))
    # The CLI: one line, exit 2, no traceback.
    gymnasium.register(id="BrokenCartPole-v0", entry_point=BrokenCartPole)
    argv = ["train", "--env-name", "gymnasium:BrokenCartPole-v0", "--no-progress"]
    argv += ["--run-dir", str(tmp_path / "run"), "--num-envs", "2", "--num-steps", "8"]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--total-timesteps", "32"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert "raised in step: RuntimeError: the simulator broke (PUREJAXPPO_DEBUG=1" in err


# ------------------------------------------------------------------------ EnvPool
@pytest.fixture(scope="module")
def envpool_policy():
    config = pjp.PPOConfig(
        env_name="envpool:InvertedPendulum-v4",
        num_envs=4,
        num_steps=16,
        total_timesteps=4 * 16,
        num_minibatches=2,
        info_metrics=("elapsed_step",),  # the table's info_metrics cell for EnvPool
    )
    out = jax.jit(make_train_fns(config).train)(jax.random.key(0))
    assert np.asarray(out.metrics["info/elapsed_step"]).shape == (1,)
    return pjp.Policy.from_train_output(out, config)


def test_envpool_collect_writes_complete_episodes(envpool_policy, tmp_path):
    result = pjp.collect(envpool_policy, 3, tmp_path / "data", jax.random.key(2), max_steps=1000)
    data = pjp.load_episodes(tmp_path / "data")
    assert result.num_episodes == 3 and len(data["episode_return"]) == 3
    # A reward of 1 per step until the pole falls: each return is its episode's length.
    np.testing.assert_array_equal(data["reward"], np.ones_like(data["reward"]))
    np.testing.assert_array_equal(data["episode_return"], result.lengths.astype(np.float32))


def test_envpool_evaluate_plays_its_own_pool(envpool_policy):
    policy = envpool_policy
    # 3 episodes: a pool of 3 envs beside nothing else; each ends when the pole falls (a
    # reward of 1 per step, so return = length) or at EnvPool's 1000-step limit.
    result = pjp.evaluate(policy, num_episodes=3, key=jax.random.key(1))
    np.testing.assert_array_equal(result.returns, result.lengths.astype(np.float32))
    assert ((1 <= result.lengths) & (result.lengths <= 1000)).all()


# ------------------------------------------------------------------- JaxMARL (agents)
@pytest.mark.parametrize("multi_agent", ["ippo", "mappo"])
def test_multi_agent_policy_acts_per_agent_and_evaluates_the_team_return(multi_agent):
    config = pjp.PPOConfig(
        env_name="jaxmarl:MPE_simple_spread_v3",
        multi_agent=multi_agent,
        num_envs=4,
        num_steps=25,
        total_timesteps=4 * 25 * 2,
        num_minibatches=2,
    )
    fns = make_train_fns(config)
    out = jax.jit(fns.train)(jax.random.key(0))
    policy = pjp.Policy.from_train_output(out, config)
    # One row per agent: 3 agents of 2 envs, each acting on its own observation.
    carry = jax.jit(fns.init)(jax.random.key(1)).env
    rows = jax.tree.map(lambda x: x[:6], carry.obs)
    actions = policy.act(rows)  # greedy: no key
    assert actions.shape == (6,) and actions.dtype == np.int32
    np.testing.assert_array_equal(actions, policy.act(rows))
    # MPE simple_spread: 25-step episodes, the team return the sum of the agents'
    # (negative) rewards; the same keys give the same episodes.
    result = pjp.evaluate(policy, num_episodes=3, key=jax.random.key(1))
    np.testing.assert_array_equal(result.lengths, [26, 26, 26])
    assert (result.returns < 0).all()
    again = pjp.evaluate(policy, num_episodes=3, key=jax.random.key(1))
    np.testing.assert_array_equal(result.returns, again.returns)


@pytest.fixture(scope="module", params=["ippo", "mappo"])
def mpe_cli_run(request, tmp_path_factory):
    """`(run_dir, stdout)` of one `purejaxppo train` of MPE simple_spread per
    multi-agent mode: 4 updates, evaluated, saved and filmed every 2."""
    run = tmp_path_factory.mktemp(f"mpe-{request.param}") / "run"
    argv = ["train", "--env-name", "jaxmarl:MPE_simple_spread_v3", "--run-dir", str(run)]
    argv += ["--multi-agent", request.param, "--num-envs", "4", "--num-steps", "25"]
    argv += ["--total-timesteps", str(4 * 25 * 4), "--num-minibatches", "2", "--no-progress"]
    argv += ["--eval-freq", "2", "--eval-episodes", "3", "--save-freq", "2", "--video-freq", "2"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return run, out.getvalue()


def test_multi_agent_cli_run_evaluates_the_team_return_and_keeps_the_best(mpe_cli_run):
    from purejaxppo.checkpoint import load_checkpoint

    run, stdout = mpe_cli_run
    assert "last evaluation (train, update 4, 3 episodes): " in stdout
    # Evaluated at updates 2 and 4; `best/` holds the update with the higher team return.
    import pandas as pd

    evals = pd.read_csv(run / "metrics.csv").set_index("update")["eval/train/return"].dropna()
    assert list(evals.index) == [2, 4] and (evals < 0).all()  # MPE rewards are negative
    best = load_checkpoint(run, kind="best")
    assert best.update_step == int(evals.idxmax())
    # The evaluation during training is `pjp.evaluate`'s: the team return of E episodes
    # (MPE: 25 steps each), seeded from the run's evaluation key stream.
    policy = pjp.Policy.load(run, kind="best")
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(0), 1), best.update_step)
    result = pjp.evaluate(policy, num_episodes=3, key=key, greedy=False)
    np.testing.assert_array_equal(result.lengths, [26, 26, 26])
    np.testing.assert_allclose(result.returns.mean(), evals.max(), rtol=1e-5)


def test_multi_agent_cli_run_films_mpe_episodes(mpe_cli_run):
    from PIL import Image

    from purejaxppo.acting.video import make_renderer, record_episode, render_episode

    run, _ = mpe_cli_run
    for update in (2, 4):
        gif = Image.open(run / "videos" / f"update_{update:06d}.gif")
        assert gif.n_frames == 26 and gif.size == (300, 300)  # one frame per MPE step
    policy = pjp.Policy.load(run)
    episode = record_episode(policy, jax.random.key(0))
    # 3 agents acting on their rows; the reward is the team reward (MPE: their sum).
    assert episode.length == 26 and episode.actions.shape == (26, 3)
    np.testing.assert_allclose(episode.episode_return, episode.rewards.sum())
    frames = render_episode(episode, make_renderer(policy.env, policy.env_params))
    assert frames[0].shape == (300, 300, 3) and not np.array_equal(frames[0], frames[-1])
    # 3 agents and 3 landmarks: their colours are on the first frame.
    colours = {tuple(c) for c in np.asarray(policy.env.env.colour)}
    assert colours <= {tuple(p) for p in frames[0].reshape(-1, 3)}


def test_jaxmarl_envs_other_than_mpe_refuse_video_naming_the_env():
    from purejaxppo.acting.video import make_renderer

    env, env_params = pjp.make_env("jaxmarl:switch_riddle")
    with pytest.raises(ValueError, match=r"no renderer for jaxmarl:switch_riddle: .*MPE"):
        make_renderer(env, env_params)


def test_envpool_atari_video_films_the_whole_game_from_the_observation_frames(tmp_path):
    from PIL import Image

    from purejaxppo.acting.video import make_renderer, record_episode, render_episode
    from purejaxppo.drivers.single import train_and_log

    # Breakout under episodic_life: a lost life is `terminated`, the game (5 lives) goes on.
    kwargs = {"episodic_life": True, "reward_clip": True, "max_episode_steps": 300}
    config = pjp.PPOConfig(
        env_name="envpool:Breakout-v5",
        env_kwargs=kwargs,
        num_envs=2,
        num_steps=16,
        total_timesteps=2 * 16,
        num_minibatches=1,
        video_freq=1,
    )
    train_and_log(config, tmp_path / "run", progress=False, plot=False)
    gif = Image.open(tmp_path / "run" / "videos" / "update_000001.gif")
    assert gif.size == (168, 168)  # the 84 x 84 frames, upscaled twice
    policy = pjp.Policy.load(tmp_path / "run")
    episode = record_episode(policy, jax.random.key(3), greedy=False)
    assert episode.obs.shape == (episode.length, 84, 84)  # the newest frame of each stack
    frames = render_episode(episode, make_renderer(policy.env, policy.env_params))
    # Grey frames: the agent's own (preprocessed) view.
    np.testing.assert_array_equal(frames[0][:-4:2, ::2, 0], episode.obs[0][:-2])
    assert (frames[0][..., 0] == frames[0][..., 2]).all()
    # Replaying the episode's actions on the same seed: it ends where the game does, every
    # life lost (5 terminations), or at the time limit; not at the first lost life.
    env, params = pjp.make_env("envpool:Breakout-v5", kwargs)
    obs, state = env.reset(jax.random.split(jax.random.key(3))[0], params)
    lives_lost = 0
    for t, action in enumerate(episode.actions):
        np.testing.assert_array_equal(np.asarray(obs)[..., -1], episode.obs[t])
        obs, state, _, terminated, truncated, info = env.step(jax.random.key(0), state, action)
        lives_lost += int(terminated)
    assert bool(info["game_over"]) and (lives_lost == 5 or bool(truncated))
    assert lives_lost >= 1 and episode.length <= 300


def test_envpool_mujoco_video_films_its_gymnasium_twin(tmp_path):
    """EnvPool renders no frames: a MuJoCo task's video plays gymnasium's env of the same
    id (same spaces, the task's options), rendered by MuJoCo."""
    from purejaxppo.acting.video import make_renderer, record_episode, render_episode
    from purejaxppo.envs.twins import gymnasium_twin

    env, env_params = pjp.make_env("envpool:InvertedPendulum-v4", {"max_episode_steps": 30})
    twin = gymnasium_twin(env)
    assert twin.name == "gymnasium:InvertedPendulum-v4" and twin.max_steps_in_episode == 30
    assert gymnasium_twin(env) is twin  # built once
    config = pjp.PPOConfig(env_name="envpool:InvertedPendulum-v4", hidden_sizes=(8,))
    networks = pjp.make_networks(config, env, env_params)
    policy = pjp.Policy(networks.init(jax.random.key(0)), config, env, env_params)
    renderer = make_renderer(env, env_params)
    episode = record_episode(policy, jax.random.key(1))
    assert 1 <= episode.length <= 30 and episode.obs.shape == (episode.length, 4)
    frames = render_episode(episode, renderer)
    assert frames[0].ndim == 3 and frames[0].shape[-1] == 3
    path, _ = pjp.save_episode_video(policy, tmp_path / "pendulum.gif", jax.random.key(1))
    assert path.stat().st_size > 0
    # An option gymnasium's env does not take: one line naming the twin and the option.
    env, _ = pjp.make_env("envpool:InvertedPendulum-v4", {"frame_stack": 1})
    with pytest.raises(ValueError, match=r"twin gymnasium:InvertedPendulum-v4.*frame_stack"):
        gymnasium_twin(env)


def test_envpool_mujoco_video_without_gymnasiums_mujoco_names_the_extra(monkeypatch):
    from purejaxppo.acting.video import make_renderer

    def missing(*args, **kwargs):
        raise gymnasium.error.DependencyNotInstalled(
            'MuJoCo is not installed ("gymnasium[mujoco]")'
        )

    env, env_params = pjp.make_env("envpool:InvertedPendulum-v4")
    monkeypatch.setattr(gymnasium, "make", missing)
    with pytest.raises(ImportError, match=r"twin gymnasium:.*pip install 'purejaxppo\[mujoco\]'"):
        make_renderer(env, env_params)


def test_envpool_atari_headline_is_the_raw_game_score_and_learning_is_unchanged(monkeypatch):
    # Breakout (5 lives) under episodic_life + reward_clip: the learner's episodes are
    # lives with rewards clipped to {-1, 0, 1}; the headline counts whole games, raw.
    config = pjp.PPOConfig(
        env_name="envpool:Breakout-v5",
        env_kwargs={"episodic_life": True, "reward_clip": True},
        num_envs=4,
        num_steps=64,
        total_timesteps=4 * 64 * 2,
        num_minibatches=2,
        info_metrics=("game_over_return", "game_over"),
    )
    out = jax.jit(make_train_fns(config).train)(jax.random.key(0))
    m = {k: np.asarray(v) for k, v in out.metrics.items()}
    games, lives = m["episode_count"], m["info/episode_count_clipped"]
    assert games.sum() >= 1
    # episode_return is the adapter's raw full-game return (`info["game_over_return"]`,
    # tests/test_envpool.py), over the same episodes: every one a game over.
    ended = games > 0
    np.testing.assert_array_equal(m["episode_return"][ended], m["info/game_over_return"][ended])
    np.testing.assert_array_equal(m["info/game_over"][ended], 1.0)
    assert np.isnan(m["episode_return"][~ended]).all()
    # Every game that ended lost its 5 lives in this run; lives of running games count too.
    assert 5 * games.sum() <= lives.sum() <= 5 * (games.sum() + config.num_envs)
    assert (m["episode_length"][ended] > 5).all()  # a game is several lives long
    # `pjp.evaluate` scores whole games too: raw integer scores, each game several lives
    # long (a random Breakout life lasts about 25 steps), ended before the step limit.
    policy = pjp.Policy.from_train_output(out, config)
    result = pjp.evaluate(policy, num_episodes=2, key=jax.random.key(1), max_steps=1000)
    assert ((50 < result.lengths) & (result.lengths < 1000)).all()
    np.testing.assert_array_equal(result.returns, np.round(result.returns))
    # The learning signal is the one the per-life rows (`vmapped_envs`) give: the same
    # params, bitwise; only the counting of episodes differs.
    monkeypatch.setitem(kinds.table._ROWS, "envpool", kinds.table.vmapped_envs)
    before = jax.jit(make_train_fns(config).train)(jax.random.key(0))
    jax.tree.map(np.testing.assert_array_equal, out.train_state.params, before.train_state.params)
    assert not np.array_equal(np.asarray(before.metrics["episode_count"]), games)


def test_mappo_pbt_evaluates_with_the_runs_own_networks(tmp_path, capsys):
    """PBT's evaluator is built from the members' networks (MAPPO's world-state critic);
    before, it built plain networks and failed with a flax ScopeParamNotFoundError."""
    out = tmp_path / "pbt"
    argv = ["pbt", "--env-name", "jaxmarl:MPE_simple_spread_v3", "--multi-agent", "mappo"]
    argv += ["--num-envs", "4", "--num-steps", "16", "--total-timesteps", "1024"]
    argv += ["--eval-freq", "4", "--eval-episodes", "2", "--population", "2"]
    argv += ["--ready-every", "4", "--search", "learning_rate=log_uniform:1e-4:1e-3"]
    argv += ["--out", str(out), "--no-progress"]
    assert main(argv) == 0
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 2 and (summary["fitness"] < 0).all()  # MPE team returns < 0
