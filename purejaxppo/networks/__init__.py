"""Actor-critic networks (flax linen) behind one interface, `Networks`.

Layout (one concern per module):

* `specs`: `ActionSpec` (explicit action kind), `ObsInput`, `EncoderSettings`,
  `CoreSettings`, and the checks that a config fits an env's spaces.
* `distributions`: action heads (`make_distribution`), masks (`apply_action_mask`),
  `to_env_action` and greedy / temperature `select_action`.
* `layers`: `Conv2D` (im2col on CPU, `lax.conv` elsewhere, same parameters), Nature CNN,
  IMPALA + CoordConv, dense stacks, heads, the per-input `Encoder` (dict / tuple obs).
* `cores`: LSTM, GRU, and the gated transformer-XL (`transformer`).
* `actor_critic`: the one `ActorCritic` module (explicit parameter names).
* `factory`: `Networks` (init, initial_state, step, unroll, apply) and `make_networks`.
* `custom`: `networks_from_modules` (bring your own flax actor and critic).
"""

from purejaxppo.networks.custom import networks_from_modules, param_labels
from purejaxppo.networks.distributions import (
    PAD_LOGIT,
    SquashedDiagGaussian,
    apply_action_mask,
    make_distribution,
    multi_discrete_logits,
    select_action,
    to_env_action,
)
from purejaxppo.networks.factory import (
    Networks,
    State,
    ensure_normalization,
    make_networks,
    reset_state,
    state_size,
)
from purejaxppo.networks.specs import (
    ActionSpec,
    CoreSettings,
    EncoderSettings,
    ObsInput,
    action_spec,
    observation_inputs,
    split_action_mask,
)

__all__ = [
    "ensure_normalization",
    "PAD_LOGIT",
    "ActionSpec",
    "CoreSettings",
    "EncoderSettings",
    "Networks",
    "ObsInput",
    "SquashedDiagGaussian",
    "State",
    "action_spec",
    "apply_action_mask",
    "make_distribution",
    "make_networks",
    "multi_discrete_logits",
    "networks_from_modules",
    "observation_inputs",
    "param_labels",
    "reset_state",
    "select_action",
    "split_action_mask",
    "state_size",
    "to_env_action",
]
