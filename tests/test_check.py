"""`purejaxppo check` / `pjp.check`: a clean config passes, an injected bug fails the row
that points to its part of PPO, bad input gets one line."""

import json
import linecache
import math
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo import learning, losses
from purejaxppo.cli import main
from purejaxppo.drivers.check.measures import implied_lambda
from purejaxppo.envs import rows as env_rows
from purejaxppo.envs.probes import ProbeLambdaTimeLimit
from purejaxppo.envs.rows import EnvStep
from purejaxppo.sequences import make_sequences

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
CARTPOLE = pjp.PPOConfig.from_yaml(CONFIGS / "cartpole.yaml")


@pytest.fixture(scope="module")
def cartpole_report():
    return pjp.check(CARTPOLE, seeds=4, progress=False)


def test_a_clean_config_passes_every_row(cartpole_report):
    report = cartpole_report
    assert report.passed, str(report)
    status = {row.row: row.status for row in report.rows}
    # CartPole: discrete, feed-forward, no mask, no normalisation -> these five skip
    skipped = {
        "memory",
        "recurrent replay",
        "action mask",
        "continuous bound",
        "scaled observations",
    }
    assert {name for name, s in status.items() if s == "skip"} == skipped | {
        "invariant: normalisation statistics move"
    }
    ran = [row for row in report.rows if row.passed is not None]
    assert len(ran) == 16
    (info,) = [row for row in report.rows if row.status == "info"]
    assert info.row == "invariant: explained variance" and len(info.values) == 4
    for row in ran:
        lo, hi = row.spread
        assert lo <= row.measured <= hi  # the median lies within its seeds


def test_the_report_reads_as_a_table_and_as_json(cartpole_report):
    text = str(cartpole_report)
    assert "CartPole-v1: every row passed" in text
    assert "note: discount: gamma 0.5" in text
    data = json.loads(cartpole_report.to_json())
    assert data["passed"] is True and data["seeds"] == 4
    assert [row["row"] for row in data["rows"]] == [row.row for row in cartpole_report.rows]
    assert data["rows"][0]["measured"] == pytest.approx(1.0, abs=0.15)
    frame = cartpole_report.table()
    assert list(frame["status"]).count("pass") == 16


def _undiscounted_gae(*args, **kwargs):
    """GAE with the discount dropped: gamma forced to 1 (a planted bug)."""
    kwargs["gamma"] = 1.0
    return pjp.gae_advantages(*args, **kwargs)


def test_a_dropped_discount_fails_the_discount_row(monkeypatch):
    monkeypatch.setattr(learning, "gae_advantages", _undiscounted_gae)
    report = pjp.check(CARTPOLE, seeds=2, rows=["value", "discount"], progress=False)
    rows = {row.row: row for row in report.rows}
    assert rows["value"].passed  # a one-step episode does not need the discount
    assert rows["discount"].passed is False
    # V([0]) learns 1 instead of gamma = 0.5: the error is about 0.5
    assert rows["discount"].measured == pytest.approx(0.5, abs=0.1)
    assert not report.passed
    assert "discount" in report.failed[0].points_to
    assert "discount: points to the discount inside GAE" in str(report)


def _truncation_as_termination(*args, **kwargs):
    """GAE that treats a time limit as a real end (a planted bug)."""
    reward, value, next_value, terminated, truncated = args[:5]
    return pjp.gae_advantages(
        reward, value, next_value, terminated | truncated, truncated, *args[5:], **kwargs
    )


def test_a_time_limit_treated_as_an_end_fails_the_truncation_row(monkeypatch):
    monkeypatch.setattr(learning, "gae_advantages", _truncation_as_termination)
    report = pjp.check(CARTPOLE, seeds=2, rows=["time limit bootstraps"], progress=False)
    (row,) = report.rows
    assert row.passed is False and "truncation bootstrapping" in row.points_to
    # V([0, 0]) falls from 6.67 towards the mean truncated sum (~3.2): a relative error ~0.5
    assert row.measured > 0.3


