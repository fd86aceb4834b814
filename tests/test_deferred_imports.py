"""gymnax's plotting imports and tfp's scipy imports (under distrax) wait for their first use
(`purejaxppo/_deferred_imports.py`).

Each case runs in a fresh interpreter: what a module import loads is process state.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap


def _run(code: str) -> dict:
    """`code` in a fresh interpreter (non-interactive matplotlib); its last stdout line."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_gymnax_through_purejaxppo_loads_neither_seaborn_nor_pyplot_until_a_render():
    out = _run(
        """
        import json, sys
        import purejaxppo as pjp
        env, params = pjp.make_env("CartPole-v1")  # imports gymnax
        import gymnax
        from gymnax.environments.bsuite import catch
        from gymnax.environments.misc import pong
        names = ("seaborn", "scipy.stats", "matplotlib", "matplotlib.pyplot", "scipy")
        before = {n: n in sys.modules for n in names}
        loader = type(gymnax.__spec__.loader).__name__, type(gymnax.__loader__).__name__
        # a render: the stand-ins import the real modules
        import jax
        cenv, cparams = gymnax.make("Catch-bsuite")
        _, state = cenv.reset(jax.random.key(0), cparams)
        fig, ax = cenv.render(state, cparams)
        palette = pong.sns.color_palette("cubehelix", 3)
        import matplotlib.pyplot, seaborn
        print(json.dumps({
            "before": before,
            "loader": loader,
            "after": {n: n in sys.modules for n in ("seaborn", "matplotlib.pyplot")},
            "fig": type(fig).__name__,
            "palette": len(palette),
            "real": [type(m).__name__ for m in (seaborn, matplotlib.pyplot)],
            "seaborn_path": hasattr(seaborn, "__path__"),
            "catch_plt": type(catch.plt).__name__,
        }))
        """
    )
    assert not any(out["before"].values()), out["before"]
    assert out["loader"] == ["SourceFileLoader", "SourceFileLoader"]
    assert out["after"] == {"seaborn": True, "matplotlib.pyplot": True}
    assert out["fig"] == "Figure" and out["palette"] == 3
    # every import outside gymnax's package gets the real modules; gymnax keeps its stand-in
    assert out["real"] == ["module", "module"] and out["seaborn_path"]
    assert out["catch_plt"] == "_StandIn"


def test_a_library_imported_before_gymnax_is_the_one_gymnax_gets():
    out = _run(
        """
        import json, sys
        import seaborn
        import purejaxppo
        import gymnax
        from gymnax.environments.misc import pong
        print(json.dumps({"same": pong.sns is seaborn, "pyplot": type(pong.plt).__name__}))
        """
    )
    # seaborn imports matplotlib.pyplot, so neither needs a stand-in
    assert out == {"same": True, "pyplot": "module"}


def test_distrax_through_purejaxppo_loads_scipy_at_its_first_use():
    out = _run(
        """
        import json, sys
        import jax
        import purejaxppo as pjp
        from purejaxppo import PPOConfig, make_train
        env, params = pjp.make_env("CartPole-v1")
        make_train(PPOConfig(num_envs=2, num_steps=4, total_timesteps=8))  # the networks
        import distrax
        loaded = {n: n in sys.modules for n in ("scipy", "scipy.special", "scipy.linalg")}
        log_prob = float(distrax.Normal(0.0, 1.0).log_prob(0.5))
        # tfp's numpy backend keeps its stand-in, which imports scipy at its first use
        from tensorflow_probability.python.internal.backend.numpy import numpy_math
        erf = float(numpy_math.scipy_special.erf(0.5))
        import scipy.special
        print(json.dumps({
            "loaded": loaded,
            "log_prob": log_prob,
            "erf": erf,
            "stand_in": type(numpy_math.scipy_special).__name__,
            "real": type(scipy.special).__name__,
            "ndtri": float(scipy.special.ndtri(0.5)),
        }))
        """
    )
    assert out["loaded"] == {"scipy": False, "scipy.special": False, "scipy.linalg": False}
    assert abs(out["log_prob"] - (-0.5 * 0.25 - 0.5 * math.log(2 * math.pi))) < 1e-6
    assert abs(out["erf"] - math.erf(0.5)) < 1e-12
    assert out["stand_in"] == "_StandIn" and out["real"] == "module" and out["ndtri"] == 0.0
