"""`parallel.runs_mesh`: which devices a batch of runs may use, for every batched driver.

The decision table, directly: a JAX env's runs span the devices asked for (None: all;
"auto": the most that split the batch evenly, or min(count, devices) when the caller
pads); an EnvPool or gymnasium id's runs stay on one device by default, and several are
refused in the kind table's words. The several-device rows run in their own process with
4 fake CPU devices (the count is fixed when JAX starts); the rest in this one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import pytest

from purejaxppo import parallel

JAX_ENV = "CartPole-v1"
HOST_ENV = "gymnasium:CartPole-v1"
POOL_ENV = "envpool:Hopper-v4"

#: The kind table's refusals, whole (`kinds.check_runs_devices`).
HOST_REFUSAL = (
    "env_name='gymnasium:CartPole-v1' (host env (gymnasium)): batched runs split over "
    "several devices is not supported for this kind of env; the runs of a program share one "
    "vector env on the host, stepped from one device: use one device (devices=1, --devices 1) "
    "(asked for {n} devices)"
)
POOL_REFUSAL = (
    "env_name='envpool:Hopper-v4' (EnvPool env): batched runs split over several devices is "
    "not supported for this kind of env; the runs of a program share one pool on the host, "
    "stepped from one device: use one device (devices=1, --devices 1) (asked for {n} devices)"
)

#: Run with 4 CPU devices; prints one JSON object of the decisions.
FOUR_DEVICES = """
import json
import purejaxppo
from purejaxppo import parallel
import jax

def ids(mesh):
    return None if mesh is None else [d.id for d in mesh.devices.flat]

def refusal(env_id, devices, count=None):
    try:
        parallel.runs_mesh(env_id, devices, count)
    except ValueError as err:
        return str(err)
    return None

local = jax.local_devices()
out = {
    "num_local": len(local),
    "axis": list(parallel.runs_mesh("CartPole-v1", None).axis_names),
    "jax_none": ids(parallel.runs_mesh("CartPole-v1", None, 6)),
    "jax_int": ids(parallel.runs_mesh("CartPole-v1", 2, 6)),
    "jax_list": ids(parallel.runs_mesh("CartPole-v1", [local[3], local[1]])),
    "jax_auto": [len(ids(parallel.runs_mesh("CartPole-v1", "auto", c))) for c in range(1, 9)],
    "jax_auto_pad": [
        len(ids(parallel.runs_mesh("CartPole-v1", "auto", c, pad=True))) for c in range(1, 9)
    ],
    "jax_auto_any": ids(parallel.runs_mesh("CartPole-v1", "auto")),
    "jax_too_many": refusal("CartPole-v1", 5),
    "host_none": ids(parallel.runs_mesh("gymnasium:CartPole-v1", None, 8)),
    "host_auto": ids(parallel.runs_mesh("gymnasium:CartPole-v1", "auto", 8)),
    "host_one": ids(parallel.runs_mesh("gymnasium:CartPole-v1", 1, 8)),
    "host_list": refusal("gymnasium:CartPole-v1", local[:2]),
    "host_all": refusal("gymnasium:CartPole-v1", 4),
    "pool_none": ids(parallel.runs_mesh("envpool:Hopper-v4", None, 8)),
    "pool_auto": ids(parallel.runs_mesh("envpool:Hopper-v4", "auto", 8, pad=True)),
    "pool_three": refusal("envpool:Hopper-v4", 3),
}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def four() -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("JAX_NUM_CPU_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-c", FOUR_DEVICES],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_jax_envs_runs_span_the_devices_asked_for(four):
    assert four["num_local"] == 4
    assert four["axis"] == [parallel.RUNS_AXIS]
    assert four["jax_none"] == [0, 1, 2, 3]  # None: every device
    assert four["jax_int"] == [0, 1]  # n: the first n local devices
    assert four["jax_list"] == [3, 1]  # a list: those, in its order
    assert four["jax_auto_any"] == [0, 1, 2, 3]  # "auto" without a count: every local device
    assert four["jax_too_many"] == "devices=5: must be in [1, 4] (local devices)"


def test_auto_takes_the_most_devices_that_split_the_batch_evenly(four):
    # counts 1..8 on 4 devices: the largest d <= 4 dividing the count; a prime count
    # above 4 (5, 7) does not divide over 2..4 devices, so one device.
    assert four["jax_auto"] == [1, 2, 3, 4, 1, 3, 1, 4]
    # A padded batch (seeds): min(count, 4), the last device's share padded.
    assert four["jax_auto_pad"] == [1, 2, 3, 4, 4, 4, 4, 4]


def test_a_host_or_pool_kinds_runs_stay_on_one_device(four):
    # Default: one device; "auto": nothing to choose (None: the caller's default).
    assert four["host_none"] == [0] and four["pool_none"] == [0]
    assert four["host_auto"] is None and four["pool_auto"] is None
    assert four["host_one"] == [0]
    # Several devices: the kind table's refusal, whole, for an int or a list.
    assert four["host_list"] == HOST_REFUSAL.format(n=2)
    assert four["host_all"] == HOST_REFUSAL.format(n=4)
    assert four["pool_three"] == POOL_REFUSAL.format(n=3)


def test_in_this_process_with_the_devices_available():
    local = jax.local_devices()
    n = len(local)
    mesh = parallel.runs_mesh(JAX_ENV, None, 3)
    assert list(mesh.devices.flat) == jax.devices()
    assert list(parallel.runs_mesh(JAX_ENV, "auto", 3, pad=True).devices.flat) == local[: min(3, n)]
    assert list(parallel.runs_mesh(HOST_ENV, None, 3).devices.flat) == local[:1]
    assert parallel.runs_mesh(POOL_ENV, "auto", 3) is None


def test_several_devices_refused_by_the_kind_before_any_device_is_looked_up():
    # More devices than this process has: the kind's refusal, not the device count's.
    many = len(jax.local_devices()) + 7
    with pytest.raises(ValueError) as err:
        parallel.runs_mesh(POOL_ENV, many, 8)
    assert str(err.value) == POOL_REFUSAL.format(n=many)
    with pytest.raises(ValueError) as err:
        parallel.runs_mesh(JAX_ENV, many, 8)
    assert str(err.value) == f"devices={many}: must be in [1, {many - 7}] (local devices)"


def test_bad_devices_values():
    with pytest.raises(ValueError) as err:
        parallel.runs_mesh(JAX_ENV, "all", 4)
    assert str(err.value) == (
        "devices='all': must be None, 'auto', an int >= 1 or a list of devices"
    )
    n = len(jax.local_devices())
    with pytest.raises(ValueError) as err:
        parallel.runs_mesh(HOST_ENV, 0, 4)
    assert str(err.value) == f"devices=0: must be in [1, {n}] (local devices)"