def _reset_obs_as_final(**fields):
    """An `EnvStep` whose final observation is the auto-reset one (a planted bug: a time
    limit bootstraps from the next episode's first observation)."""
    return EnvStep(**{**fields, "final_obs": fields["obs"]})


def test_a_time_limit_bootstrapped_from_the_reset_observation_fails_the_truncation_row(
    monkeypatch,
):
    # at the row's former gamma 0.8 this read 0.156 to 0.170 (top 0.15): the next episode
    # starts endless half the time, and then its V is the right one
    monkeypatch.setattr(env_rows, "EnvStep", _reset_obs_as_final)
    report = pjp.check(
        CARTPOLE, seeds=2, rows=["time limit bootstraps"], invariants=False, progress=False
    )
    (row,) = report.rows
    # V* = 6.67; bootstrapped half the time from V([1, 0]) = 3.19, V([0, 0]) learns ~5:
    # 0.250 to 0.268 over 8 seeds
    assert row.passed is False and row.measured > 0.2, str(report)


def _monte_carlo_gae(*args, **kwargs):
    """GAE with lambda forced to 1: Monte-Carlo returns whatever the config says (a
    planted bug)."""
    kwargs["gae_lambda"] = 1.0
    return pjp.gae_advantages(*args, **kwargs)


def test_an_ignored_lambda_fails_the_lambda_row(cartpole_report, monkeypatch):
    (clean,) = [row for row in cartpole_report.rows if row.row == "GAE lambda"]
    assert clean.passed and max(abs(v) for v in clean.values) < 1e-4, str(cartpole_report)
    monkeypatch.setattr(learning, "gae_advantages", _monte_carlo_gae)
    report = pjp.check(CARTPOLE, seeds=2, rows=["GAE lambda"], invariants=False, progress=False)
    (row,) = report.rows
    # the advantages imply lambda 1 against the config's 0.95
    assert row.passed is False and row.measured == pytest.approx(0.05, abs=1e-4), str(report)
    assert "lambda in the advantage recursion" in row.points_to


def _lambda_across_time_limits(*args, **kwargs):
    """GAE whose lambda recursion runs on across a time limit: the truncated flags
    dropped, so only real ends stop it (`not_terminated` where `not_done` belongs; the
    TD errors, which read only the terminated flags, unchanged: a planted bug)."""
    reward, value, next_value, terminated, truncated = args
    return pjp.gae_advantages(
        reward, value, next_value, terminated, jnp.zeros_like(truncated), **kwargs
    )


def test_a_lambda_recursion_across_a_time_limit_fails_its_row(cartpole_report, monkeypatch):
    row_name = "GAE lambda at a time limit"
    (clean,) = [row for row in cartpole_report.rows if row.row == row_name]
    assert clean.passed and max(abs(v) for v in clean.values) < 1e-4, str(cartpole_report)
    monkeypatch.setattr(learning, "gae_advantages", _lambda_across_time_limits)
    report = pjp.check(CARTPOLE, seeds=2, rows=[row_name], invariants=False, progress=False)
    (row,) = report.rows
    # 16 steps, two episodes of 8: the first one's advantages gain the factor
    # 1 + lambda^8 (the next episode's first advantage, lambda^7, times lambda), so the
    # mean gains 1 + lambda^8 / 2, and the implied lambda is ~0.082 above 0.95
    lam = 0.95
    mean = (1 - lam**8) / (8 * (1 - lam)) * (1 + lam**8 / 2)
    expected = float(implied_lambda(np.array([mean]), ProbeLambdaTimeLimit.LENGTH)[0]) - lam
    assert row.passed is False and row.measured == pytest.approx(expected, abs=1e-3), str(report)
    assert "time limit stops the lambda recursion" in row.points_to


