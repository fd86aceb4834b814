"""gymnax's plotting imports wait for their first use (`purejaxppo/_deferred_imports.py`).

Each case runs in a fresh interpreter: what a module import loads is process state.
"""

from __future__ import annotations

import json
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
        before = {n: n in sys.modules for n in ("seaborn", "scipy.stats", "matplotlib.pyplot")}
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
    assert out["before"] == {"seaborn": False, "scipy.stats": False, "matplotlib.pyplot": False}
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
