"""`purejaxppo eval | collect | export`: the commands that use a trained run's policy."""

from __future__ import annotations

import argparse
from typing import Any


def eval_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo eval RUN_DIR`: episodes of a run's policy; mean, std, IQM."""
    import jax

    from purejaxppo.guards import check_finite_params
    from purejaxppo.policy import Policy, evaluate

    try:
        policy = Policy.load(args["run_dir"])
        check_finite_params(policy.get_params(), f"run {args['run_dir']}")
        if args["video"] is not None:  # check before anything runs
            from purejaxppo.video import check_video_path, make_renderer

            check_video_path(args["video"])
            make_renderer(policy.env, policy.env_params)
        result = evaluate(
            policy,
            args["env_name"],
            args["episodes"],
            jax.random.key(args["seed"]),
            greedy=args["greedy"],
        )
        if args["video"] is not None:
            from purejaxppo.video import save_episode_video

            _, episode = save_episode_video(
                policy, args["video"], jax.random.key(args["seed"]), greedy=args["greedy"]
            )
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    stats = result.summary()
    env_name = args["env_name"] or policy.config.env_name
    print(
        f"{env_name}: {args['episodes']} episodes ({'greedy' if args['greedy'] else 'sampled'})"
        f"  mean {stats['mean']:.2f}  std {stats['std']:.2f}  IQM {stats['iqm']:.2f}"
        f"  mean length {result.lengths.mean():.1f}"
    )
    if args["video"] is not None:
        print(
            f"wrote {args['video']} ({episode.length} frames, return {episode.episode_return:.2f})"
        )
    return 0


def collect_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo collect RUN_DIR`: a run's episodes as a dataset."""
    import jax

    from purejaxppo.datasets import check_output, collect
    from purejaxppo.policy import Policy

    info_keys = [k.strip() for k in args["info_keys"].split(",") if k.strip()]
    try:
        check_output(args["out"], args["minari_id"], args["episodes"])
        policy = Policy.load(args["run_dir"])
        result = collect(
            policy,
            args["episodes"],
            args["out"],
            jax.random.key(args["seed"]),
            greedy=args["greedy"],
            minari_id=args["minari_id"],
            info_keys=info_keys,
        )
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    print(
        f"wrote {result.num_episodes} episodes ({result.num_steps} steps, mean return "
        f"{result.returns.mean():.2f}) to {result.out}"
        + (f" and Minari dataset {result.minari_id}" if result.minari_id else "")
    )
    return 0


def export_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo export RUN_DIR --to FILE`: PyTorch or ONNX files."""
    from purejaxppo.checkpoint import load_checkpoint
    from purejaxppo.export import export_onnx, export_torch
    from purejaxppo.guards import check_finite_params

    onnx = args["to"].suffix == ".onnx"
    try:
        checkpoint = load_checkpoint(args["run_dir"])
        check_finite_params(checkpoint.runner_state.train_state.params, f"run {args['run_dir']}")
        export = export_onnx if onnx else export_torch
        path = export(
            checkpoint.runner_state,
            checkpoint.config,
            args["to"],
            overwrite=args["overwrite"],
        )
    except (ValueError, ImportError, FileExistsError) as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    if onnx:
        print(f"wrote {path} (ONNX) and {path.name}.json")
    else:
        print(f"wrote {path.with_suffix('.module.py')}, .state_dict.pt, .pt2, .json "
              "(and the TorchScript file where it scripts)")  # fmt: skip
    return 0
