"""Values are checked, not only names: each bad value below is refused with one line that
names its field, before anything is built or compiled.

1. JaxMARL env kwargs: counts and lengths in range (`max_steps: 0` trained on 1-step
   episodes), and any error of the env built from kwargs as one line naming them.
2. metabbo: `num_dims` / `population_size` enter the memory check before the fixed
   instances are drawn (`num_dims: 30000` asked for ~500 GiB of rotations).
3. The memory estimate charges its largest part to the field that makes it large:
   `update_epochs`, `recurrent_size`, an env's `num_agents`, `num_episodes` of eval.
4. `fused_kernels` takes YAML's `on` / `off` (read as booleans), and the command line
   gives a string field its word verbatim.
5. A config file nested too deeply is one ValueError, not a RecursionError.

Nothing here trains or compiles: the memory checks see a free memory set by
`monkeypatch`, so the refusals do not depend on the machine (and the old code, which has
no such check, fails the test without allocating anything).
"""

from __future__ import annotations

import pytest

import purejaxppo as pjp
from purejaxppo import config_yaml, memory
from purejaxppo.cli.options import TrainOptions, pop_options
from purejaxppo.cli.parser import build_parser
from purejaxppo.cli.values import load_config
from purejaxppo.envs import make_env
from purejaxppo.envs.suites import metabbo
from purejaxppo.envs.suites.metabbo import problems

MPE = "jaxmarl:MPE_simple_spread_v3"
GIB = 2**30
#: `config_yaml.MAX_DEPTH`, the deepest nesting a config file may have.
MAX_DEPTH = 50


@pytest.fixture
def free_memory(monkeypatch):
    """`free_memory(nbytes)`: the device has `nbytes` free, for every memory check."""

    def set_free(nbytes: int) -> None:
        monkeypatch.setattr(memory, "available_bytes", lambda device=None: (nbytes, "RAM"))

    return set_free


@pytest.fixture(scope="module")
def cartpole():
    return make_env("CartPole-v1")


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message, message
    return message


# ------------------------------------------------------------------ 1. JaxMARL kwargs
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_steps": 0}, "max_steps=0 must be an integer >= 1"),
        ({"max_steps": -5}, "max_steps=-5 must be an integer >= 1"),
        ({"max_steps": 2.5}, "max_steps=2.5 must be an integer >= 1"),
        ({"max_steps": True}, "max_steps=True must be an integer >= 1"),
        ({"num_agents": 0}, "num_agents=0 must be an integer >= 1"),
        ({"num_agents": "3"}, "num_agents='3' must be an integer >= 1"),
        ({"num_landmarks": 0}, "num_landmarks=0 must be an integer >= 1"),
    ],
)
def test_jaxmarl_counts_and_lengths_are_range_checked(kwargs, message):
    with pytest.raises(ValueError) as err:
        make_env(MPE, kwargs)
    assert one_line(err) == f"env_kwargs of {MPE}: {message}"


def test_jaxmarl_any_error_building_the_env_is_one_line_naming_the_kwargs():
    # MPE raises NotImplementedError for an unknown action type: a traceback before.
    with pytest.raises(ValueError) as err:
        make_env(MPE, {"action_type": 5, "max_steps": 10})
    assert one_line(err) == (
        f"env_kwargs of {MPE}: the env rejected action_type=5, max_steps=10 "
        "(NotImplementedError: Action type: 5 is not supported)"
    )


def test_jaxmarl_kwargs_in_range_still_build():
    env, _ = make_env(MPE, {"num_agents": 2, "num_landmarks": 2, "max_steps": 10})
    assert (env.num_agents, env.max_steps) == (2, 10)


# ------------------------------------------------------------------ 2. metabbo sizes
@pytest.fixture
def no_instance_banks(monkeypatch):
    """Drawing a bank of instances fails the test: refusals come before it."""

    def drawn(*args, **kwargs):
        raise AssertionError("the instance banks were drawn before the memory check")

    monkeypatch.setattr(problems, "instance_bank", drawn)


