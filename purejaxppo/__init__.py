"""purejaxppo: PPO as one pure, jit-compiled JAX function of a PRNG key and hyperparameters."""

import os as _os

# jax 0.10.x on CPU: vmapped training programs were seen to deadlock (0% CPU, forever)
# with XLA's concurrency-optimised CPU scheduler; turning it off costs no measurable speed
# here (CartPole, 1 and 4 agents). XLA reads XLA_FLAGS when the first backend starts, so
# this takes effect unless JAX already ran a computation before purejaxppo was imported.
_CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
if _CPU_SCHEDULER_FLAG not in _os.environ.get("XLA_FLAGS", ""):
    _os.environ["XLA_FLAGS"] = (
        _os.environ.get("XLA_FLAGS", "") + f" {_CPU_SCHEDULER_FLAG}=false"
    ).strip()

from purejaxppo.config import TRACED_FIELDS, Hyperparams, PPOConfig
from purejaxppo.envs import make_env, registered_env_ids
from purejaxppo.export import export_torch
from purejaxppo.gae import gae_advantages
from purejaxppo.losses import LossTerms, ppo_loss
from purejaxppo.networks import make_networks
from purejaxppo.policy import EvalResult, Policy, evaluate
from purejaxppo.train import METRICS, TrainFns, make_train, make_train_fns
from purejaxppo.types import RunnerState, TrainOutput, TrainState, Transition

__version__ = "0.1.0"

__all__ = [
    "METRICS",
    "TRACED_FIELDS",
    "Hyperparams",
    "EvalResult",
    "LossTerms",
    "PPOConfig",
    "Policy",
    "RunnerState",
    "TrainFns",
    "TrainOutput",
    "TrainState",
    "Transition",
    "evaluate",
    "export_torch",
    "gae_advantages",
    "make_env",
    "make_networks",
    "make_train",
    "make_train_fns",
    "ppo_loss",
    "registered_env_ids",
]
