"""A video encoded as K segments at once and joined without encoding again.

x264's own threads stop scaling at 1080p (on the 32-core GPU host one ffmpeg encoded
~68-78 frames/s with preset faster, however many threads it had), so splitting the
video looked like a way past that: the frames are split into K contiguous segments,
each encoded by its own ffmpeg with the
same codec, CRF and preset (each segment opens with a keyframe), each written as an
MPEG-TS stream whose timestamps start where the segment starts in the video; the
streams, concatenated, are remuxed by stream copy into the final MP4, written under the
video's hidden partial name and renamed into place, as a single encoder's video.
Segment k's frames are coloured and piped to its encoder as soon as they are
complete, by frame threads shared by every segment that colour the lowest frame first:
the segments in turn, so that each encoder gets its frames early, for ``farm encode`` as
during a render.

Timestamps: a segment's start is given to its muxer in microseconds and kept in MPEG-
TS's 90 kHz clock, so every segment but the last is cut to a whole number of both: ``n``
frames at ``fps``, ``n`` a multiple of :func:`frame_quantum` (3 at 24, 30 or 60 fps, 1
at 25). The MP4 gets the time scale a single encoder's MP4 has (``fps`` doubled up to at
least 10000: 15360 at 30 fps), and the access unit delimiters MPEG-TS adds are dropped
(packets as large as the concat demuxer's join gave, measured): the joined video's
timestamps are exactly one encoder's, and it decodes to the frames one encoder is fed,
in order (tests/test_encode.py, lossless at CRF 0). Until 2026-11-26 the segments were
MP4 files joined by ffmpeg's concat demuxer, which opens and probes each one, decoding
its first frames: 0.6-0.7 s for 8 segments of the heavy 1080p zoom, 1.2-1.8 s for 16 of
the minibrot zoom on 16-core H200 hosts (0.37 s for 8 on the 2-core machine), where
remuxing the same bytes from one stream takes a fraction of that (BENCHMARKS.md,
fourteenth session).

K (:func:`segment_count`): the environment variable FARM_ENCODE_SEGMENTS, else
DEFAULT_SEGMENTS on a machine of at least MANY_CORES cores, else 1. Since the segments
are coloured in turn (:class:`~farm.encode.sink.FramePool`) and joined as they finish
(:class:`Joiner`), 16 segments beat one on a 16-core H200 host, alternated: the heavy
1080p zoom's whole render with video 3.94-4.53 s against 4.58-4.96 s (four rounds, 16
ahead in each), `farm encode` of the 360-frame minibrot zoom 7.60-8.21 s against
8.20-8.77 s (three rounds); 8 segments between the two (BENCHMARKS.md, fourteenth
session). Smaller machines keep one encoder: measured on 16 cores only, and on the
2-core machine segments cost more than they give (each is an ffmpeg of its own).
Until 2026-11-26 a segment's encoder was closed only when :meth:`SegmentedSink.finish`
reached it, so the encoders flushed x264's lookahead one after another (0.3-0.6 s each
at 1080p): ``farm encode`` took 5.97 s in 4 segments against 3.05 s in one (2026-11-23),
8.6 s in 16 against 4.1 s (2026-11-26). Each segment's sink now closes its encoder once
its frames are written (farm/encode/sink.py). Measured then on a 16-core H200 host, the
heavy 1080p zoom's 120 frames (``FARM_ENCODE_SEGMENTS=K farm encode``, two runs each):
K = 1 3.72-4.20 s, 2 3.49-3.82, 4 3.79-3.81, 8 4.07-4.15, 16 4.57-4.92 (plain ffmpeg
from raw frames, K processes: 3.68, 3.35, 2.99 and, 16, 2.47 s); the whole render with
its video, K = 1 5.17-5.44 s, 4 5.17-5.27, 8 5.01-6.41, 16 5.50-6.57. Within the host's
spread, so one encoder stayed the default then. Each encoder gets x264's own thread count
(with ``cores / K`` each, 8 segments of 360 1080p frames took 27.6 s against 11.6 s now,
on a 16-core H200 host, 2026-11-25); no segment is shorter than SHORTEST frames.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from farm.color.methods import Style
from farm.encode import ffmpeg as ff
from farm.encode.ffmpeg import EncodeError, VideoSettings, partial_path
from farm.encode.outputs import VideoOutput
from farm.encode.sink import Colourer, FramePool, FrameSink, video_threads
from farm.errors import UsageError
from farm.runtime import pipes
from farm.runtime.cores import usable_cores
from farm.runtime.progress import Progress

SHORTEST = 3  # frames of a segment at least, whatever FARM_ENCODE_SEGMENTS asks
TS_CLOCK = 90000  # MPEG-TS timestamps: ticks a second
MANY_CORES = 16  # cores from which a video is encoded in DEFAULT_SEGMENTS segments
DEFAULT_SEGMENTS = 16
ENV = "FARM_ENCODE_SEGMENTS"
JOIN_FILTER = "filter_units"  # the join drops MPEG-TS's access unit delimiters with it


def frame_quantum(fps: int) -> int:
    """Frames whose duration at ``fps`` is a whole number of microseconds and of MPEG-TS
    clock ticks (1/90000 s)."""
    return math.lcm(fps // math.gcd(fps, 10**6), fps // math.gcd(fps, TS_CLOCK))


def mp4_timescale(fps: int) -> int:
    """The time scale of a video track that ffmpeg's MP4 muxer gives a stream of ``fps``
    frames a second (doubled until at least 10000): the single encoder's, kept by the
    join."""
    scale = fps
    while scale < 10000:
        scale *= 2
    return scale


def segment_count(frames: int, fps: int, expmap: bool = False) -> int:
    """Segments to encode ``frames`` frames in (see the module's docstring); a video
    synthesised from an ``expmap`` store's strips keeps one encoder unless asked (each
    segment's sink keeps its own window of strip rows: not measured in 16), and so does
    an ffmpeg too old to join segments (no ``filter_units``: before 4.0), rather than
    fail at the join after every frame is encoded."""
    wanted = os.environ.get(ENV, "").strip()
    if wanted:
        try:
            count = int(wanted)
        except ValueError:
            raise UsageError(f"{ENV}: {wanted!r} is not a number of segments") from None
        if count < 1:
            raise UsageError(f"{ENV}: {count} must be >= 1")
        count = len(boundaries(frames, count, fps)) - 1
        if count > 1 and not ff.has_bitstream_filter(JOIN_FILTER):
            raise UsageError(f"{ENV}: {ff.ffmpeg_binary()} cannot join segments (it has no "
                             f"{JOIN_FILTER} bitstream filter: ffmpeg 4.0 or later has); set it to 1")
        return count
    if usable_cores() >= MANY_CORES and not expmap and ff.has_bitstream_filter(JOIN_FILTER):
        return len(boundaries(frames, DEFAULT_SEGMENTS, fps)) - 1
    return 1


def boundaries(frames: int, count: int, fps: int, weights: Sequence[float] | np.ndarray | None = None,
               capacity: Sequence[float] | None = None) -> list[int]:
    """``[0, b1, ..., frames]``: segment k is frames ``b_k .. b_{k+1} - 1``; every
    segment but the last a multiple of :func:`frame_quantum` frames; none shorter than
    SHORTEST frames (x264 gives a stream of 1 or 2 frames no B-frame delay, and a
    segment joined after one would then overlap it in decoding time; from 3 frames on
    every segment has the same delay, with or without B-frames: measured). With
    ``weights`` (one a frame: what a frame costs, e.g. its stored bytes), the segments
    get about equal sums of them instead of equal frame counts; with ``capacity`` (one
    a segment: the cores of the rank that encodes it), sums in those proportions."""
    quantum = frame_quantum(fps)
    unit = -(-SHORTEST // quantum) * quantum  # the shortest whole segment
    count = max(1, min(count, frames // unit))
    if (weights is None and capacity is None) or count == 1:
        quanta = frames // quantum  # shared out evenly; the last segment also takes the rest
        return [quanta * k // count * quantum for k in range(count)] + [frames]
    cum = np.cumsum(np.maximum(np.asarray(np.ones(frames) if weights is None else weights,
                                          np.float64), 0.0) + 1e-9)
    parts = np.asarray(capacity[:count] if capacity is not None else np.ones(count), np.float64)
    share = np.cumsum(parts) / parts.sum()
    cuts = [0]
    for k in range(1, count):
        near = int(np.searchsorted(cum, cum[-1] * share[k - 1]))
        lo = cuts[-1] + unit
        hi = (frames - unit * (count - k)) // quantum * quantum
        cuts.append(min(max(round(near / quantum) * quantum, lo), hi))
    return [*cuts, frames]


def segment_path(video: Path, k: int) -> Path:
    """Where segment k of ``video`` is kept until the join (hidden, beside it): an
    MPEG-TS stream."""
    return video.with_name(f".{video.stem}.seg{k:03d}.ts")


def segment_output(settings: VideoSettings, codec: str, size: tuple[int, int], cuts: list[int],
                   k: int) -> VideoOutput:
    """Segment k's encoder (``cuts`` from :func:`boundaries`): its MPEG-TS stream at
    :func:`segment_path`, its timestamps starting where the segment starts. Each encoder
    gets x264's own thread count (1.5 a core): with cores / K each, K = 8 took 3.9x plain
    ffmpeg's time (x264's threads wait on each other; more of them than cores keep the
    cores busy, as K plain processes do)."""
    return VideoOutput(replace(settings, path=segment_path(Path(settings.path), k), codec=codec), *size,
                       faststart=False, ts_offset=Fraction(cuts[k], settings.fps))


class Joiner:
    """The join, begun before the segments end: one ffmpeg remuxes MPEG-TS from its
    standard input into the MP4's partial file (see the module's docstring), and a
    thread feeds it each segment's stream as soon as that segment and those before it
    are finished (:meth:`segment_done`), then removes the stream. The frame pool colours
    the segments in turn, so they finish about in turn, and what is left at the end is
    the last segments' bytes and the MP4's index. :meth:`finish` waits for it and
    renames the video into place; :meth:`abort` stops it and removes what it wrote."""

    def __init__(self, parts: list[Path], video: Path, fps: int):
        self.parts, self.video, self.tmp = parts, video, partial_path(video)
        self._done = [threading.Event() for _ in parts]
        self._stopped = False
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by finish or abort)
        cmd = [ff.ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "mpegts", "-i", "pipe:",
               "-map", "0", "-c", "copy", "-bsf:v", f"{JOIN_FILTER}=remove_types=9",
               "-video_track_timescale", str(mp4_timescale(fps)), "-movflags", "+faststart",
               "-f", "mp4", "-y", str(self.tmp)]
        # its own process group: a Ctrl-C reaches the farm, which stops ffmpeg itself.
        # GCONV_PATH: a statically linked ffmpeg (imageio-ffmpeg's 4.2.2, wheels up to
        # 0.5.1) reading MPEG-TS converts the stream's service names with the C library's
        # iconv, which loads the system's character-set modules; those of a newer C library
        # crash it (a segmentation fault on Debian 12's glibc 2.36, at the join, after every
        # segment was encoded). The join needs no conversion, so it gets none to load.
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=self._errors, process_group=0,
                                      env={**os.environ, "GCONV_PATH": os.devnull})
        pipes.widen(self._proc.stdin)  # the segments' bytes in 1 MB writes
        self._thread = threading.Thread(target=self._feed, name="farm-join", daemon=True)
        self._thread.start()

    def segment_done(self, k: int) -> None:
        """Segment k's stream is complete (its encoder has ended)."""
        self._done[k].set()

    def _feed(self) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            for part, done in zip(self.parts, self._done, strict=True):
                done.wait()
                if self._stopped:
                    return
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, stdin, 1 << 20)
                part.unlink()
        except (OSError, ValueError):
            pass  # ffmpeg stopped (its status says why), or a segment is missing: finish raises
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def finish(self) -> Path:
        """Wait for the join (every segment must be done); the video is then in place."""
        self._thread.join()
        returncode = self._proc.wait()
        self._errors.seek(0)
        message = self._errors.read().decode(errors="replace")
        self._errors.close()
        if returncode != 0 or any(part.exists() for part in self.parts):
            self.abort()
            raise EncodeError("ffmpeg could not join the video's segments: "
                              + ff.last_line(message, returncode))
        os.replace(self.tmp, self.video)
        return self.video

    def abort(self) -> None:
        """Stop the join; remove the partial video and the segments' streams. Idempotent."""
        self._stopped = True
        for done in self._done:
            done.set()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._thread.join()
        with contextlib.suppress(ValueError):
            self._errors.close()
        for path in (self.tmp, *self.parts):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def join(parts: list[Path], video: Path, fps: int) -> Path:
    """Join the finished segment streams ``parts`` (in order) into the MP4 ``video``
    (:class:`Joiner`, every segment done). The parts are removed."""
    joiner = Joiner(parts, video, fps)
    for k in range(len(parts)):
        joiner.segment_done(k)
    return joiner.finish()


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
        self.joiner: Joiner | None = None
        try:
            self.joiner = Joiner(self.parts, self.path, settings.fps)
            for k in range(len(self.parts)):
                output = segment_output(settings, codec, size, self.cuts, k)
                self.sinks.append(FrameSink(store_path, output, style, smoothing,
                                            range(self.cuts[k], self.cuts[k + 1]),
                                            colourer=colourer, bar=shared, pool=self.pool,
                                            threads=max(2, self.pool.threads // 2),
                                            on_closed=functools.partial(self.joiner.segment_done, k)))
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
            for sink in self.sinks:
                sink.finish()
            self.pool.shutdown()
            assert self.joiner is not None
            path = self.joiner.finish()
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
        if self.joiner is not None:
            self.joiner.abort()
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


__all__ = ["Joiner", "SegmentedSink", "boundaries", "frame_quantum", "join", "mp4_timescale", "segment_count",
           "segment_output", "segment_path"]
