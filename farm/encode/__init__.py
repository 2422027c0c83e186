"""Frames out of the store: a video through ffmpeg, PNG files, or a still.

Everything goes through one :class:`~farm.encode.sink.FrameSink`: ``farm encode`` and
``farm frames`` hand it every frame of a finished store at once; a render hands it
each frame as its tiles complete (:func:`open_video_sink`). Colour and output settings
are always passed explicitly (the job's, or overrides), never taken from the spec
stored in the store, so a store is recoloured without rendering again.

A job of one frame (a still) has no video: its frame is written as a PNG at
``output.video`` with the suffix ``.png`` (:func:`still_path`).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from farm import spec as specmod
from farm.color.methods import Style
from farm.encode.audio import SoundtrackSink, silent_path
from farm.encode.ffmpeg import EncodeError, VideoSettings, partial_path
from farm.encode.outputs import Output, PngOutput, StillOutput, VideoOutput, png_name
from farm.encode.segments import SegmentedSink, boundaries, segment_count
from farm.encode.sink import Colourer, FrameSink
from farm.errors import StoreError, UsageError
from farm.runtime.media import ffmpeg_binary
from farm.store import lock
from farm.store.reader import Store

__all__ = ["EncodeError", "FrameSink", "SegmentedSink", "VideoSettings", "check_complete", "check_output",
           "check_video", "encode_video", "ffmpeg_binary", "open_video_sink", "partial_path", "png_name",
           "probe", "still_path", "write_frames"]


def still_path(video: str | os.PathLike[str]) -> Path:
    """Where a one-frame job's picture goes: the video path with ``.png``."""
    return Path(video).with_suffix(".png")


def check_output(path: str | os.PathLike[str], field: str, directory: bool = False) -> None:
    """SpecError (one line, naming ``field``) unless ``path`` can be written: a file
    (``directory=False``) or a directory to create or fill. Creates nothing (see
    :func:`farm.spec.check_writable`: it probes with a hidden file, so read-only mounts
    and /proc answer too)."""
    if directory:
        specmod.check_directory(path, field)
    else:
        specmod.check_writable(path, field)


def check_complete(store: Store, frames: Iterable[int], smoothing: int) -> None:
    """StoreError unless ``frames`` and the frames their colouring windows need are
    rendered."""
    done = store.frame_done()
    need = {g for f in frames for g in range(max(0, f - smoothing), min(store.frames, f + smoothing + 1))}
    missing = sorted(g for g in need if not done[g])
    if missing:
        rendering = lock.holder(store.path)
        then = (f"it is being rendered now by {lock.describe(rendering)}: wait for it to end "
                f"(`farm status {store.path}` shows how far it is)" if rendering is not None
                else f"run `farm resume {store.path}`")
        raise StoreError(f"store {store.path}: {len(missing)} frame(s) not rendered yet "
                         f"(first: {missing[0]}); {then}")


def _output_for(video: VideoSettings, frames: int, size: tuple[int, int]) -> Output:
    if frames == 1:
        return StillOutput(still_path(video.path))
    return VideoOutput(video, *size)


def check_video(store_path: str | os.PathLike[str], color, video: str | os.PathLike[str]) -> Style:
    """SpecError (``color.palette``, ``output.video``) unless the store's frames can be
    coloured with ``color`` into ``video`` (a still: its PNG); returns the style."""
    with Store(store_path) as store:
        frames = store.frames
    return _checked_style(color, video, frames)


def _checked_style(color, video: str | os.PathLike[str], frames: int) -> Style:
    """:func:`check_video` for a store of ``frames`` frames."""
    style = Style.from_settings(color)
    check_output(still_path(video) if frames == 1 else video, "output.video")
    return style


