#!/usr/bin/env bash
# Atari reference runs: configs/atari.yaml through `envpool:<id>` for CleanRL's
# ppo_atari table (10M steps: Breakout 414.66 +- 28.09, Pong 20.36 +- 0.20, BeamRider
# 1915.93 +- 484.58), one process per game, each training its seeds vmapped in one program
# on the GPU (the policy and the Nature-CNN updates on the GPU; EnvPool steps the games on
# the host through io_callback, one pool of seeds x 8 envs).
#
#   bash benchmarks/gpu/atari_reference.sh OUT_DIR [TOTAL_TIMESTEPS] [SEEDS] [GAMES...]
#
# Defaults: 10M steps, 3 seeds, Pong-v5 Breakout-v5 BeamRider-v5. The games run one after
# the other (one GPU). On the 2-core CPU an update takes ~2.4 s (benchmarks/atari_cpu.py:
# ~2 h per game for 3M steps); on a GPU the CNN's share should drop to a fraction of that.
# Needs on PYTHONPATH: envpool 1.2.5 with its Atari ROMs, gymnax 1.0.1, distrax,
# tfp-nightly, dm-env, dm-tree, gymnasium, optree (see benchmarks/README.md, "GPU").
# Each game writes OUT_DIR/<game>/reference-gpu-*.{csv,md,png}.
set -uo pipefail
OUT_DIR="$1"; TOTAL="${2:-10000000}"; SEEDS="${3:-3}"; shift 3 || shift $#
GAMES=("$@"); [[ ${#GAMES[@]} -gt 0 ]] || GAMES=(Pong-v5 Breakout-v5 BeamRider-v5)
export PYTHONUNBUFFERED=1
rc=0
for game in "${GAMES[@]}"; do
  mkdir -p "$OUT_DIR/$game"
  "${PYTHON:-python3}" -m benchmarks.reference --config configs/atari.yaml --env "$game" \
    --seeds "$SEEDS" --total-timesteps "$TOTAL" --device gpu --out "$OUT_DIR/$game" \
    --note "one GPU; EnvPool on the host" > "$OUT_DIR/$game/log.txt" 2>&1 || rc=1
done
exit $rc