def test_metabbo_num_dims_is_refused_before_the_instances_are_drawn(free_memory, no_instance_banks):
    free_memory(64 * GIB)
    with pytest.raises(ValueError) as err:
        make_env("metabbo:DE", {"num_dims": 30000})
    # 2 draws x 37 instances x (8 * 30000**2 + 4 * 30000 + 64) bytes = 496.2 GiB
    assert one_line(err).startswith(
        "env_kwargs.num_dims=30000: building metabbo:DE (env_kwargs) needs about 496.24 GiB "
        "(496.22 GiB for the 37 fixed instances' rotations, 2 x 30000x30000 float32 each), "
        "more than the 64.00 GiB of RAM"
    )
    assert one_line(err).endswith("use a smaller env_kwargs.num_dims")


def test_metabbo_population_size_is_refused_before_building(free_memory, no_instance_banks):
    free_memory(GIB)
    with pytest.raises(ValueError, match=r"^env_kwargs\.population_size=100000000: building"):
        make_env("metabbo:PSO", {"population_size": 10**8})


def test_metabbo_population_enters_the_training_estimate():
    (part,) = metabbo.memory_parts({"population_size": 1000}, num_envs=64, constants=False)
    # 64 envs x 4 bytes x (12 * 1000 * 10 + 16 * 1000) floats = 34,816,000 bytes
    assert (part.field, part.value, part.nbytes) == ("env_kwargs.population_size", 1000, 34816000)
    assert memory.ENV_PARTS["metabbo"]({"population_size": 1000}, 64) == [part]


