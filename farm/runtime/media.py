"""ffmpeg as a tool every layer may run: which binary (:func:`ffmpeg_binary`), what a
failed run says (:func:`last_line`), and a soundtrack's length (:func:`track_seconds`).

ffmpeg is the one on ``PATH``, else the binary that the ``imageio-ffmpeg`` wheel
carries (``IMAGEIO_FFMPEG_EXE`` where the user set it); this is the one place that
imports ``imageio_ffmpeg``. The job spec measures a track here for
``animation.duration = "audio"`` (farm/spec/derived.py); the encoder checks and muxes
it (farm/encode/audio.py).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

from farm.errors import SpecError, UsageError

FIELD = "output.audio"
_TIME = re.compile(r"time=\s*(\d+):(\d\d):(\d\d(?:\.\d+)?)")


def ffmpeg_binary() -> str:
    """The ffmpeg on PATH, else imageio-ffmpeg's."""
    return shutil.which("ffmpeg") or _wheel_ffmpeg()


@functools.cache
def _wheel_ffmpeg() -> str:
    """The binary the imageio-ffmpeg wheel carries (IMAGEIO_FFMPEG_EXE where the user set
    it), found in the wheel's ``binaries`` folder without importing the package: its own
    lookup (``imageio_ffmpeg.get_ffmpeg_exe``) imports it and runs the binary once to
    check it, 0.05 s on the 2-core machine on the way to a video's first frame. Where
    the folder holds no single binary, that lookup decides."""
    chosen = os.environ.get("IMAGEIO_FFMPEG_EXE")
    if chosen:
        return chosen
    spec = importlib.util.find_spec("imageio_ffmpeg")
    if spec is None:
        raise UsageError("no ffmpeg on PATH and imageio-ffmpeg is not installed")
    found = [p for folder in spec.submodule_search_locations or []
             for p in Path(folder, "binaries").glob("ffmpeg-*") if p.is_file() and os.access(p, os.X_OK)]
    if len(found) == 1:
        return str(found[0])
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())


def last_line(stderr: str, returncode: int | None) -> str:
    """What an ffmpeg run that failed says: its last line of error output, or its exit
    status when it printed nothing (the signal that ended it, if one did)."""
    lines = stderr.strip().splitlines()
    if lines:
        return lines[-1]
    if returncode is not None and returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            pass
    return f"exit status {returncode}"


def track_seconds(path: str | os.PathLike[str]) -> float:
    """The length in seconds of the first audio stream of ``path``, by decoding all of
    it with ffmpeg (a file it cannot read is found here, not after the render), once a
    process for each version of the file. SpecError naming output.audio when the file
    is missing, unreadable or silent."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(FIELD, f"{path} does not exist" if not p.exists() else f"{path} is not a file")
    st = p.stat()
    return _decoded_seconds(str(p.resolve()), st.st_mtime_ns, st.st_size, str(path))


@functools.lru_cache(maxsize=16)
def _decoded_seconds(p: str, _mtime_ns: int, _size: int, path: str) -> float:
    """:func:`track_seconds` of the file ``p`` as it is at that time and size (``path``:
    as the user named it, for the errors)."""
    cmd = [ffmpeg_binary(), "-hide_banner", "-nostdin", "-i", str(p), "-map", "0:a:0", "-f", "null", "-"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SpecError(FIELD, f"{path}: ffmpeg could not read it ({err})") from None
    if done.returncode != 0:
        why = last_line(done.stderr, done.returncode)
        for name in (p, path):  # ffmpeg before 9 begins with the file's name: said once is enough
            why = why.removeprefix(f"{name}: ")
        if "matches no streams" in done.stderr:
            why = "it has no audio stream"
        raise SpecError(FIELD, f"{path}: not a sound file ffmpeg can read: {why}")
    times = _TIME.findall(done.stderr)
    if not times:
        raise SpecError(FIELD, f"{path}: ffmpeg decoded no sound from it")
    h, m, s = times[-1]
    seconds = int(h) * 3600 + int(m) * 60 + float(s)
    if seconds <= 0:
        raise SpecError(FIELD, f"{path}: the track is empty")
    return seconds