def _sequences_from_one_step_later(traj, *args):
    """`make_sequences` whose sequences start from the policy state the rollout stored
    one step later (the state after their first step: a planted bug)."""
    later = jax.tree.map(lambda x: jnp.concatenate([x[1:], x[-1:]]), traj.policy_state)
    return make_sequences(traj._replace(policy_state=later), *args)


def test_a_sequence_replayed_from_the_wrong_state_fails_the_replay_row(monkeypatch):
    gru = pjp.PPOConfig.from_yaml(CONFIGS / "memory_chain_gru.yaml")
    rows = ["recurrent replay"]
    clean = pjp.check(gru, seeds=2, rows=rows, invariants=False, progress=False)
    assert clean.passed and clean.rows[0].measured < 1e-6, str(clean)  # measured: 0.0
    monkeypatch.setattr(learning, "make_sequences", _sequences_from_one_step_later)
    report = pjp.check(gru, seeds=2, rows=rows, invariants=False, progress=False)
    (row,) = report.rows
    # Measured with the rollout's own bug (tools.mutants' rnn-stored-state-after-step):
    # 0.0036 to 0.0096 over 8 seeds
    assert row.passed is False and row.measured > 1e-3, str(report)
    assert "entered its first step" in row.points_to


class _MinForMax:
    """`jax.numpy` with `maximum` swapped for `minimum`: in `losses`, the surrogate takes
    the optimistic bound and the value loss the smaller of its two losses (a planted
    bug; both clips stop binding)."""

    def __init__(self, line: str = "") -> None:
        self.line = line  # only in calls on a source line holding this text

    def __getattr__(self, name):
        if name != "maximum":
            return getattr(jnp, name)
        caller = sys._getframe(1)
        source = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
        return jnp.minimum if self.line in source else jnp.maximum


@pytest.mark.parametrize("norm_adv", [True, False])
def test_clips_that_do_not_bind_fail_the_trust_region_rows(cartpole_report, monkeypatch, norm_adv):
    config = CARTPOLE.replace(norm_adv=norm_adv)
    rows = ["policy clip", "value clip"]
    if config == CARTPOLE:  # the module's clean report read these rows already
        clean = [row for row in cartpole_report.rows if row.row in rows]
    else:
        clean = pjp.check(config, seeds=2, invariants=False, rows=rows, progress=False).rows
    assert [row.row for row in clean] == rows and all(row.passed for row in clean), clean
    assert clean[0].expected == "[0.5, 3.5]"  # 1 + 0.5 / clip_coef at clip 0.2
    monkeypatch.setattr(losses, "jnp", _MinForMax())
    report = pjp.check(config, seeds=2, invariants=False, rows=rows, progress=False)
    policy, value = report.rows
    # Measured over 4 seeds, norm_adv on / off: clean 1.97 / 1.92 (policy) and 2.6 (value)
    # clips; unclipped 4.91 / 4.99 (P(paid action) near 1, the ceiling 1 / clip_coef = 5)
    # and 78 (V on its way to its target, 51 with the offset and 1 without).
    assert policy.passed is False and policy.measured > 4.0, str(report)
    assert value.passed is False and value.measured > 10.0, str(report)
    assert "pessimistic bound" in policy.points_to and "V_old" in value.points_to
    assert ("advantage normalisation" in policy.points_to) is norm_adv
    assert ("no offset" in policy.note) is not norm_adv


def _each_clip_broken(monkeypatch, config):
    """The policy clip row with only the surrogate's bound flipped, then the value clip row
    with only the value loss's (with both broken, the value's run to its target can hold P
    near the clip): `(policy row, value row)`, 2 seeds each."""
    rows = []
    for line, row in (("pg_loss = ", "policy clip"), ("v_loss = ", "value clip")):
        monkeypatch.setattr(losses, "jnp", _MinForMax(line))
        report = pjp.check(config, seeds=2, invariants=False, rows=[row], progress=False)
        rows.append(report.rows[0])
    return rows


