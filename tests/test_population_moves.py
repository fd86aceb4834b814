"""The host-side moves of a static-field PBT generation (`drivers/population/groups.py`):
members stacked into a group's batch and split back, bitwise, as one compiled program
each, and the per-member finiteness read on the host as `guards.all_finite` reads it."""

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.drivers.population.groups import _members_finite, _stack, _unstack
from purejaxppo.guards import all_finite


def member(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {
        "params": {"kernel": jnp.asarray(rng.normal(size=(3, 5)), jnp.float32)},
        "half": jnp.asarray(rng.normal(size=(4,)), jnp.bfloat16),
        "step": jnp.asarray(i, jnp.int32),
        "key": jax.random.key(i),
    }


def test_stack_then_unstack_gives_back_every_member_bitwise():
    members = [member(i) for i in range(3)]
    batch = _stack(members)
    assert batch["params"]["kernel"].shape == (3, 3, 5)
    assert batch["key"].shape == (3,)
    back = _unstack(batch, np.zeros(3, bool))
    assert len(back) == 3
    for original, got in zip(members, back, strict=True):
        assert jax.tree.structure(got) == jax.tree.structure(original)
        for a, b in zip(jax.tree.leaves(original), jax.tree.leaves(got), strict=True):
            if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
                a, b = jax.random.key_data(a), jax.random.key_data(b)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # the first members only (the padded copies are dropped)
    assert len(_unstack(batch, np.zeros(2, bool))) == 2


def test_members_finite_flags_what_all_finite_flags():
    members = [member(i) for i in range(4)]
    members[1]["params"]["kernel"] = members[1]["params"]["kernel"].at[2, 4].set(jnp.nan)
    members[3]["half"] = members[3]["half"].at[0].set(jnp.inf)  # bfloat16
    batch = _stack([{k: m[k] for k in ("params", "half", "step")} for m in members])
    flags = _members_finite(batch)
    assert flags.dtype == bool
    assert flags.tolist() == [True, False, True, False]
    np.testing.assert_array_equal(flags, np.asarray(all_finite(batch, batched=True)))
