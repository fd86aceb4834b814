"""`check(config)`: the probe battery and the invariants, run with a user's config."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from purejaxppo.config import PPOConfig, field_group
from purejaxppo.drivers.check.invariants import INVARIANTS, Invariant
from purejaxppo.drivers.check.measures import RELU_PAD, Trained, battery_pad
from purejaxppo.drivers.check.probes import PROBES, Probe, probes_for
from purejaxppo.drivers.check.report import CheckReport, CheckRow
from purejaxppo.drivers.segments import progress_bar
from purejaxppo.envs.probes.parts import BatteryParams, ProbeBattery

__all__ = ["check", "probe_config", "row_names"]

#: The config groups a probe takes from the user's config: the PPO settings and the
#: network family. Sizes, the env and the driver's settings are the probe's own.
CARRIED_GROUPS = ("loss", "optim", "network", "recurrent", "normalize")
#: Fields of those groups that describe the user's env, not PPO: the probe keeps its own.
ENV_SHAPED = (
    "encoder",
    "cnn_channels",
    "cnn_kernel_sizes",
    "cnn_strides",
    "impala_channels",
    "conv_impl",
    "action_mask_key",
)
PROBE_ENVS = 16
#: Updates of the battery's shared program (its probes converge in about half of them).
BATTERY_UPDATES = 100
#: The fewest samples a probe's minibatch holds (or the config's own minibatch size, if
#: smaller): the probe's batch of 256 split into the config's `num_minibatches` can leave
#: far fewer than the config's run sees. `configs/mujoco_swimmer.yaml` (32 minibatches of
#: 64; constant learning rate, no entropy bonus) split it into 32 of 8, and probe 5
#: collapsed on 3 of 8 clean seeds (min P(action = obs) 0.23 to 0.997, median 0.864,
#: a failure); split into 8 minibatches of 32 samples, its median was 0.999.
MIN_MINIBATCH = 32
#: Adam steps per update the ranges were set with (4 epochs x 4 minibatches): a learning
#: probe that takes the config's epochs and minibatches and gets fewer trains for more
#: updates, in proportion, so that every config gets as many Adam steps as the ranges'.
#: `configs/navix_doorkey_8x8_rejax.yaml` (2 epochs x 1 minibatch) had 200 steps in 100
#: updates and failed probe 5 (0.281) and the time limit (0.47) on clean code; in 800
#: updates it read 1.000 and 0.000.
CALIBRATED_STEPS = 16
#: Updates of the short run on the config's own env (the invariants): CartPole's
#: explained variance needs about 30 to rise clear of its seeds' noise.
INVARIANT_UPDATES = 40


class Spaces(NamedTuple):
    """What the probes ask of the user's env: continuous (Box) actions, an action mask."""

    continuous: bool
    masked: bool


def _spaces(config: PPOConfig) -> Spaces:
    from gymnax.environments import spaces as gym_spaces

    from purejaxppo.kinds.resolve import resolve_env

    env, env_params = resolve_env(config)
    action_space = env.action_space(env_params)
    obs_space = env.observation_space(env_params)
    masked = (
        config.action_mask_key is not None
        and isinstance(getattr(obs_space, "spaces", None), dict)
        and config.action_mask_key in obs_space.spaces
    )
    return Spaces(continuous=isinstance(action_space, gym_spaces.Box), masked=masked)


def _battery(probes: Sequence[Probe]) -> Probe:
    """The stand-in `Probe` whose config the battery's program trains with: the static
    overrides every battery probe shares, `BATTERY_UPDATES` updates."""
    overrides = {}
    for probe in probes:
        overrides.update(probe.overrides)
    return probes[0]._replace(env=ProbeBattery, updates=BATTERY_UPDATES, overrides=overrides)