def test_a_wide_network_reads_the_trust_region_rows_at_a_rate_for_its_width(monkeypatch):
    # At the probes' 0.001 this clean 512 x 3 tanh config read 4.97 clips (policy; a broken
    # clip's ceiling is 5) and 19.5 (value; above the top): Adam moves a wide layer's output
    # further per step. At 0.001 x 64 / 512: clean 2.1 and 2.5 over 8 seeds.
    config = pjp.PPOConfig.from_yaml(CONFIGS / "craftax_classic.yaml")
    rows = ["policy clip", "value clip"]
    clean = pjp.check(config, seeds=2, invariants=False, rows=rows, progress=False)
    assert clean.passed, str(clean)
    for row in clean.rows:
        assert "learning rate 0.000125 (0.001 x 64 / 512, the widest layer)" in row.note
    # Each clip broken alone (with both broken, the value's run to its target holds P at
    # 1.1 clips: the value row fails the check).
    policy, value = _each_clip_broken(monkeypatch, config)
    assert policy.passed is False and policy.measured > 4.0, str(policy)
    assert value.passed is False and value.measured > 10.0, str(value)
    # Two layers keep 0.001: scaled, mujoco_humanoid.yaml (256 x 2) read 2.2 clips with
    # the optimistic bound, a pass.
    from purejaxppo.drivers.check.probes import probes_for

    humanoid = pjp.PPOConfig.from_yaml(CONFIGS / "mujoco_humanoid.yaml")
    rates = {p.row: p.overrides.get("learning_rate") for p in probes_for(humanoid)}
    assert rates["policy clip"] == rates["value clip"] == 0.001
    # A recurrent core counts as depth: ReLU 128 + GRU 128 read 3.31 to 3.57 clips clean
    # at 0.001 (top 3.5) and 2.26 to 2.40 at 0.0005.
    gru = pjp.PPOConfig.from_yaml(CONFIGS / "jaxmarl_smax_3m_mappo_gru.yaml")
    rates = {p.row: p.overrides.get("learning_rate") for p in probes_for(gru)}
    assert rates["policy clip"] == rates["value clip"] == 0.0005


def test_advantages_left_unnormalised_fail_the_policy_clip_row(monkeypatch):
    # A planted bug: `norm_adv` on, but the minibatch advantages keep their offset.
    monkeypatch.setattr(losses, "_normalized", lambda advantages, axis_name: advantages)
    report = pjp.check(CARTPOLE, seeds=4, invariants=False, rows=["policy clip"], progress=False)
    (policy,) = report.rows
    # Measured: clean 2.0 clips; unnormalised about 0 (seeds from -1.0 to 1.0).
    assert policy.passed is False and policy.measured < 0.5, str(report)
    assert "advantage normalisation" in policy.points_to


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="seeds must be >= 1, got 0"):
        pjp.check(CARTPOLE, seeds=0)
    with pytest.raises(ValueError, match="seeds must be an integer, got 2.5"):
        pjp.check(CARTPOLE, seeds=2.5)
    with pytest.raises(ValueError, match="unknown row 'disc'; the rows: value, "):
        pjp.check(CARTPOLE, rows=["disc"])


def test_probe_config_carries_the_ppo_settings_and_adapts_the_rest():
    from purejaxppo.drivers.check import probe_config
    from purejaxppo.drivers.check.probes import PROBES

    user = CARTPOLE.replace(
        learning_rate=7e-4, clip_coef=0.3, activation="relu", num_minibatches=3, num_envs=3
    )
    discount = next(p for p in PROBES if p.row == "discount")
    config, notes = probe_config(user, discount)
    assert (config.learning_rate, config.clip_coef, config.activation) == (7e-4, 0.3, "relu")
    assert config.gamma == 0.5 and config.env_name == "Probe3-v0"
    assert config.num_minibatches == 1  # 3 does not split 16 x 16; the largest halving that does
    assert notes == [
        "num_minibatches 1 (the probe's batch is 256; 256 samples each)",
        "400 updates, not 100 (the config's 4 Adam steps per update, the ranges' 16)",
    ]
    cnn = CARTPOLE.replace(encoder="cnn")
    config, notes = probe_config(cnn, discount)
    assert config.encoder == "mlp" and "can't take the probe's 1-d observation" in notes[0]


