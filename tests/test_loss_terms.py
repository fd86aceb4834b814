"""Loss terms are declared once, as the fields of `LossTerms`; every other list is derived.

A new loss term is a field of `LossTerms` plus its value in `ppo_loss` (and in the fused
kernels, `fused.py`): docs/guides/how-to-add.md, "A loss term". The last test makes that
edit in a fresh interpreter, before the package builds its lists, and trains: the term is
a metric of the run (`TrainOutput.metrics`, metrics.csv) and is checked for NaN / Inf.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import purejaxppo as pjp
from purejaxppo import guards, learning, metrics
from purejaxppo.losses import LossTerms

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "purejaxppo"

#: What users see today (the keys of `TrainOutput.metrics`, the metrics.csv columns), in
#: order: deriving the lists must not change it.
SHIPPED_METRICS = (
    "episode_return",
    "episode_length",
    "episode_count",
    "loss",
    "pg_loss",
    "v_loss",
    "entropy",
    "approx_kl",
    "clipfrac",
    "explained_variance",
    "learning_rate",
    "grad_norm",
    "update_epochs_run",
    "env_steps",
    "value_mean",
    "advantage_mean",
    "return_mean",
    "log_prob_mean",
    "action_mean",
    "action_std",
)


def test_the_metric_names_and_their_order_are_unchanged():
    assert pjp.METRICS == metrics.UpdateMetrics._fields == SHIPPED_METRICS


def test_every_list_of_loss_names_is_derived_from_loss_terms():
    terms = LossTerms._fields
    assert metrics.LossMetrics._fields == (*terms, "grad_norm")
    start = metrics.UpdateMetrics._fields.index(terms[0])
    assert metrics.UpdateMetrics._fields[start : start + len(terms)] == terms
    assert learning.LEARN_METRICS[: len(terms)] == terms
    assert set(learning.LEARN_METRICS) == set(pjp.METRICS) - set(metrics.LOOP_METRICS)
    assert guards.LOSS_METRICS == (*terms[1:], "grad_norm") and terms[0] == "loss"


def test_the_package_builds_loss_terms_by_keyword():
    # A positional `LossTerms(...)` would shift every value after a field added before it.
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LossTerms":
                calls.append((path.relative_to(ROOT), node.lineno, node.args))
    assert {str(path) for path, _, _ in calls} == {"purejaxppo/losses.py", "purejaxppo/fused.py"}
    assert [(path, line) for path, line, args in calls if args] == []


#: The edit of losses.py a contributor makes for a new term (`ratio_max`, the largest
#: probability ratio of the minibatch), made before anything else imports `LossTerms`.
#: The default (None) stands in for the other constructions, which the edit would extend.
NEW_TERM = """
import collections, json, math, sys
import jax, jax.numpy as jnp
import purejaxppo.losses as losses

fields = (*losses.LossTerms._fields, "ratio_max")
losses.LossTerms = collections.namedtuple("LossTerms", fields, defaults=(None,))
shipped_loss = losses.ppo_loss

def ppo_loss(log_prob, old_log_prob, *args, **kwargs):
    terms = shipped_loss(log_prob, old_log_prob, *args, **kwargs)
    ratio = jnp.exp(log_prob - old_log_prob)
    return terms._replace(ratio_max=jax.lax.stop_gradient(jnp.max(ratio)))

losses.ppo_loss = ppo_loss

import purejaxppo as pjp
from purejaxppo import guards, learning
from purejaxppo.drivers.single import train_and_log

config = pjp.PPOConfig(num_envs=4, num_steps=32, total_timesteps=384, num_minibatches=2,
                       update_epochs=2, save_freq=0)
result = train_and_log(config, sys.argv[1], progress=False, plot=False)
with open(f"{sys.argv[1]}/metrics.csv") as f:
    header = f.readline().strip().split(",")
print(json.dumps({
    "metrics": list(pjp.METRICS),
    "learn": list(learning.LEARN_METRICS),
    "guarded": list(guards.LOSS_METRICS),
    "csv": header,
    "values": result.metrics["ratio_max"].tolist(),
    "caught": guards.first_nonfinite_update({"ratio_max": [1.0, math.nan]}),
}))
"""


def test_a_new_field_of_loss_terms_is_trained_logged_and_guarded(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", NEW_TERM, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for names in (got["metrics"], got["learn"], got["csv"]):
        assert names[names.index("clipfrac") + 1] == "ratio_max"  # after the shipped terms
    assert got["metrics"] == [*SHIPPED_METRICS[:9], "ratio_max", *SHIPPED_METRICS[9:]]
    assert "ratio_max" in got["guarded"]
    assert got["caught"] == [2, "ratio_max"]
    values = np.asarray(got["values"])
    assert values.shape == (3,) and np.all(values >= 1.0)  # 3 updates; max ratio >= 1