def _check_arguments(seeds: Any, seed: Any) -> None:
    for name, value, low in (("seeds", seeds, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"check: {name} must be an integer, got {value!r}")
        if value < low:
            raise ValueError(f"check: {name} must be >= {low}, got {value}")


def probe_config(config: PPOConfig, probe: Probe, seed: int = 0) -> tuple[PPOConfig, list[str]]:
    """The config a probe trains with: `config`'s PPO settings and network family
    (`CARRIED_GROUPS`) on the probe's env, 16 envs x `probe.num_steps` steps x
    `probe.updates` updates, then `probe.overrides` and the probe's discount.

    Returns `(probe's config, notes)`: the notes say what was adapted (an encoder the
    probe's 1-d observation can't take becomes the MLP; a `max_seq_len` longer than the
    probe's rollout becomes the rollout, one that does not divide it the largest length
    below it that does; `squash_actions` is off on a probe with discrete actions; the
    config's `num_minibatches` becomes the most that leave `MIN_MINIBATCH` samples each
    (or the config's own minibatch size, if smaller); a `num_minibatches`, the config's
    or the one `probe.overrides` asks for, that does not split the probe's batch becomes
    the largest halving that does; a probe that takes the config's epochs and gets fewer
    than `CALIBRATED_STEPS` Adam steps per update trains for proportionally more updates).

    Raises:
      ValueError: the adapted config is still refused (names the field).
    """
    notes: list[str] = []
    carried = _carried(config, probe, notes)
    steps = PROBE_ENVS * probe.num_steps
    values = {
        **carried,
        "env_name": _env_id(probe),
        "num_envs": PROBE_ENVS,
        "num_steps": probe.num_steps,
        "total_timesteps": steps * probe.updates,
        "update_epochs": config.update_epochs,
        "loop_layout": config.loop_layout,
        "fused_kernels": config.fused_kernels,
        "seed": seed,
        **probe.overrides,
    }
    if probe.gamma is not None:  # in the battery, each lane's discount is traced instead
        values["gamma"] = probe.gamma
    asked = probe.overrides.get("num_minibatches", config.num_minibatches)
    minibatches = asked
    if "num_minibatches" not in probe.overrides:  # at least MIN_MINIBATCH samples each
        smallest = min(MIN_MINIBATCH, config.num_envs * config.num_steps // asked)
        minibatches = min(asked, max(1, steps // smallest))
    while True:
        try:
            probe_cfg = PPOConfig.from_dict({**values, "num_minibatches": minibatches})
        except ValueError:
            if minibatches <= 1:
                raise
            minibatches //= 2
            continue
        if minibatches != asked:
            notes.append(
                f"num_minibatches {minibatches} (the probe's batch is {steps}; "
                f"{steps // minibatches} samples each)"
            )
        return _with_calibrated_steps(probe_cfg, probe, notes), notes


def _with_calibrated_steps(probe_cfg: PPOConfig, probe: Probe, notes: list[str]) -> PPOConfig:
    """`probe_cfg` trained for `probe.updates` x ceil(`CALIBRATED_STEPS` / its Adam steps
    per update) updates when it takes fewer than `CALIBRATED_STEPS` Adam steps per update
    (epochs x minibatches), so that it takes at least the ranges' Adam steps; a note says
    so. A probe that sets its own epochs (the trust-region and replay rows) keeps its
    updates."""
    per_update = probe_cfg.update_epochs * probe_cfg.num_minibatches
    if "update_epochs" in probe.overrides or per_update >= CALIBRATED_STEPS:
        return probe_cfg
    updates = probe.updates * math.ceil(CALIBRATED_STEPS / per_update)
    notes.append(
        f"{updates} updates, not {probe.updates} (the config's {per_update} Adam steps per "
        f"update, the ranges' {CALIBRATED_STEPS})"
    )
    return probe_cfg.replace(total_timesteps=PROBE_ENVS * probe.num_steps * updates)


def _carried(config: PPOConfig, probe: Probe, notes: list[str]) -> dict[str, Any]:
    """`config`'s fields that `probe_config` carries to the probe (`CARRIED_GROUPS`),
    adapted to the probe's env; appends a note to `notes` for each adaptation."""
    carried = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(PPOConfig)
        if field_group(f.name) in CARRIED_GROUPS and f.name not in ENV_SHAPED
    }
    if config.encoder != "mlp":
        notes.append(f"encoder {config.encoder!r} can't take the probe's 1-d observation: MLP")
    seq_len = config.max_seq_len
    if seq_len is not None and seq_len > probe.num_steps:
        carried["max_seq_len"] = None  # the probe's whole rollout
    elif seq_len is not None and probe.num_steps % seq_len:
        fitted = max(d for d in range(1, seq_len) if probe.num_steps % d == 0)
        carried["max_seq_len"] = fitted
        notes.append(f"max_seq_len {fitted} (divides the probe's {probe.num_steps} steps)")
    # the user's towers, as their env resolved them (MAPPO keeps two; the probe is not MAPPO)
    carried["share_encoder"] = config.shares_encoder
    if config.squash_actions and not _box_actions(probe):
        carried["squash_actions"] = False
        notes.append("squash_actions off: the probe's actions are discrete")
    return carried


def _box_actions(probe: Probe) -> bool:
    """Whether the probe's env acts in a Box (the continuous bound probe), not Discrete."""
    from gymnax.environments import spaces

    env = probe.env()
    return isinstance(env.action_space(env.default_params), spaces.Box)


def _env_id(probe: Probe) -> str:
    """The registered id of a probe's env (`"<ClassName>-v0"`)."""
    return f"{probe.env.__name__}-v0"


def _keys(seed: int, seeds: int) -> jax.Array:
    return jax.random.split(jax.random.key(seed), seeds)


def _train(config: PPOConfig, seeds: int, seed: int, env: Any = None) -> tuple[Any, Any]:
    """Trains `seeds` seeds of `config` in one vmapped program: `(networks, TrainOutput)`.
    `env`, an env instance, replaces the one `config.env_name` names."""
    from purejaxppo.kinds.resolve import resolve
    from purejaxppo.train import make_train

    params = None if env is None else env.default_params
    networks = resolve(config, env, params, operations=("policy",)).networks
    train = make_train(config, env, params, networks=networks)
    out = jax.jit(jax.vmap(train))(_keys(seed, seeds))
    return networks, jax.device_get(out)


def _train_battery(
    config: PPOConfig, probes: Sequence[Probe], seeds: int, seed: int
) -> tuple[Any, Any]:
    """Trains every probe of `probes` (all in `ProbeBattery.PROBES`) x `seeds` seeds as
    the lanes of ONE program on `ProbeBattery`: lane `i * seeds + k` plays probe `i` with
    seed `k` (keys `split(key(seed), seeds)`, the same for every probe) and its own
    discount and entropy coefficient (`Probe.gamma`, `Probe.ent_coef`, else the config's). Returns `(networks, TrainOutput)` with
    `[len(probes) * seeds, ...]` leaves."""
    import jax.numpy as jnp

    from purejaxppo.hyperparams import Hyperparams
    from purejaxppo.kinds.resolve import resolve
    from purejaxppo.train import make_train

    env = ProbeBattery()
    networks = resolve(config, env, env.default_params, operations=("policy",)).networks
    base = Hyperparams.from_config(config)
    lanes = [(probe, k) for probe in probes for k in range(seeds)]
    hparams = Hyperparams.stack([_lane_hparams(base, config, p) for p, _ in lanes])
    index = jnp.asarray([ProbeBattery.index(p.env) for p, _ in lanes], jnp.int32)
    limit = jnp.asarray([ProbeBattery.time_limit(p.env) for p, _ in lanes], jnp.int32)
    keys = jnp.concatenate([_keys(seed, seeds)] * len(probes))
    pad = battery_pad(config)

    def lane(key: jax.Array, hp: Any, probe: jax.Array, max_steps: jax.Array) -> Any:
        params = BatteryParams(max_steps_in_episode=max_steps, probe=probe, pad=pad)
        return make_train(config, env, params, networks=networks)(key, hp)

    out = jax.jit(jax.vmap(lane))(keys, hparams, index, limit)
    return networks, jax.device_get(out)


def _lane_hparams(base: Any, config: PPOConfig, probe: Probe) -> Any:
    """A lane's traced hyperparameters: the config's, with the probe's discount and
    entropy coefficient where it sets them."""
    return base.replace(
        gamma=config.gamma if probe.gamma is None else probe.gamma,
        ent_coef=config.ent_coef if probe.ent_coef is None else probe.ent_coef,
    )


def _lanes(tree: Any, start: int, stop: int) -> Any:
    return jax.tree.map(lambda x: x[start:stop], tree)


def _row(
    spec: Probe | Invariant, values: Any = None, note: str = "", skip: str | None = None
) -> CheckRow:
    if skip is not None:
        nan = math.nan
        return CheckRow(
            row=spec.row,
            isolates=spec.isolates,
            expected=spec.expected,
            measured=nan,
            spread=(nan, nan),
            passed=None,
            points_to=spec.points_to,
            note=f"skipped: {skip}",
        )
    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values)]
    if finite.size < values.size:  # a NaN seed is a failed seed, never a dropped one
        median = math.nan
    else:
        median = float(np.median(finite))
    spread = (float(np.min(values)), float(np.max(values)))
    passed = bool(spec.low <= median <= spec.high) if not math.isnan(median) else False
    return CheckRow(
        row=spec.row,
        isolates=spec.isolates,
        expected=spec.expected,
        measured=median,
        spread=spread,
        passed=passed,
        points_to=spec.points_to,
        note=note,
        values=tuple(float(v) for v in values),
    )


def row_names() -> list[str]:
    """The names of every row `check` can report, probes first."""
    return [probe.row for probe in PROBES] + [invariant.row for invariant in INVARIANTS]


def _selected(rows: Sequence[str] | None) -> set[str]:
    if rows is None:
        return set(row_names())
    if isinstance(rows, str):
        rows = [rows]
    unknown = [name for name in rows if name not in row_names()]
    if unknown:
        raise ValueError(f"check: unknown row {unknown[0]!r}; the rows: {', '.join(row_names())}")
    return set(rows)


def _probe_groups(
    config: PPOConfig, spaces: Spaces, selected: set[str]
) -> tuple[list[tuple[Probe, str]], dict[tuple, list[Probe]]]:
    """The skipped probes (with the reason) and the rest grouped by the program they
    share (same env, overrides and size); only the `selected` rows."""
    skipped, groups = [], {}
    for probe in probes_for(config):
        if probe.row not in selected:
            continue
        reason = probe.applies(config, spaces)
        if reason is not None:
            skipped.append((probe, reason))
            continue
        if probe.in_battery:
            key = ("battery",)
        else:
            key = (_env_id(probe), tuple(sorted(probe.overrides.items())), probe.updates)
        groups.setdefault(key, []).append(probe)
    return skipped, groups


def check(
    config: PPOConfig,
    *,
    seeds: int = 8,
    seed: int = 0,
    invariants: bool = True,
    rows: Sequence[str] | None = None,
    progress: bool = True,
) -> CheckReport:
    """Is this PPO right? Runs the probe battery with `config`, then a short run on
    `config`'s own env checked against invariants.

    Every probe env (`purejaxppo.envs.probes`) isolates one part of PPO and has a known
    right answer; it trains with `config`'s PPO settings (learning rate and schedule,
    clip, epochs, minibatches, normalisation, advantage estimator, coefficients) and
    network family (activation, sizes, recurrent core or transformer), `seeds` seeds
    vmapped in one program per probe. Probes that need what the config lacks are skipped
    with the reason (memory without a core, the mask probe without a mask, ...).

    Args:
      config: the config to check (`PPOConfig`).
      seeds: K, seeds per probe (int >= 1); each row is the median over them.
      seed: the base PRNG seed (int >= 0).
      invariants: also run `INVARIANT_UPDATES` updates on the config's own env.
      rows: only these rows (names as in the report, `row_names()`); default all.
      progress: show a progress bar (one step per program).

    Returns:
      `CheckReport`: one `CheckRow` per probe and invariant; `report.passed`.

    Raises:
      ValueError: a bad `seeds` / `seed`, an unknown row name, or a config a probe cannot
        adapt (names it).
    """
    _check_arguments(seeds, seed)
    selected = _selected(rows)
    invariants = invariants and any(i.row in selected for i in INVARIANTS)
    start = time.perf_counter()
    spaces = _spaces(config)
    skipped, groups = _probe_groups(config, spaces, selected)
    configs = {
        key: probe_config(config, _battery(probes) if key == ("battery",) else probes[0], seed)
        for key, probes in groups.items()
    }  # every probe's config is checked before anything compiles
    done: dict[str, CheckRow] = {probe.row: _row(probe, skip=reason) for probe, reason in skipped}
    bar = progress_bar(
        len(groups) + int(invariants), unit="program", desc="check", enabled=progress
    )
    with bar:
        for key, probes in groups.items():
            battery = key == ("battery",)
            bar.set_postfix_str("probe battery" if battery else _env_id(probes[0]))
            done.update(_group_rows(probes, *configs[key], battery, seeds, seed))
            bar.update(1)
        if invariants:
            bar.set_postfix_str(config.env_name)
            done.update(_invariant_rows(config, seeds, seed))
            bar.update(1)
    ordered = [done[name] for name in row_names() if name in done and name in selected]
    return CheckReport(config.env_name, seeds, seed, ordered, time.perf_counter() - start)


def _group_rows(
    probes: Sequence[Probe],
    probe_cfg: PPOConfig,
    notes: list[str],
    battery: bool,
    seeds: int,
    seed: int,
) -> dict[str, CheckRow]:
    """Trains one program of `check` (the probe battery, or one probe's env) with
    `seeds` seeds and measures each of its probes on its lanes: `{row: CheckRow}`."""
    pad = battery_pad(probe_cfg)
    if battery:
        networks, out = _train_battery(probe_cfg, probes, seeds, seed)
        width = ProbeBattery().obs_shape[0]
    else:
        env_cls = probes[0].env
        pad = pad if env_cls.PADDABLE else 0.0
        env = env_cls(pad=pad) if pad else None
        networks, out = _train(probe_cfg, seeds, seed, env)
        width = 1 if env is None else env.obs_shape[0]
    rows = {}
    for i, probe in enumerate(probes):
        lanes = (i * seeds, (i + 1) * seeds) if battery else (0, seeds)
        trained = Trained(
            networks=networks,
            params=_lanes(out.train_state.params, *lanes),
            metrics={k: np.asarray(v)[lanes[0] : lanes[1]] for k, v in out.metrics.items()},
            config=probe_cfg,
            gamma=probe_cfg.gamma if probe.gamma is None else probe.gamma,
            obs_width=width,
            obs_pad=pad,
        )
        padded = [RELU_PAD] if pad else []
        note = "; ".join([*notes, *padded, *([probe.note] if probe.note else [])])
        rows[probe.row] = _row(probe, probe.measure(trained), note)
    return rows


def _invariant_rows(config: PPOConfig, seeds: int, seed: int) -> dict[str, CheckRow]:
    """The invariants of `INVARIANT_UPDATES` updates of `config` on its own env."""
    run = config.replace(
        total_timesteps=config.num_envs * config.num_steps * INVARIANT_UPDATES,
        anneal_lr=False,
    )
    _, out = _train(run, seeds, seed)
    metrics = {name: np.asarray(value) for name, value in out.metrics.items()}
    params = out.train_state.params
    stats = params.get("obs_norm") if isinstance(params, dict) else None
    rows = {}
    for invariant in INVARIANTS:
        reason = invariant.applies(run)
        if reason is None and invariant.row.endswith("statistics move") and stats is None:
            reason = "the networks keep no observation statistics"
        if reason is not None:
            rows[invariant.row] = _row(invariant, skip=reason)
            continue
        values = np.asarray(invariant.measure(metrics, run, stats), np.float64)
        if invariant.undefined is not None and not np.isfinite(values).any():
            row = _row(invariant, skip=invariant.undefined)
        elif invariant.undefined is not None:  # the seeds where it is defined
            row = _row(invariant, values[np.isfinite(values)])
        else:
            row = _row(invariant, values)
        if invariant.informational:  # shown, never deciding
            row = row._replace(passed=None, informational=True)
        rows[invariant.row] = row
    return rows