def test_probe_config_keeps_minibatches_and_adam_steps_the_ranges_were_set_with():
    # two clean shipped configs failed rows: Swimmer's 32 minibatches split the probe's
    # 256 samples into 8s (probe 5 collapsed on 3 of 8 seeds), DoorKey's 2 epochs x 1
    # minibatch gave 200 Adam steps in 100 updates (probe 5 read 0.28)
    from purejaxppo.drivers.check import probe_config
    from purejaxppo.drivers.check.battery import BATTERY_UPDATES, _battery
    from purejaxppo.drivers.check.probes import PROBES

    battery = _battery([p for p in PROBES if p.in_battery])
    swimmer = pjp.PPOConfig.from_yaml(CONFIGS / "mujoco_swimmer.yaml")
    config, notes = probe_config(swimmer, battery)
    assert config.num_minibatches == 8 and config.num_updates == BATTERY_UPDATES
    assert notes == ["num_minibatches 8 (the probe's batch is 256; 32 samples each)"]
    small = swimmer.replace(num_envs=4, num_steps=16)  # the user's own minibatches of 2
    assert probe_config(small, battery)[0].num_minibatches == 32
    doorkey = pjp.PPOConfig.from_yaml(CONFIGS / "navix_doorkey_8x8_rejax.yaml")
    config, notes = probe_config(doorkey, battery)
    assert (config.update_epochs, config.num_minibatches) == (2, 1)
    assert config.num_updates == 8 * BATTERY_UPDATES  # 16 Adam steps per update / 2
    assert notes == ["800 updates, not 100 (the config's 2 Adam steps per update, the ranges' 16)"]
    for row in ("policy clip", "recurrent replay"):  # their own epochs: as written
        probe = next(p for p in PROBES if p.row == row)
        recurrent = doorkey.replace(recurrent="gru", grad_clip_per_network=False)
        config, _ = probe_config(recurrent, probe)
        assert config.num_updates == probe.updates, row


def test_probe_config_squashes_only_the_continuous_probe():
    # MetaBox's DE config squashes its Box actions; the check refused every row of it
    # ("only Box actions can be squashed; ProbeBattery-v0 has discrete actions")
    from purejaxppo.drivers.check import probe_config
    from purejaxppo.drivers.check.probes import PROBES

    metabbo = pjp.PPOConfig.from_yaml(CONFIGS / "metabbo_de.yaml")
    assert metabbo.squash_actions
    for probe in PROBES:
        config, notes = probe_config(metabbo, probe)
        squashed = probe.row == "continuous bound"
        assert config.squash_actions is squashed, probe.row
        assert ("squash_actions off: the probe's actions are discrete" in notes) is not squashed


def test_probe_config_keeps_the_towers_the_users_env_resolved():
    # MAPPO resolves a recurrent config to two towers, and per-network clipping needs
    # them; the probes are not MAPPO, so they must carry the towers, not re-resolve them
    from purejaxppo.drivers.check import probe_config
    from purejaxppo.drivers.check.probes import PROBES

    mappo = pjp.PPOConfig.from_yaml(CONFIGS / "jaxmarl_smax_3m_mappo_gru.yaml")
    assert mappo.share_encoder is None and not mappo.shares_encoder
    memory = next(p for p in PROBES if p.row == "memory")
    config, _ = probe_config(mappo, memory)
    assert config.share_encoder is False and config.grad_clip_per_network
    assert config.recurrent == "gru" and config.multi_agent is None
    novel = pjp.PPOConfig.from_yaml(CONFIGS / "pendulum_novel_gru.yaml")  # max_seq_len 16
    config, notes = probe_config(novel, memory)  # 20 steps: 16 does not divide them
    assert config.max_seq_len == 10 and notes == ["max_seq_len 10 (divides the probe's 20 steps)"]
    replay = next(p for p in PROBES if p.row == "recurrent replay")
    assert probe_config(novel, replay)[0].max_seq_len is None  # 7 steps: the whole rollout