def open_video_sink(store_path: str | os.PathLike[str], color, video: VideoSettings, *,
                    progress: bool = False, colourer: Colourer | None = None,
                    segments: int | None = None) -> FrameSink | SegmentedSink | SoundtrackSink:
    """A sink that colours the store's frames with ``color`` (a :class:`farm.spec.Color`)
    into ``video`` (a still: a PNG, :func:`still_path`) as they complete, encoded in
    ``segments`` parts at once (default: :func:`~farm.encode.segments.segment_count`:
    one, unless FARM_ENCODE_SEGMENTS says otherwise). The store must exist. Raises
    SpecError (``color.palette``, ``output.video``) before writing anything when the
    palette or the video path cannot be used."""
    with Store(store_path) as store:
        frames, size, expmap = store.frames, store.spec.size, store.expmap
    style = _checked_style(color, video.path, frames)
    if video.audio is not None and frames > 1:  # the silent video first, the soundtrack at finish
        silent = replace(video, path=silent_path(video.path), audio=None)
        inner = open_video_sink(store_path, color, silent, progress=progress, colourer=colourer,
                                segments=segments)
        return SoundtrackSink(inner, video.path, video.audio, seconds=frames / video.fps)
    count = 1 if frames == 1 else segments or segment_count(frames, video.fps, expmap)
    if count > 1 and len(boundaries(frames, count, video.fps)) > 2:
        return SegmentedSink(store_path, video, size, style, color.smoothing, frames, count,
                             colourer=colourer, progress=progress)
    output = _output_for(video, frames, size)
    return FrameSink(store_path, output, style, color.smoothing, progress=progress, colourer=colourer)


def _run(sink: FrameSink | SegmentedSink | SoundtrackSink, complete: Iterable[int]) -> Path:
    """Tell ``sink`` which frames are complete (all of a finished store's), wait for it."""
    try:
        for f in complete:
            sink.frame_complete(int(f))
        return sink.finish()
    except BaseException:
        sink.abort()
        raise


def encode_video(store_path: str | os.PathLike[str], color, video: VideoSettings,
                 progress: bool = True, colourer: Colourer | None = None,
                 segments: int | None = None) -> Path:
    """Colour every frame of a finished store into ``video`` (a still: a PNG)."""
    with Store(store_path) as store:
        check_complete(store, range(store.frames), color.smoothing)
        frames = store.frames
    sink = open_video_sink(store_path, color, video, progress=progress, colourer=colourer,
                           segments=segments)
    return _run(sink, range(frames))


def write_frames(store_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], color,
                 frames: Sequence[int] | None = None, progress: bool = True,
                 colourer: Colourer | None = None) -> list[Path]:
    """PNG files ``out_dir/frame_NNNNN.png`` of ``frames`` (default all) of a store
    whose frames (and their colouring windows) are rendered."""
    style = Style.from_settings(color)
    with Store(store_path) as store:
        chosen = list(range(store.frames)) if frames is None else sorted(set(frames))
        check_complete(store, chosen, color.smoothing)
        complete = np.flatnonzero(store.frame_done())
    check_output(out_dir, "--out", directory=True)
    try:
        output = PngOutput(Path(out_dir))
    except OSError as err:
        raise UsageError(f"--out: cannot create {out_dir}: {err.strerror or err}") from None
    sink = FrameSink(store_path, output, style, color.smoothing, chosen, progress=progress,
                     colourer=colourer)
    out = _run(sink, complete)
    return [out / png_name(f) for f in chosen]


def probe(video: str | os.PathLike[str]) -> tuple[int, int, int]:
    """(frames, width, height) of a video's first stream, by decoding it with ffmpeg."""
    cmd = [ffmpeg_binary(), "-hide_banner", "-i", str(video), "-map", "0:v:0", "-f", "null", "-"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=False).stderr
    size = re.search(r"Video:.*?, (\d+)x(\d+)", text)
    counts = re.findall(r"frame=\s*(\d+)", text)
    if not size or not counts:
        raise UsageError(f"cannot probe {video}: {text.strip().splitlines()[-1] if text else ''}")
    return int(counts[-1]), int(size.group(1)), int(size.group(2))