def test_metabbo_error_while_building_is_one_line_naming_the_kwargs(monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 4 bytes\n  more")

    monkeypatch.setattr(problems, "instance_bank", out_of_memory)
    with pytest.raises(ValueError) as err:
        make_env("metabbo:DE", {"num_dims": 12})
    assert one_line(err) == (
        "env_kwargs of metabbo:DE: building the env from num_dims=12 failed (RuntimeError: "
        "RESOURCE_EXHAUSTED: Out of memory allocating 4 bytes)"
    )


# ------------------------------------------------------------------ 3. the estimate's fields
def check(config: pjp.PPOConfig, env_and_params) -> str:
    networks = pjp.make_networks(config, *env_and_params)
    with pytest.raises(ValueError) as err:
        memory.check_memory(config, networks, config.num_envs, 4)
    return one_line(err)


def test_update_epochs_enter_the_estimate_and_are_named(free_memory, cartpole):
    free_memory(GIB)
    config = pjp.PPOConfig(update_epochs=10**9, loop_layout="compact")
    message = check(config, cartpole)
    # 10**9 epochs x 32 bytes (the epoch keys of jax.random.split) = 29.80 GiB
    assert message.startswith(
        "update_epochs=1000000000, hidden_sizes=[64, 64], num_envs=4, num_steps=128, "
        "num_minibatches=4: training needs about 29.80 GiB (29.80 GiB for the epochs' keys"
    )
    assert message.endswith("use a smaller update_epochs")


def test_the_flat_epoch_loop_charges_its_permutations_per_epoch(cartpole):
    config = pjp.PPOConfig(update_epochs=10, loop_layout="unrolled")
    parts = memory.estimate_parts(config, pjp.make_networks(config, *cartpole), 4, 4)
    (epochs,) = [p for p in parts if p.field == "update_epochs"]
    # 10 x (32 + 16 * 4 * 128 + 4 * 12 metrics * 4 minibatch steps) = 10 x 8416 bytes
    assert epochs.nbytes == 84160


def test_recurrent_size_is_named_when_it_dominates(free_memory, cartpole):
    free_memory(GIB)
    config = pjp.PPOConfig(recurrent="lstm", recurrent_size=100_000)
    assert check(config, cartpole).startswith(
        "recurrent_size=100000, hidden_sizes=[64, 64], num_envs=4, num_steps=128"
    )


def test_hidden_sizes_stay_named_when_they_dominate(free_memory, cartpole):
    free_memory(GIB)
    config = pjp.PPOConfig(hidden_sizes=(50_000, 50_000))
    assert check(config, cartpole).startswith("hidden_sizes=[50000, 50000], num_envs=4,")


def test_num_agents_is_named_when_the_agents_observations_dominate(free_memory):
    from purejaxppo.train_setup import prepare

    free_memory(2**20)
    kwargs = {"num_agents": 40, "num_landmarks": 40}
    config = pjp.PPOConfig(env_name=MPE, multi_agent="ippo", env_kwargs=kwargs)
    with pytest.raises(ValueError) as err:
        prepare(config)
    assert one_line(err).startswith(
        "env_kwargs.num_agents=40, hidden_sizes=[64, 64], num_envs=4, num_steps=128"
    )
    assert "for the rollout's observations" in one_line(err)


def test_eval_episodes_enter_the_estimate(free_memory, cartpole):
    from purejaxppo.acting.evaluation import make_episode_runner

    free_memory(GIB)
    networks = pjp.make_networks(pjp.PPOConfig(), *cartpole)
    with pytest.raises(ValueError) as err:
        make_episode_runner(networks, *cartpole, 10**9, 500)
    assert one_line(err).startswith(
        "num_episodes=1000000000: playing 1000000000 episodes at once needs about"
    )
    assert one_line(err).endswith("use a smaller num_episodes (--episodes)")


# ------------------------------------------------------------------ 4. string fields
@pytest.mark.parametrize(("value", "word"), [(True, "on"), (False, "off"), ("auto", "auto")])
def test_fused_kernels_takes_yaml_booleans(value, word):
    assert pjp.PPOConfig(fused_kernels=value).fused_kernels == word


def test_fused_kernels_off_in_a_config_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("fused_kernels: off\nnum_envs: 8\n")
    assert pjp.PPOConfig.from_yaml(path).fused_kernels == "off"
    assert load_config(path, {}).fused_kernels == "off"


def train_config(*argv: str) -> pjp.PPOConfig:
    """The config `purejaxppo train ARGV` would run (parsed as the command line does)."""
    args = vars(build_parser().parse_args(["train", *argv]))
    args.pop("command")
    args.pop("imports", None)
    args.pop("no_compile_cache", None)
    pop_options(TrainOptions, args)
    return load_config(None, args)


def test_the_command_line_gives_string_fields_their_word_verbatim():
    config = train_config(
        *("--fused-kernels", "off", "--name", "007", "--best-split", "yes"),
        *("--eval-splits", "{'yes': {}}", "--norm-adv", "on", "--hidden-sizes", "8,8"),
    )
    assert (config.fused_kernels, config.name, config.best_split) == ("off", "007", "yes")
    assert (config.norm_adv, config.hidden_sizes) == (True, (8, 8))  # not string fields
    assert train_config("--fused-kernels", "on", "--name", "null").fused_kernels == "on"
    assert train_config("--name", "null").name is None  # `str | None`: null is None


# ------------------------------------------------------------------ 5. nesting
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("env_kwargs: " + "[" * 5000 + "]" * 5000 + "\n", 1),
        ("env_kwargs:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 3000)), 50),
    ],
)
def test_a_config_nested_too_deeply_is_one_line(tmp_path, text, line):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        pjp.PPOConfig.from_yaml(path)
    assert one_line(err) == (
        f"{path}, line {line}: nested too deeply (more than {MAX_DEPTH} levels of lists / mappings)"
    )


def test_nesting_up_to_the_limit_is_read(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n")
    assert config_yaml.MAX_DEPTH == MAX_DEPTH
    value = config_yaml.load_yaml_file(path)["a"]
    for _ in range(MAX_DEPTH - 2):
        (value,) = value
    assert value == []


def test_the_command_line_reports_a_deep_config_in_one_line(tmp_path, capsys):
    from purejaxppo.cli import main

    path = tmp_path / "c.yaml"
    path.write_text("env_kwargs: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--config", str(path), "--no-progress", "--no-compile-cache"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"purejaxppo: error: {path}, line 1: nested too deeply (more than {MAX_DEPTH} levels "
        "of lists / mappings)\n"
    )