@pytest.mark.parametrize(
    ("clip_coef", "high"), [(0.1, 6.0), (0.2, 3.5), (0.3, 1 + 0.5 / 0.3), (0.45, 2.0), (0.5, 1.8)]
)
def test_the_policy_clip_row_follows_clip_coef_and_norm_adv(clip_coef, high):
    # its top is halfway between the clean overshoot (~2 clips) and a broken clip's
    # ceiling (1 / clip_coef), at most P = 0.95 (above clip 0.4); without norm_adv it runs
    # on the offset-free bandit
    from purejaxppo.drivers.check.probes import probes_for

    for norm_adv, env, rewards in [
        (True, "ProbeTrustRegion", "rewards 50 and 52"),
        (False, "ProbeTrustRegionNoOffset", "rewards 0 and 2"),
    ]:
        config = CARTPOLE.replace(clip_coef=clip_coef, norm_adv=norm_adv)
        clip = next(p for p in probes_for(config) if p.row == "policy clip")
        assert (clip.env.__name__, clip.low) == (env, 0.5)
        assert clip.high == pytest.approx(high) and high < 1 / clip_coef
        assert clip.isolates.endswith(f"({rewards})"), clip.isolates
        assert clip.applies(config, None) is None


def test_the_policy_clip_row_skips_a_clip_it_cannot_tell_from_a_broken_one():
    # at clip 0.6 an unbroken clip lets P(paid action) reach 0.92 (CartPole's config),
    # next to a broken clip's 1
    from purejaxppo.drivers.check.probes import PROBES

    clip = next(p for p in PROBES if p.row == "policy clip")
    reason = clip.applies(CARTPOLE.replace(clip_coef=0.6), None)
    assert reason == (
        "clip_coef 0.6 > 0.5: an unbroken clip lets P(the paid action) run near 1, where a "
        "broken one goes"
    )


def test_a_relu_network_reads_the_trust_region_bandit_with_a_constant_input(monkeypatch):
    # Fed only the bandit's [0.0], ReLU units sit at 0 with no gradient: minatar.yaml read
    # 0.634 clips clean and with the optimistic bound alike (only the output bias learns).
    # Padded with 1, but normalised (a constant normalises to 0), this config read 0.38
    # and 0.36. Padded, without normalisation: clean 0.99 to 1.88 and 1.81 to 2.58 clips
    # over 20 seeds; 4.99 with the optimistic bound, 50 with the value clipped
    # around the current value.
    config = pjp.PPOConfig.from_yaml(CONFIGS / "navix_empty_6x6.yaml")
    assert config.activation == "relu" and config.normalize_observations
    rows = ["policy clip", "value clip"]
    clean = pjp.check(config, seeds=2, invariants=False, rows=rows, progress=False)
    assert clean.passed, str(clean)
    for row in clean.rows:
        assert "padded with a constant 1" in row.note and "normalisation off" in row.note
    policy, value = _each_clip_broken(monkeypatch, config)
    assert policy.passed is False and policy.measured > 3.5, str(policy)
    assert value.passed is False and value.measured > 10.0, str(value)


