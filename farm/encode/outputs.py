"""Where coloured frames go: a video, PNG files, or one PNG for a still.

Every output writes under temporary names and puts files in place only when they are
complete: a video at :meth:`close` (``.NAME.partial.mp4`` renamed), each PNG as soon
as it is written (``.frame_00012.png.partial`` renamed). :meth:`abort` removes what is
not complete.

``ordered`` outputs (the video) take frames in order on one thread; the others take
them on any thread in any order (PNG compression then runs on every core).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Protocol

import numpy as np

from farm.encode.ffmpeg import VideoEncoder, VideoSettings, even_size

PNG_LEVEL = 1  # zlib level: 1 is several times faster than Pillow's 6, files ~10% larger


class Output(Protocol):
    ordered: bool

    def write(self, f: int, rgb: np.ndarray) -> None: ...
    def close(self) -> Path: ...
    def abort(self) -> None: ...


def save_png(rgb: np.ndarray, path: Path) -> None:
    """Write ``path`` atomically (a hidden temporary file renamed into place)."""
    from PIL import Image

    tmp = path.with_name(f".{path.name}.partial")
    try:
        Image.fromarray(rgb).save(tmp, format="PNG", compress_level=PNG_LEVEL)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def png_name(f: int) -> str:
    return f"frame_{f:05d}.png"


class VideoOutput:
    """The video; ffmpeg starts with the first frame (on the sink's thread, so a render
    does not wait for the codec choice and ffmpeg's start)."""

    ordered = True

    def __init__(self, settings: VideoSettings, width: int, height: int):
        even_size(width, height)  # a 1-pixel-wide video is an error now, not later
        self.settings, self.size = settings, (width, height)
        self.encoder: VideoEncoder | None = None

    def write(self, f: int, rgb: np.ndarray) -> None:
        if self.encoder is None:
            self.encoder = VideoEncoder(self.settings, *self.size)
        self.encoder.write(rgb)

    def close(self) -> Path:
        if self.encoder is None:
            self.encoder = VideoEncoder(self.settings, *self.size)
        return self.encoder.close()

    def abort(self) -> None:
        if self.encoder is not None:
            self.encoder.abort()


class PngOutput:
    """``DIR/frame_NNNNN.png`` for each frame written."""

    ordered = False

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, f: int, rgb: np.ndarray) -> None:
        save_png(rgb, self.directory / png_name(f))

    def close(self) -> Path:
        return self.directory

    def abort(self) -> None:
        pass  # every PNG in place is complete; partial ones were removed


class StillOutput:
    """The one frame of a still job as a PNG (``output.video`` with ``.png``)."""

    ordered = False

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, f: int, rgb: np.ndarray) -> None:
        save_png(rgb, self.path)

    def close(self) -> Path:
        return self.path

    def abort(self) -> None:
        pass
