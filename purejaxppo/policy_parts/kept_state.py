"""`KeptState`: the recurrent state a `Policy` keeps on the Python object for the envs
it acts for (`act` / `get_action` step from it and advance it, `reset(done)` restarts
it), and the state the last step began at (`evaluate_actions`' default).

Feed-forward networks keep nothing: their state is the empty `()`. Because the state
lives on the object, a recurrent policy refuses traced inputs before any reaches it.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.acting_checks import refuse_traced_state
from purejaxppo.networks import Networks, State, reset_state


class KeptState:
    """The policy state `[B, S]` of a recurrent `networks` between steps (None: initial
    at the next step, again when the batch size changes), and `entry`, the state the last
    step began at."""

    def __init__(self, networks: Networks):
        self.initial_state = networks.initial_state
        self.recurrent = networks.stateful
        self.state: State | None = None
        self.entry: State | None = None

    def refuse_traced(self, method: str, *inputs: Any) -> None:
        """Raises (recurrent only) when `inputs` or the kept state are traced, naming
        `Policy.<method>` (`acting_checks.refuse_traced_state`)."""
        if self.recurrent:
            refuse_traced_state(method, inputs, self.state)

    def start(self, size: int) -> State:
        """The state the next step of `size` envs begins at: the kept one, or initial."""
        return self._sized(self.state, size)

    def advance(self, state: State, next_state: State) -> None:
        """Keeps a recurrent policy's state after a step that began at `state`."""
        if self.recurrent:
            self.entry, self.state = state, next_state

    def entry_for(self, size: int) -> State:
        """The state the last step began at, if it was for `size` envs; else initial."""
        return self._sized(self.entry if self.recurrent else None, size)

    def reset(self, done: Any) -> None:
        """Restarts the kept state where `done` (`[B]` bool, a scalar for one env; None:
        every env). No-op for feed-forward networks and before the first step.

        Raises:
          ValueError: `done` of another size than the kept state's batch; a traced `done`.
        """
        if not self.recurrent or self.state is None:
            return
        self.refuse_traced("reset", done)
        if done is None:
            self.state = None
            return
        done = jnp.asarray(done, bool).reshape(-1)
        size = jax.tree.leaves(self.state)[0].shape[0]
        if done.shape[0] != size:
            raise ValueError(
                f"reset: done has {done.shape[0]} entries, the policy acts for {size} envs"
            )
        self.state = reset_state(self.state, done, self.initial_state(size))

    def _sized(self, state: State | None, size: int) -> State:
        if state is None or jax.tree.leaves(state)[0].shape[0] != size:
            state = self.initial_state(size)
        return state
