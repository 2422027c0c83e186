"""The video encoder: RGB frames piped into an ffmpeg process, H.264 in MP4.

The video is ``yuv420p`` H.264 in MP4 (plays everywhere); yuv420p needs even
dimensions, so an odd width or height loses its last column or row. ffmpeg is the one
on ``PATH``, else the binary that the ``imageio-ffmpeg`` wheel carries
(:func:`farm.runtime.media.ffmpeg_binary`, which this module hands on, with
:func:`~farm.runtime.media.last_line`).

Codec (``output.codec``): ``libx264`` at ``output.crf`` with ``output.preset`` and
one thread per core (x264's own choice), or ``h264_nvenc`` (NVIDIA's encoder, constant
quality ``-cq output.crf``). ``auto`` takes h264_nvenc when an NVIDIA driver is present
(``/dev/nvidiactl``) and a one-frame test encode with it succeeds, else libx264, and
says why when it falls back.

The encoder writes to a hidden temporary file next to the video
(``.NAME.partial.mp4``) and renames it into place only when ffmpeg has finished
successfully; :meth:`VideoEncoder.abort` (an interrupt, an error) kills ffmpeg and
removes the temporary file, so a video under its final name is always complete.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from farm.color.yuv import I420, even, from_rgb
from farm.compute.nodes import nvidia_present
from farm.errors import FarmError, UsageError
from farm.runtime import pipes
from farm.runtime.media import _wheel_ffmpeg as _wheel_ffmpeg  # handed on: tests clear its cache here
from farm.runtime.media import ffmpeg_binary, last_line


class EncodeError(FarmError):
    """ffmpeg failed: its last line of error output is in the message."""


@dataclass(frozen=True)
class VideoSettings:
    """Where and how a video is written (the ``[output]`` keys and ``animation.fps``)."""

    path: Path
    fps: int = 30
    crf: int = 18
    preset: str = "faster"  # libx264 preset
    codec: str = "auto"  # auto | libx264 | h264_nvenc
    audio: str | None = None  # a soundtrack muxed in at the end (farm/encode/audio.py)

    @classmethod
    def from_spec(cls, spec, path: str | os.PathLike[str] | None = None, fps: int | None = None,
                  crf: int | None = None) -> VideoSettings:
        out = spec.output
        return cls(Path(path or out.video), fps or spec.animation.fps,
                   out.crf if crf is None else crf, out.preset, out.codec, out.audio)


def partial_path(video: Path) -> Path:
    """The hidden temporary name a video is written under."""
    return video.with_name(f".{video.stem}.partial{video.suffix}")


def codec_args(codec: str, crf: int, preset: str) -> list[str]:
    if codec == "h264_nvenc":
        # constant quality: -cq plays the part of x264's CRF (similar, not equal, scales)
        return ["-c:v", "h264_nvenc", "-preset", "p4", "-tune", "hq", "-rc", "vbr",
                "-cq", str(max(crf, 1)), "-b:v", "0"]
    return ["-c:v", "libx264", "-preset", preset, "-crf", str(crf)]


def codec_problem(stderr: str, codec: str, returncode: int | None) -> str:
    """Why ffmpeg could not open ``codec``: the first line the encoder itself printed,
    without its ``[h264_nvenc @ 0x...]`` prefix (NVENC on a GPU without it, or with too
    old a driver, says so first and ffmpeg's own lines that follow say only that nothing
    was written), else :func:`last_line`."""
    for line in stderr.splitlines():
        head, sep, rest = line.partition("] ")
        if sep and head.startswith(f"[{codec} @") and rest.strip():
            return rest.strip()
    return last_line(stderr, returncode)


def try_codec(codec: str, width: int, height: int) -> str | None:
    """None if ``codec`` encodes one test frame of this size, else why not
    (:func:`codec_problem`)."""
    cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "lavfi",
           "-i", f"color=c=black:s={width}x{height}:r=1", "-frames:v", "1",
           *codec_args(codec, 23, "ultrafast"), "-pix_fmt", "yuv420p", "-f", "null", "-"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    return None if done.returncode == 0 else codec_problem(done.stderr, codec, done.returncode)


@functools.cache
def _listing(option: str) -> str:
    """What this ffmpeg prints for a listing ``option`` (``-encoders``, ``-bsfs``); empty
    when it cannot be run."""
    try:
        return subprocess.run([ffmpeg_binary(), "-hide_banner", option], capture_output=True,
                              text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def has_encoder(name: str) -> bool:
    """This ffmpeg was built with the encoder ``name`` (its ``-encoders`` list)."""
    return any(line.split()[1:2] == [name] for line in _listing("-encoders").splitlines() if line.strip())


def has_bitstream_filter(name: str) -> bool:
    """This ffmpeg has the bitstream filter ``name`` (its ``-bsfs`` list; a segmented
    video's join needs ``filter_units``, ffmpeg 4.0 and later)."""
    return name in (line.strip() for line in _listing("-bsfs").splitlines())


def choose_codec(codec: str, width: int, height: int) -> str:
    """The codec to use: ``auto`` tries h264_nvenc where an NVIDIA driver is present and
    this ffmpeg has the encoder (imageio-ffmpeg's static build has not)."""
    if codec != "auto":
        return codec
    if nvidia_present() and has_encoder("h264_nvenc"):
        problem = try_codec("h264_nvenc", width, height)
        if problem is None:
            return "h264_nvenc"
        print(f"farm: h264_nvenc does not work here ({problem}); encoding with libx264 "
              f"(output.codec = \"libx264\" skips this test)", file=sys.stderr)
    return "libx264"


# What the video's planes are (farm/color/yuv.py, and swscale's default for RGB frames:
# BT.601's matrix at limited range), said in the stream (H.264's VUI) so that players
# decode them with that matrix: untagged, many players guess by size and take HD video
# for BT.709 (mpv does), which shifts greens and oranges. Given before the input too
# when the frames come as planes, so that ffmpeg takes them as tagged and puts no scale
# filter between them and the encoder (ffmpeg 9 otherwise does). Primaries and
# transfer stay unsaid, as before.
COLOUR_TAGS = ("-colorspace", "smpte170m", "-color_range", "tv")


def even_size(width: int, height: int) -> tuple[int, int]:
    """The video's size (:func:`farm.color.yuv.even`); UsageError below 2x2."""
    ew, eh = even(width, height)
    if ew == 0 or eh == 0:
        raise UsageError(f"image.size {width}x{height}: a video needs at least 2x2 pixels")
    return ew, eh


class VideoEncoder:
    """One ffmpeg process: ``write`` RGB frames in order, then ``close`` (or ``abort``).
    ``threads``: the encoder's threads (None: x264's choice, 1.5 per core);
    ``faststart``: the index at the front of the file (a video to play; a segment to
    join later needs none). ``ts_offset``: write MPEG-TS instead of MP4, its timestamps
    ``ts_offset`` seconds on (a segment of a longer video, farm/encode/segments.py: such
    streams join by concatenating their bytes).

    ``i420``: frames come as the video's planes (:class:`farm.color.yuv.I420`), which
    ffmpeg takes as they are; else as RGB bytes, which it converts (swscale's default,
    the same matrix). Either way :meth:`write` takes both kinds, and the stream says
    which matrix and range its planes have (COLOUR_TAGS).

    Not thread-safe: one thread writes."""

    def __init__(self, settings: VideoSettings, width: int, height: int, *,
                 threads: int | None = None, faststart: bool = True, ts_offset: Fraction | None = None,
                 i420: bool = False):
        self.settings = settings
        self.width, self.height = even_size(width, height)
        self.codec = choose_codec(settings.codec, self.width, self.height)
        self.path = Path(settings.path)
        self.tmp = partial_path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.i420 = i420
        cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", *(COLOUR_TAGS if i420 else ()),
               "-f", "rawvideo", "-pix_fmt", "yuv420p" if i420 else "rgb24",
               "-s", f"{self.width}x{self.height}", "-framerate", str(settings.fps), "-i", "pipe:",
               *codec_args(self.codec, settings.crf, settings.preset),
               *(["-threads", str(threads)] if threads else []),
               "-pix_fmt", "yuv420p", *COLOUR_TAGS, *self._container(faststart, ts_offset),
               "-y", str(self.tmp)]
        # its own process group: a Ctrl-C reaches the farm, which stops ffmpeg itself
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                     process_group=0)
        pipes.widen(self.proc.stdin)  # a frame in a few writes, not one every 64 kB
        self._errors: list[bytes] = []
        self._drain = threading.Thread(target=self._read_errors, daemon=True)
        self._drain.start()  # ffmpeg blocks if nobody reads its stderr
        self.frames = 0

    @staticmethod
    def _container(faststart: bool, ts_offset: Fraction | None) -> list[str]:
        if ts_offset is None:
            return [*(["-movflags", "+faststart"] if faststart else []), "-f", "mp4"]
        # timestamps as they are (the B-frames' negative decoding times included: the
        # muxer's own delay keeps them positive), moved on by the segment's start
        us = ts_offset * 10**6
        if us.denominator != 1:
            raise ValueError(f"a segment must start on a whole microsecond, not at {ts_offset} s")
        return ["-avoid_negative_ts", "disabled", "-output_ts_offset",
                f"{us.numerator // 10**6}.{us.numerator % 10**6:06d}", "-f", "mpegts"]

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self._errors.append(self.proc.stderr.read())

    def _failure(self) -> EncodeError:
        self._drain.join(timeout=5)
        text = b"".join(self._errors).decode(errors="replace")
        return EncodeError(f"ffmpeg ({self.codec}) failed: {last_line(text, self.proc.returncode)}")

    def write(self, frame: np.ndarray | I420) -> None:
        """Append one frame: uint8 (H, W, 3) at the image size (cropped to even), or
        its planes at the video's size."""
        assert self.proc.stdin is not None
        if isinstance(frame, I420):
            if not self.i420 or (frame.width, frame.height) != (self.width, self.height):
                raise ValueError(f"a {frame.width}x{frame.height} I420 frame for a "
                                 f"{'yuv420p' if self.i420 else 'rgb24'} {self.width}x{self.height} encoder")
            data = frame.data
        elif self.i420:
            data = from_rgb(frame[:self.height, :self.width]).data
        else:
            data = np.ascontiguousarray(frame[:self.height, :self.width])
        try:
            self.proc.stdin.write(data.data)
        except (BrokenPipeError, ValueError):
            self.proc.wait()
            self._remove()
            raise self._failure() from None
        self.frames += 1

    def close(self) -> Path:
        """Wait for ffmpeg, then rename the finished video into place."""
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        self.proc.wait()
        self._drain.join()
        if self.proc.returncode != 0:
            self._remove()
            raise self._failure()
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Stop ffmpeg and remove the partial file."""
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        self.proc.wait()
        self._remove()

    def _remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()
