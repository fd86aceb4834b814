"""One env interface (`purejaxppo.envs.kinds`): the kind of env is decided once, every
operation works on every kind or is refused from one table, and the docs' table is the
code's. Cells that work are run on small configs: gymnasium CartPole (eval, eval_freq with
`best/`, video, a factory from Python), EnvPool InvertedPendulum (eval)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import gymnasium
import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.envs import kinds
from purejaxppo.train import make_train_fns

ROOT = Path(__file__).resolve().parent.parent
GYM = "gymnasium:CartPole-v1"
#: The core: it never imports what one kind of env needs (the kinds adapt below it).
CORE = ("train", "train_setup", "learning", "rollout", "update", "losses", "gae")
EXAMPLE_IDS = {
    "jax": "CartPole-v1",
    "envpool": "envpool:Hopper-v4",
    "agents": "jaxmarl:MPE_simple_spread_v3",
    "host": GYM,
}
KIND_SPECIFIC = (
    "purejaxppo.multiagent",
    "purejaxppo.checkpoint",
    "purejaxppo.envs.host",
    "purejaxppo.envs.suites.envpool",
)


def test_the_docs_table_is_the_code():
    import importlib.util

    spec = importlib.util.spec_from_file_location("capabilities", ROOT / "tools/capabilities.py")
    capabilities = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(capabilities)
    assert capabilities.main(["--check"]) == 0
    page = capabilities.PAGE.read_text()
    assert kinds.capability_table() in page
    # A stale page (one cell edited by hand) fails the check.
    stale = page.replace("| yes | yes | yes | yes |", "| yes | yes | no | yes |", 1)
    assert stale != page
    assert capabilities.render(stale) == page


@pytest.mark.parametrize("kind", kinds.KINDS, ids=lambda k: k.name)
def test_every_refusal_is_one_line_naming_operation_kind_and_alternative(kind):
    env_id = EXAMPLE_IDS[kind.name]
    assert kinds.kind_of_id(env_id) is kind
    for operation, label in kinds.OPERATIONS.items():
        if kind.supports(operation):
            assert kinds.check(operation, env_id) is kind
            continue
        with pytest.raises(ValueError) as info:
            kinds.check(operation, env_id)
        message = str(info.value)
        assert "\n" not in message
        assert env_id in message and kind.title in message and label in message
        assert message.endswith(kind.refusals[operation])  # what to do instead
    with pytest.raises(ValueError, match="operation='bogus'"):
        kind.supports("bogus")


def test_the_kind_of_an_env_object():
    assert kinds.kind_of(pjp.make_env("CartPole-v1")[0]) is kinds.JAX
    assert kinds.kind_of(pjp.make_env(GYM)[0]) is kinds.HOST
    assert kinds.kind_of(pjp.make_env("jaxmarl:MPE_simple_spread_v3")[0]) is kinds.AGENTS
    assert kinds.kind_of_id("CartPole-v1", multi_agent="ippo") is kinds.AGENTS


def test_the_core_imports_nothing_of_one_kind():
    for name in CORE:
        tree = ast.parse((ROOT / "purejaxppo" / f"{name}.py").read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        assert not imported & set(KIND_SPECIFIC), (name, imported & set(KIND_SPECIFIC))


def test_kind_checks_outside_envs_are_few():
    """The kind is asked in few places outside `envs/` (issue #37: at most 10)."""
    asks = ("kind_of(", "kind_of_id(", "is_host_env(", "is_envpool_id(", "is_multi_agent_env(")
    count = 0
    for path in (ROOT / "purejaxppo").rglob("*.py"):
        if "envs" in path.relative_to(ROOT / "purejaxppo").parts:
            continue
        text = path.read_text()
        count += sum(text.count(f" {ask}") + text.count(f".{ask}") for ask in asks)
    assert count <= 10, count


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
    from purejaxppo.video import make_renderer, record_episode, render_episode

    episode = record_episode(host_policy, jax.random.key(0))
    frames = render_episode(episode, make_renderer(host_policy.env, host_policy.env_params))
    assert len(frames) == episode.length == episode.episode_return
    assert frames[0].shape == (400, 600, 3) and frames[0].dtype == np.uint8
    assert not np.array_equal(frames[0], frames[-1])


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


def test_gymnasium_seeds_run_one_after_another_as_their_single_runs(tmp_path):
    import pandas as pd

    tiny = ["--env-name", GYM, "--num-envs", "4", "--num-steps", "32", "--no-progress"]
    tiny += ["--total-timesteps", str(4 * 32 * 3)]
    seeds, single = tmp_path / "seeds", tmp_path / "single"
    assert main(["train", *tiny, "--num-seeds", "2", "--run-dir", str(seeds)]) == 0
    assert main(["train", *tiny, "--seed", "1", "--run-dir", str(single)]) == 0
    # Seed 1 of the seeds run trains exactly what a single run of seed 1 trains.
    pd.testing.assert_frame_equal(
        pd.read_csv(seeds / "seed_1" / "metrics.csv"), pd.read_csv(single / "metrics.csv")
    )
    summary = pd.read_csv(seeds / "summary.csv", dtype={"seed": str}).set_index("seed")
    assert list(summary.index[:2]) == ["0", "1"] and summary["diverged"].eq(0).all()
    assert sorted(p.name for p in (seeds / "seed_0" / "checkpoints" / "last").iterdir())


# ------------------------------------------------------------------------ EnvPool
@pytest.fixture(scope="module")
def envpool_policy():
    config = pjp.PPOConfig(
        env_name="envpool:InvertedPendulum-v4",
        num_envs=4,
        num_steps=16,
        total_timesteps=4 * 16,
        num_minibatches=2,
    )
    out = jax.jit(make_train_fns(config).train)(jax.random.key(0))
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
    np.testing.assert_array_equal(result.lengths, [25, 25, 25])
    assert (result.returns < 0).all()
    again = pjp.evaluate(policy, num_episodes=3, key=jax.random.key(1))
    np.testing.assert_array_equal(result.returns, again.returns)
