"""purejaxppo: PPO as one pure, jit-compiled JAX function of a PRNG key and hyperparameters."""

from purejaxppo.config import PPOConfig, Hyperparams, TRACED_FIELDS
from purejaxppo.envs import make_env, registered_env_ids
from purejaxppo.gae import gae_advantages
from purejaxppo.losses import LossTerms, ppo_loss
from purejaxppo.networks import make_networks
from purejaxppo.train import METRICS, TrainFns, make_train, make_train_fns
from purejaxppo.types import RunnerState, TrainOutput, TrainState, Transition

__version__ = "0.1.0"

__all__ = [
    "METRICS",
    "TRACED_FIELDS",
    "Hyperparams",
    "LossTerms",
    "PPOConfig",
    "RunnerState",
    "TrainFns",
    "TrainOutput",
    "TrainState",
    "Transition",
    "gae_advantages",
    "make_env",
    "make_networks",
    "make_train",
    "make_train_fns",
    "ppo_loss",
    "registered_env_ids",
]
