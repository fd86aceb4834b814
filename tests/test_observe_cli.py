"""#13 from the command line: --logger, video_freq / collect_freq during training,
`purejaxppo eval RUN --video`, `purejaxppo collect RUN`, and their errors."""

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from purejaxppo.cli import main

TINY = [
    "--total-timesteps",
    "256",
    "--num-envs",
    "4",
    "--num-steps",
    "16",
    "--num-minibatches",
    "2",
    "--update-epochs",
    "1",
    "--hidden-sizes",
    "16",
    "--log-freq",
    "4",
    "--no-progress",
]  # fmt: skip  (4 updates)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    import tensorboardX  # noqa: F401  (the test extra installs it)

    run_dir = tmp_path_factory.mktemp("observe") / "run"
    code = main(
        ["train", *TINY, "--run-dir", str(run_dir), "--logger", "tensorboard",
         "--logger", "jsonl", "--video-freq", "2", "--collect-freq", "4",
         "--collect-episodes", "2", "--action-histogram", "true"]
    )  # fmt: skip
    assert code == 0
    return run_dir


def test_train_logs_videos_and_datasets(run_dir):
    from tbparse import SummaryReader

    table = pd.read_csv(run_dir / "metrics.csv")
    assert list(table["update"]) == [1, 2, 3, 4]
    assert {"action_frac/0", "action_frac/1", "value_mean"} <= set(table.columns)
    scalars = SummaryReader(str(run_dir / "tensorboard")).scalars
    for name in ("episode_return", "action_frac/1", "value_mean", "grad_norm"):
        logged = scalars[scalars["tag"] == name].sort_values("step")
        rows = table[~table[name].isna()]
        assert list(logged["step"]) == list(rows["env_steps"].astype(int)), name
        np.testing.assert_allclose(logged["value"], rows[name], rtol=1e-6)
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["config"]["video_freq"] == 2
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == len(table)
    videos = [r["env_steps"] for r in map(json.loads, lines) if r.get("video") == "video"]
    assert videos == [128, 256]  # updates 2 and 4 of 64 env steps
    for update in (2, 4):
        with Image.open(run_dir / "videos" / f"update_{update:06d}.gif") as gif:
            assert gif.n_frames >= 8  # CartPole lasts at least ~8 steps
    data = np.load(run_dir / "datasets" / "update_000004" / "episodes_00000.npz")
    assert len(data["episode_ids"]) == 2


def test_eval_video_and_collect(run_dir, tmp_path, capsys):
    gif = tmp_path / "episode.gif"
    assert main(["eval", str(run_dir), "--episodes", "3", "--greedy", "--video", str(gif)]) == 0
    out = capsys.readouterr().out
    frames = int(out.split("(")[-1].split(" frames")[0])
    with Image.open(gif) as image:
        assert image.n_frames == frames
    assert "episode 1 of the 3 above" in out
    eval_mean = float(out.split("mean ")[1].split()[0])
    # The video is an evaluated episode: with one episode, its return is the mean.
    for greedy in ([], ["--greedy"]):
        one = tmp_path / f"one{len(greedy)}.gif"
        assert main(["eval", str(run_dir), "--episodes", "1", "--video", str(one), *greedy]) == 0
        out = capsys.readouterr().out
        video_return = out.split("return ")[-1].split(")")[0]
        assert video_return == out.split("mean ")[1].split()[0]
    data = tmp_path / "data"
    argv = ["collect", str(run_dir), "--episodes", "3", "--greedy", "--out", str(data)]
    assert main(argv) == 0
    # The same 3 greedy episodes (seed 0) as the eval command played.
    got = np.load(data / "episodes_00000.npz")
    assert len(got["episode_ids"]) == 3
    assert float(np.mean(got["episode_return"])) == pytest.approx(eval_mean, abs=0.005)
    assert got["obs"].shape == (int(got["episode_length"].sum()), 4)


def test_bad_input_is_a_clear_error_and_overwrites_nothing(run_dir, tmp_path, capsys):
    def fails(argv, match):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert match in capsys.readouterr().err

    fails(["train", *TINY, "--run-dir", str(tmp_path / "a"), "--logger", "tensorbord"],
          "did you mean tensorboard")  # fmt: skip
    fails(["train", *TINY, "--run-dir", str(tmp_path / "b"), "--env-name", "Acrobot-v1",
           "--video-freq", "2"], "no renderer for Acrobot-v1")  # fmt: skip
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    existing = tmp_path / "existing.gif"
    existing.write_bytes(b"keep")
    fails(["eval", str(run_dir), "--episodes", "1", "--video", str(existing)], "exists")
    assert existing.read_bytes() == b"keep"
    fails(["collect", str(run_dir), "--episodes", "0", "--out", str(tmp_path / "d")],
          "num_episodes=0")  # fmt: skip
    assert not (tmp_path / "d").exists()
    fails(["collect", str(run_dir), "--episodes", "2", "--out", str(run_dir)], "exists")
    assert (run_dir / "metrics.csv").exists()
