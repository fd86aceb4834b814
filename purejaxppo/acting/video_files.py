"""Video files: the output path checked before an episode runs, frames written as `.gif`
(Pillow) or `.mp4` (imageio-ffmpeg, the `video` extra), and a strip of frames for a
README image. `acting.video` records and renders the episodes these write."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

Frame = np.ndarray  # [H, W, 3] uint8


def check_video_path(path: str | Path, overwrite: bool = False) -> Path:
    """The output path, checked before anything runs.

    Raises:
      ValueError: for a suffix other than .gif / .mp4, or an existing file without
        `overwrite`.
      ImportError: for .mp4 without the `video` extra.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"video {path}: the file must end in .gif or .mp4")
    if path.exists() and not overwrite:
        raise ValueError(f"video {path}: the file exists (not overwritten)")
    if suffix == ".mp4":
        from purejaxppo.sinks import require

        require("imageio", "video")
        require("imageio_ffmpeg", "video")
    return path


def write_video(frames: Sequence[Frame], path: str | Path, fps: int = 30) -> Path:
    """Writes frames `[H, W, 3]` uint8 as `.gif` (Pillow; one GIF frame per frame) or
    `.mp4` (imageio-ffmpeg, the `video` extra). Returns the path."""
    path = Path(path)
    if not frames:
        raise ValueError(f"video {path}: no frames")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        from PIL import Image

        images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
        images[0].save(
            path,
            save_all=True,
            append_images=images[1:],
            duration=max(1, round(1000 / fps)),
            loop=0,
            optimize=False,
        )
        return path
    from purejaxppo.sinks import require

    imageio = require("imageio", "video")
    require("imageio_ffmpeg", "video")
    # Even sizes for H.264's 4:2:0 sampling.
    height, width = (s - s % 2 for s in np.asarray(frames[0]).shape[:2])
    with imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=1) as writer:
        for frame in frames:
            writer.append_data(np.asarray(frame, np.uint8)[:height, :width])
    return path


def frame_strip(frames: Sequence[Frame], count: int = 6, gap: int = 4) -> Frame:
    """`count` frames evenly spaced over the episode, side by side (a README image)."""
    picks = np.linspace(0, len(frames) - 1, min(count, len(frames))).round().astype(int)
    chosen = [np.asarray(frames[i]) for i in picks]
    height = max(f.shape[0] for f in chosen)
    pad = np.full((height, gap, 3), 255, np.uint8)
    parts = []
    for frame in chosen:
        parts += [frame, pad]
    return np.concatenate(parts[:-1], axis=1)
