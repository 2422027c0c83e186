"""A video encoded as K segments at once and joined without encoding again (opt-in).

x264's own threads stop scaling at 1080p (on the 32-core GPU host one ffmpeg encoded
~68-78 frames/s with preset faster, however many threads it had), so splitting the
video looked like a way past that: the frames are split into K contiguous segments,
each encoded by its own ffmpeg with the
same codec, CRF and preset (each segment opens with a keyframe), and the segments are
joined by ffmpeg's concat demuxer with stream copy into the final MP4, written under
the video's hidden partial name and renamed into place, as a single encoder's video.
Segment k's frames are coloured and piped to its encoder as soon as they are
complete, by frame threads shared by every segment that colour the lowest frame first:
the segments in turn, so that each encoder gets its frames early, for ``farm encode`` as
during a render.

Timestamps: the concat demuxer shifts each segment by the duration of those before
it, counted in microseconds. A segment of ``n`` frames at ``fps`` lasts a whole
number of microseconds when ``n`` is a multiple of ``fps / gcd(fps, 10^6)`` (3 at 24,
30 or 60 fps, 1 at 25); every segment but the last is cut to such a length, and the
joined video's timestamps are then exactly one encoder's (20-frame segments at 30 fps
moved every later frame by 10/15360 s, measured). The joined video decodes to the
frames one encoder is fed, in order (tests/test_encode.py, lossless at CRF 0).

K (:func:`segment_count`): the environment variable FARM_ENCODE_SEGMENTS, else 1.
Until 2026-11-26 a segment's encoder was closed only when :meth:`SegmentedSink.finish`
reached it, so the encoders flushed x264's lookahead one after another (0.3-0.6 s each
at 1080p): ``farm encode`` took 5.97 s in 4 segments against 3.05 s in one (2026-11-23),
8.6 s in 16 against 4.1 s (2026-11-26). Each segment's sink now closes its encoder once
its frames are written (farm/encode/sink.py). Measured then on a 16-core H200 host, the
heavy 1080p zoom's 120 frames (``FARM_ENCODE_SEGMENTS=K farm encode``, two runs each):
K = 1 3.72-4.20 s, 2 3.49-3.82, 4 3.79-3.81, 8 4.07-4.15, 16 4.57-4.92 (plain ffmpeg
from raw frames, K processes: 3.68, 3.35, 2.99 and, 16, 2.47 s); the whole render with
its video, K = 1 5.17-5.44 s, 4 5.17-5.27, 8 5.01-6.41, 16 5.50-6.57. Within the host's
spread, so one encoder stays the default. Each encoder gets x264's own thread count
(with ``cores / K`` each, 8 segments of 360 1080p frames took 27.6 s against 11.6 s now,
on a 16-core H200 host, 2026-11-25); no segment is shorter than SHORTEST frames.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

from farm.color.methods import Style
from farm.encode import ffmpeg as ff
from farm.encode.ffmpeg import EncodeError, VideoSettings, partial_path
from farm.encode.outputs import VideoOutput
from farm.encode.sink import Colourer, FramePool, FrameSink, video_threads
from farm.errors import UsageError
from farm.progress import Progress

SHORTEST = 3  # frames of a segment at least, whatever FARM_ENCODE_SEGMENTS asks
ENV = "FARM_ENCODE_SEGMENTS"


def frame_quantum(fps: int) -> int:
    """Frames whose duration at ``fps`` is a whole number of microseconds."""
    return fps // math.gcd(fps, 10**6)


def segment_count(frames: int, fps: int) -> int:
    """Segments to encode ``frames`` frames in (see the module's docstring)."""
    wanted = os.environ.get(ENV, "").strip()
    if wanted:
        try:
            count = int(wanted)
        except ValueError:
            raise UsageError(f"{ENV}: {wanted!r} is not a number of segments") from None
        if count < 1:
            raise UsageError(f"{ENV}: {count} must be >= 1")
        return len(boundaries(frames, count, fps)) - 1
    return 1


def boundaries(frames: int, count: int, fps: int) -> list[int]:
    """``[0, b1, ..., frames]``: segment k is frames ``b_k .. b_{k+1} - 1``; every
    segment but the last a multiple of :func:`frame_quantum` frames; none shorter than
    SHORTEST frames (x264 gives a stream of 1 or 2 frames no B-frame delay, and a
    segment joined after one would then overlap it in decoding time; from 3 frames on
    every segment has the same delay, with or without B-frames: measured)."""
    quantum = frame_quantum(fps)
    unit = -(-SHORTEST // quantum) * quantum  # the shortest whole segment
    count = max(1, min(count, frames // unit))
    quanta = frames // quantum  # shared out evenly; the last segment also takes the rest
    return [quanta * k // count * quantum for k in range(count)] + [frames]


def segment_path(video: Path, k: int) -> Path:
    """Where segment k of ``video`` is kept until the join (hidden, beside it)."""
    return video.with_name(f".{video.stem}.seg{k:03d}{video.suffix}")


def _quoted(name: str) -> str:
    """A file name in a concat list: single-quoted, a quote written as '\\''."""
    return "'" + name.replace("'", "'\\''") + "'"


def join(parts: list[Path], video: Path) -> Path:
    """Join the segment files ``parts`` (in order) into ``video`` by stream copy: written
    as its partial file, renamed into place. The parts and the list are removed."""
    listing = video.with_name(f".{video.stem}.segments.txt")
    tmp = partial_path(video)
    try:
        listing.write_text("ffconcat version 1.0\n" + "".join(f"file {_quoted(p.name)}\n" for p in parts))
        cmd = [ff.ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "concat", "-safe", "0",
               "-i", str(listing), "-map", "0", "-c", "copy", "-movflags", "+faststart",
               "-f", "mp4", "-y", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise EncodeError("ffmpeg could not join the video's segments: "
                              + ff.last_line(done.stderr, done.returncode))
        os.replace(tmp, video)
        return video
    finally:
        for path in (listing, tmp, *parts):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


class _SharedBar:
    """One progress bar advanced by every segment's scheduler thread."""

    def __init__(self, bar: Progress):
        self.bar, self.lock = bar, threading.Lock()

    def advance(self, n: int = 1) -> None:
        with self.lock:
            self.bar.advance(n)

    def close(self) -> None:
        pass  # the segmented sink closes the bar itself


class SegmentedSink:
    """The interface of :class:`~farm.encode.sink.FrameSink` (``frame_complete``,
    ``finish``, ``abort`` and the timings) over one FrameSink per segment, each with
    its own encoder; ``finish`` joins their files into ``settings.path``. The sinks
    share one :class:`~farm.encode.sink.FramePool` of ``frame_threads`` threads (default
    one video's, :func:`~farm.encode.sink.video_threads`), which colours the lowest frame
    first: the segments in turn. Each sink asks for half as many of its frames at once."""

    def __init__(self, store_path: str | os.PathLike[str], settings: VideoSettings, size: tuple[int, int],
                 style: Style, smoothing: int, frames: int, count: int, *,
                 colourer: Colourer | None = None, progress: bool = False,
                 frame_threads: int | None = None):
        width, height = size
        ff.even_size(width, height)
        codec = ff.choose_codec(settings.codec, width - width % 2, height - height % 2)
        self.path = Path(settings.path)
        self.cuts = boundaries(frames, count, settings.fps)
        self._bar = Progress(frames, "encode", unit="frames") if progress else None
        shared = _SharedBar(self._bar) if self._bar else None
        self.parts = [segment_path(self.path, k) for k in range(len(self.cuts) - 1)]
        self.sinks: list[FrameSink] = []
        self.pool = FramePool(frame_threads or video_threads())
        try:
            for k, part in enumerate(self.parts):
                # each encoder with x264's own thread count (1.5 a core): with cores / K
                # each, K = 8 took 3.9x plain ffmpeg's time (x264's threads wait on each
                # other; more of them than cores keep the cores busy, as K plain processes do)
                output = VideoOutput(replace(settings, path=part, codec=codec), width, height,
                                     faststart=False)
                self.sinks.append(FrameSink(store_path, output, style, smoothing,
                                            range(self.cuts[k], self.cuts[k + 1]),
                                            colourer=colourer, bar=shared, pool=self.pool,
                                            threads=max(2, self.pool.threads // 2)))
        except BaseException:
            self.abort()
            raise

    @property
    def color_s(self) -> float:
        return sum(s.color_s for s in self.sinks)

    @property
    def write_s(self) -> float:
        return sum(s.write_s for s in self.sinks)

    @property
    def written(self) -> int:
        return sum(s.written for s in self.sinks)

    def frame_complete(self, f: int) -> None:
        for sink in self.sinks:
            sink.frame_complete(f)

    def finish(self) -> Path:
        """Wait for every segment, join them; the video is then in place."""
        try:
            parts = [sink.finish() for sink in self.sinks]
            self.pool.shutdown()
            path = join(parts, self.path)
        except BaseException:
            self.abort()
            raise
        if self._bar:
            self._bar.close()
        return path

    def abort(self) -> None:
        """Stop every segment's encoder; remove the segments and any partial file."""
        for sink in self.sinks:
            sink.abort()
        self.pool.shutdown(cancel_futures=True)
        for path in (*self.parts, partial_path(self.path)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if self._bar:
            self._bar.close()

    def __enter__(self) -> SegmentedSink:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            self.abort()


__all__ = ["SegmentedSink", "boundaries", "frame_quantum", "join", "segment_count", "segment_path"]