def test_a_broken_value_clip_through_a_shared_relu_torso_fails_the_value_row(monkeypatch):
    # The slowest V of any shipped config: the unclipped value moves 14 to 19 clips
    # (16 seeds) through this config's shared ReLU torso, a pass under the old top of 16.
    # Clean it reads 1.85 to 2.10 over 20 seeds.
    config = pjp.PPOConfig.from_yaml(CONFIGS / "breakout_minatar_cnn.yaml")
    assert config.share_encoder and config.activation == "relu"
    monkeypatch.setattr(losses, "jnp", _MinForMax("v_loss = "))
    report = pjp.check(config, seeds=2, invariants=False, rows=["value clip"], progress=False)
    (value,) = report.rows
    assert value.expected == "[0.5, 10]"
    assert value.passed is False and value.measured > 12.0, str(report)


def test_a_relu_network_sees_the_battery_with_a_constant_input(monkeypatch):
    # Fed only [0.0], ReLU units sit at 0 with no gradient and only the output biases
    # learn: configs/atari.yaml (ReLU 512, learning rate 2.5e-4) read V = 0.19 and
    # P(rewarded action) = 0.33 on the clean code. Padded with 1: 1.00 and 0.999.
    config = CARTPOLE.replace(activation="relu", hidden_sizes=(512,), learning_rate=2.5e-4)
    rows = ["value", "advantage sign"]
    clean = pjp.check(config, seeds=2, invariants=False, rows=rows, progress=False)
    assert clean.passed, str(clean)
    assert all("padded with a constant 1" in row.note for row in clean.rows)
    real = losses._normalized
    monkeypatch.setattr(losses, "_normalized", lambda a, axis_name: -real(a, axis_name))
    report = pjp.check(config, seeds=2, invariants=False, rows=rows[1:], progress=False)
    (sign,) = report.rows
    assert sign.passed is False and sign.measured < 0.5, str(report)


def test_a_shared_torso_without_value_clip_reads_the_offset_free_bandit():
    # The critic's unclipped fit to the offset's values (about 51) rescales a shared GRU
    # torso and carries P(paid action) past the clip: the offset bandit read 4.17 to 4.24
    # clips on this clean config (red above 3.5); the offset-free one reads 1.96 to 2.15.
    config = pjp.PPOConfig.from_yaml(CONFIGS / "pendulum_novel_gru.yaml")
    assert config.shares_encoder and not config.clip_vloss and config.norm_adv
    report = pjp.check(config, seeds=2, invariants=False, rows=["policy clip"], progress=False)
    (policy,) = report.rows
    assert policy.passed and policy.measured < 2.75, str(report)
    assert policy.isolates.endswith("(rewards 0 and 2)")
    assert "the torso is shared and clip_vloss is off" in policy.note


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "purejaxppo.cli", "check", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "0"], "purejaxppo: error: check: --seeds must be >= 1, got 0"),
        (["--env-name", "NoSuch-v0"], "env_name='NoSuch-v0' is not a known environment id"),
        (["--row", "nope"], "purejaxppo: error: check: unknown row 'nope'"),
        (["--seed", "-1"], "purejaxppo: error: check: seed=-1: must be in [0, 2**32)"),
    ],
)
def test_the_cli_refuses_bad_input_in_one_line(args, message):
    done = _cli(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_cli_refuses_an_unknown_config_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env_name: CartPole-v1\nlearning_rat: 0.001\n")
    done = _cli("--config", str(path))
    assert done.returncode == 2
    assert "learning_rat" in done.stderr and "Traceback" not in done.stderr


def test_the_cli_exits_1_on_a_failed_row_and_prints_json(monkeypatch, capsys):
    monkeypatch.setattr(learning, "gae_advantages", _undiscounted_gae)
    config = str(CONFIGS / "cartpole.yaml")
    code = main(["check", "--config", config, "--seeds", "2", "--row", "discount", "--json"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False
    (row,) = data["rows"]
    assert row["row"] == "discount" and row["status"] == "FAIL"
    assert not math.isnan(row["measured"]) and row["measured"] > 0.3
