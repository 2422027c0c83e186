"""The soundtrack: ``output.audio`` (any format ffmpeg reads) muxed into the video as AAC.

The video is made as always (one encoder or joined segments), but under a hidden
silent name beside the video (:func:`silent_path`); when it is complete,
:func:`mux` copies its video stream and encodes the track as AAC (192 kb/s) into the
video's partial name (``.NAME.partial.mp4``), ending with the shorter of the two, and
renames it into place. Where the track is the longer (the usual case, and that of
``duration = "audio"``), it is read only as far as the video's length (``-t`` on the
track), rather than cut by ffmpeg's ``-shortest``, with which ffmpeg 4.2.2 (imageio-ffmpeg's
wheels up to 0.5.1) stopped at the video's end with the last ~0.25 s of sound still
queued (a 3 s video got 2.76 s of its track). A shorter track still cuts the video
through ``-shortest``: exactly with ffmpeg 9, a few frames after the track's end with
older ones (two at 10 fps with 4.2.2, three with Debian 12's 5.1); an output ``-t``
kept two frames too many (x264's B-frame delay) with ffmpeg 9 too. So a video under
its final name is always complete and has its sound; an interrupted or failed run
leaves neither the silent nor the partial file.

:class:`SoundtrackSink` wraps a frame sink (its ``finish`` ends with the mux);
:func:`farm.encode.open_video_sink` hands it out when the settings name a track.
:func:`check` has the track decoded once to check it and measure it
(:func:`farm.runtime.media.track_seconds`, which also gives ``animation.duration =
"audio"`` its length), before any rendering (``farm render``, ``validate``,
``resume``, ``encode``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.encode.ffmpeg import EncodeError, partial_path
from farm.errors import SpecError
from farm.runtime.media import FIELD, ffmpeg_binary, last_line, track_seconds

if TYPE_CHECKING:
    from farm.spec import JobSpec

AAC_BITRATE = "192k"


def silent_path(video: str | os.PathLike[str]) -> Path:
    """Where the video waits for its soundtrack: hidden, beside it."""
    path = Path(video)
    return path.with_name(f".{path.stem}.silent{path.suffix}")


def check(spec: JobSpec) -> float | None:
    """The soundtrack's length (None without one); SpecError before any work when it
    cannot be used."""
    if spec.output.audio is None:
        return None
    if spec.frames == 1:
        raise SpecError(FIELD, "a one-frame job is a still (a PNG): it has no soundtrack")
    return track_seconds(spec.output.audio)


def mux(silent: Path, audio: str | os.PathLike[str], video: Path, video_s: float | None = None,
        track_s: float | None = None) -> Path:
    """``video``: ``silent``'s video stream (copied) with ``audio`` as AAC, as long as
    the shorter of the two; written as its partial file and renamed into place. With
    both lengths known (seconds) and the track the longer, the track is read only as
    far as the video's length; else ffmpeg's ``-shortest`` cuts (see the module's
    docstring)."""
    tmp = partial_path(video)
    longer = video_s is not None and track_s is not None and track_s >= video_s
    cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-nostdin", "-i", str(silent),
           *(["-t", f"{video_s:.6f}"] if longer else []), "-i", str(audio),
           "-map", "0:v:0", "-map", "1:a:0", "-c:v", "copy", "-c:a", "aac", "-b:a", AAC_BITRATE,
           *([] if longer else ["-shortest"]), "-movflags", "+faststart", "-f", "mp4", "-y", str(tmp)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
        if done.returncode != 0:
            raise EncodeError(f"ffmpeg could not add the soundtrack {audio}: "
                              + last_line(done.stderr, done.returncode))
        os.replace(tmp, video)
        return video
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


class SoundtrackSink:
    """A frame sink (:class:`~farm.encode.sink.FrameSink` or
    :class:`~farm.encode.segments.SegmentedSink`) writing the silent video, whose
    :meth:`finish` adds the soundtrack and puts the video at ``video``. ``seconds``: the
    video's length (frames / fps); the track's is measured meanwhile, on a thread, for
    :func:`mux`."""

    def __init__(self, inner: Any, video: str | os.PathLike[str], audio: str | os.PathLike[str],
                 seconds: float | None = None):
        self.inner = inner
        self.video, self.audio, self.seconds = Path(video), audio, seconds
        self._track: list[float] = []
        self._measure = threading.Thread(target=self._measure_track, name="farm-track", daemon=True)
        self._measure.start()

    def _measure_track(self) -> None:
        with contextlib.suppress(SpecError):  # (checked before any work: mux then says what fails)
            self._track.append(track_seconds(self.audio))

    @property
    def color_s(self) -> float:
        return float(self.inner.color_s)

    @property
    def write_s(self) -> float:
        return float(self.inner.write_s)

    @property
    def written(self) -> int:
        return int(self.inner.written)

    def frame_complete(self, f: int) -> None:
        self.inner.frame_complete(f)

    def finish(self) -> Path:
        """Wait for the silent video, then mux the soundtrack in; raises (leaving nothing
        behind) what went wrong."""
        silent: Path | None = None
        try:
            silent = Path(self.inner.finish())
            self._measure.join()
            return mux(silent, self.audio, self.video, self.seconds, self._track[0] if self._track else None)
        except BaseException:
            self.abort()
            raise
        finally:
            if silent is not None:
                with contextlib.suppress(FileNotFoundError):
                    silent.unlink()

    def abort(self) -> None:
        """Stop the inner sink; remove the silent and the partial video. Idempotent."""
        self.inner.abort()
        for path in (silent_path(self.video), partial_path(self.video)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def __enter__(self) -> SoundtrackSink:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            self.abort()
