"""purejaxppo: PPO as one pure, jit-compiled JAX function of a PRNG key and hyperparameters."""

# jax 0.10.x on CPU: vmapped training programs were seen to deadlock (0% CPU, forever)
# with XLA's concurrency-optimised CPU scheduler; turning it off costs no measurable speed
# here (CartPole, 1 and 4 agents). XLA reads XLA_FLAGS once, when the first backend
# starts: set here, it takes effect unless JAX already started (importing gymnax does, as
# does any JAX computation), and then `_xla_flag.apply` warns once with the fix. Set only
# for jax 0.10.x: the flag is known to exist there, and XLA aborts the process on an
# unknown flag, so a later jax (which may have removed it) does not get it.
# Where only the CPU runs, XLA's backend optimisation level 2 instead of 3: about a fifth
# less compile for the training program at the same speed (`_xla_flag`, docs/benchmarks.md).
# A level in the user's XLA_FLAGS wins.
from purejaxppo import _xla_flag

_xla_flag.apply()

# gymnax's plotting imports (seaborn, matplotlib.pyplot: most of `import gymnax`) wait for
# their first use, a `render` call (`_deferred_imports`).
from purejaxppo import _deferred_imports  # noqa: E402

_deferred_imports.install()

# The public names, loaded on first use (PEP 562): `import purejaxppo` imports neither
# gymnax nor flax, and gymnax's import starts JAX's backend, after which
# `jax.distributed.initialize` (see `parallel.initialize_distributed`) and CPU device
# settings can no longer be changed.
_EXPORTS = {
    "purejaxppo.config": ("TRACED_FIELDS", "PPOConfig"),
    "purejaxppo.hyperparams": ("Hyperparams",),
    "purejaxppo.envs": ("make_env", "registered_env_ids"),
    "purejaxppo.export": ("export_onnx", "export_torch"),
    "purejaxppo.gae": ("gae_advantages", "n_step_advantages"),
    "purejaxppo.learning": ("learn",),
    "purejaxppo.losses": ("LossTerms", "ppo_loss"),
    "purejaxppo.networks": ("Networks", "make_networks", "networks_from_modules"),
    "purejaxppo.parallel": ("initialize_distributed", "make_data_parallel_train"),
    "purejaxppo.drivers.population": ("PBTResult", "pbt"),
    "purejaxppo.policy": ("Policy",),
    "purejaxppo.acting.evaluation": ("EvalResult", "evaluate"),
    "purejaxppo.actions": ("ActResult", "ActionEvaluation", "ActionOutput"),
    "purejaxppo.drivers.sweeps": ("SweepResult", "log_sweep", "sweep"),
    "purejaxppo.drivers.seeds": ("SeedsResult", "train_seeds"),
    "purejaxppo.drivers.tune": ("TuneOptions", "TuneResult", "tune"),
    "purejaxppo.drivers.check": ("CheckReport", "CheckRow", "check"),
    "purejaxppo.train": ("METRICS", "TrainFns", "make_train", "make_train_fns"),
    "purejaxppo.metrics": ("UpdateMetrics",),
    "purejaxppo.sinks": ("Sink", "make_sinks"),
    "purejaxppo.acting.video": ("record_episode", "save_episode_video"),
    "purejaxppo.acting.datasets": ("collect", "load_episodes"),
    "purejaxppo.dataset_files": ("sample_transitions",),
    "purejaxppo.networks.spaces_env": ("SpacesEnv",),
    "purejaxppo.sequences": ("trajectory_minibatches",),
    "purejaxppo.types": (
        "Env",
        "EnvParams",
        "RunnerState",
        "TrainOutput",
        "TrainState",
        "Transition",
    ),
    "purejaxppo.checkpoint": ("list_checkpoints", "load_init_params"),
    "purejaxppo.drivers.series": ("evaluate_series",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__version__ = "0.1.0"
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'purejaxppo' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
