"""`drivers.seeds` imports at module level all but what starts JAX's backend (#37): the
command line imports `check_seeds` before it sets the CPU device count."""

import subprocess
import sys

CHECK = """
import jax._src.xla_bridge as xla_bridge

import purejaxppo
from purejaxppo.drivers.seeds import check_seeds

check_seeds(purejaxppo.PPOConfig(), 4, devices=2)
assert not xla_bridge._backends, "importing drivers.seeds started JAX's backend"
print("ok")
"""


def test_importing_seeds_starts_no_backend():
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "ok"
