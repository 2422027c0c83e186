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
import struct
import threading
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Protocol

import numpy as np

from farm.color.yuv import I420
from farm.encode.ffmpeg import VideoEncoder, VideoSettings, even_size

PNG_LEVEL = 1  # zlib level: 1 is several times faster than Pillow's 6, files ~10% larger
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Output(Protocol):
    ordered: bool

    def prepare(self) -> None: ...
    def write(self, f: int, rgb: np.ndarray) -> None: ...
    def close(self) -> Path: ...
    def abort(self) -> None: ...


def _chunk(kind: bytes, data: bytes | memoryview) -> list[bytes | memoryview]:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return [struct.pack(">I", len(data)), kind, data, struct.pack(">I", crc)]


def png_bytes(rgb: np.ndarray, level: int = PNG_LEVEL) -> list[bytes | memoryview]:
    """The PNG file (8-bit RGB, not interlaced) of uint8 (H, W, 3) ``rgb``, as the pieces
    to write. Every row has PNG's "Up" filter (the byte minus the byte above, mod 256),
    made by numpy; the deflate stream by zlib, which lets go of the interpreter lock
    while it compresses, so frame threads compress in parallel (Pillow's encoder held
    it: 160 ms of one core per 1080p frame at level 1 here, against 90 ms for zlib on
    the filtered rows, files the same size)."""
    h, w, _ = rgb.shape
    rows = np.ascontiguousarray(rgb).reshape(h, w * 3)
    filtered = np.empty((h, w * 3 + 1), np.uint8)
    filtered[:, 0] = 2  # filter type Up (the first row's "above" is zeros)
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8 bits, RGB, deflate, filter 0, no interlace
    return [PNG_SIGNATURE, *_chunk(b"IHDR", header), *_chunk(b"IDAT", zlib.compress(filtered.data, level)),
            *_chunk(b"IEND", b"")]


def save_png(rgb: np.ndarray, path: Path) -> None:
    """Write ``path`` atomically (a hidden temporary file renamed into place)."""
    tmp = path.with_name(f".{path.name}.partial")
    try:
        with open(tmp, "wb") as fh:
            fh.writelines(png_bytes(rgb))
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def png_name(f: int) -> str:
    return f"frame_{f:05d}.png"


class VideoOutput:
    """The video. :meth:`prepare` starts ffmpeg on a thread of its own (finding the
    binary, choosing the codec and starting it took 20-30 ms on the 2-core machine),
    so that the first frames are read and coloured meanwhile; :meth:`write` waits for
    it. A failure to start is raised by the next write or close."""

    ordered = True

    def __init__(self, settings: VideoSettings, width: int, height: int, *,
                 threads: int | None = None, faststart: bool = True, ts_offset: Fraction | None = None):
        even_size(width, height)  # a 1-pixel-wide video is an error now, not later
        self.settings, self.size = settings, (width, height)
        self.threads, self.faststart, self.ts_offset = threads, faststart, ts_offset
        self.i420 = False
        self.encoder: VideoEncoder | None = None
        self._lock = threading.Lock()
        self._failed: BaseException | None = None
        self._starting: threading.Thread | None = None

    def _start(self) -> VideoEncoder:
        with self._lock:
            if self._failed is not None:
                raise self._failed
            if self.encoder is None:
                try:
                    self.encoder = VideoEncoder(self.settings, *self.size, threads=self.threads,
                                                faststart=self.faststart, ts_offset=self.ts_offset,
                                                i420=self.i420)
                except BaseException as err:
                    self._failed = err
                    raise
            return self.encoder

    def _start_beside(self) -> None:
        with contextlib.suppress(BaseException):  # kept in self._failed for write and close
            self._start()

    def take_i420(self) -> None:
        """Frames will come as the video's planes (farm/color/yuv.py); before prepare."""
        assert self._starting is None and self.encoder is None
        self.i420 = True

    def prepare(self) -> None:
        if self._starting is None:
            self._starting = threading.Thread(target=self._start_beside, name="farm-ffmpeg-start",
                                              daemon=True)
            self._starting.start()

    def write(self, f: int, rgb: np.ndarray | I420) -> None:
        self._start().write(rgb)

    def close(self) -> Path:
        return self._start().close()

    def abort(self) -> None:
        if self._starting is not None:
            self._starting.join()  # an encoder being started is stopped too
        if self.encoder is not None:
            self.encoder.abort()


class PngOutput:
    """``DIR/frame_NNNNN.png`` for each frame written."""

    ordered = False

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def prepare(self) -> None:
        pass

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

    def prepare(self) -> None:
        pass

    def write(self, f: int, rgb: np.ndarray) -> None:
        save_png(rgb, self.path)

    def close(self) -> Path:
        return self.path

    def abort(self) -> None:
        pass
