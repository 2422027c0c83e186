"""Frames out of the store: PNG files, and an H.264 video through ffmpeg.

Colouring reads only the store (:mod:`farm.color`). The video is ``yuv420p``
H.264 in MP4, which plays everywhere; yuv420p needs even dimensions, so an odd
width or height loses its last column or row. ffmpeg is the one on ``PATH``, else
the binary that the ``imageio-ffmpeg`` wheel carries. ffmpeg-python is imported
only when a video is written (the GPU machines of some clusters have no ffmpeg).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from farm.color import colorize, smoothed_cdfs
from farm.errors import UsageError
from farm.progress import Progress
from farm.store.reader import Store


def ffmpeg_binary() -> str:
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg
    except ImportError:
        raise UsageError("no ffmpeg on PATH and imageio-ffmpeg is not installed") from None
    return imageio_ffmpeg.get_ffmpeg_exe()


def colored_frames(store: Store) -> Iterator[np.ndarray]:
    """RGB ``(H, W, 3)`` uint8 of every frame, in order. Needs a complete store."""
    missing = np.flatnonzero(~store.frame_done())
    if len(missing):
        raise UsageError(f"store {store.path}: {len(missing)} frame(s) not rendered yet "
                         f"(first: {missing[0]}); run `farm resume {store.path}`")
    color = store.spec.color
    cdfs = smoothed_cdfs(store.histogram, store.frames, color.smoothing)
    for f, frame_cdf in enumerate(cdfs):
        yield colorize(store.iterations(f), store.fraction(f), frame_cdf, color.palette, color.cycles)


def write_pngs(store: Store, out_dir: str | Path, progress: bool = True) -> list[Path]:
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bar = Progress(store.frames, "frames", unit="frames") if progress else None
    paths = []
    for f, rgb in enumerate(colored_frames(store)):
        path = out / f"frame_{f:05d}.png"
        Image.fromarray(rgb).save(path)
        paths.append(path)
        if bar:
            bar.advance()
    return paths


def encode_video(store: Store, video: str | Path, fps: int | None = None, crf: int | None = None,
                 progress: bool = True) -> Path:
    """Write ``video`` (MP4, H.264, yuv420p) from a complete store."""
    import ffmpeg

    spec = store.spec
    fps = fps or spec.animation.fps
    crf = spec.output.crf if crf is None else crf
    w, h = spec.size
    ew, eh = w - w % 2, h - h % 2
    if ew == 0 or eh == 0:
        raise UsageError(f"image.size {w}x{h}: a video needs at least 2x2 pixels")
    video = Path(video)
    video.parent.mkdir(parents=True, exist_ok=True)
    tmp = video.with_name(f".{video.stem}.partial{video.suffix}")
    proc = (
        ffmpeg.input("pipe:", format="rawvideo", pix_fmt="rgb24", s=f"{ew}x{eh}", framerate=fps)
        .output(str(tmp), vcodec="libx264", pix_fmt="yuv420p", crf=crf, movflags="+faststart")
        .overwrite_output()
        .global_args("-hide_banner", "-loglevel", "error")
        .run_async(pipe_stdin=True, pipe_stderr=True, cmd=ffmpeg_binary())
    )
    errors: list[bytes] = []
    drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    drain.start()  # ffmpeg blocks if nobody reads its stderr
    bar = Progress(store.frames, "encode", unit="frames") if progress else None
    try:
        for rgb in colored_frames(store):
            proc.stdin.write(np.ascontiguousarray(rgb[:eh, :ew]).tobytes())
            if bar:
                bar.advance()
    except BrokenPipeError:
        pass  # ffmpeg died; its message is below
    except BaseException:
        proc.kill()
        raise
    finally:
        if proc.stdin and not proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
        proc.wait()
        drain.join()
    if proc.returncode != 0:
        text = b"".join(errors).decode(errors="replace").strip()
        tmp.unlink(missing_ok=True)
        raise UsageError(f"ffmpeg failed ({proc.returncode}): {text.splitlines()[-1] if text else ''}")
    tmp.replace(video)
    return video


def probe(video: str | Path) -> tuple[int, int, int]:
    """(frames, width, height) of a video's first stream, by decoding it with ffmpeg."""
    cmd = [ffmpeg_binary(), "-hide_banner", "-i", str(video), "-map", "0:v:0", "-f", "null", "-"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=False).stderr
    size = re.search(r"Video:.*?, (\d+)x(\d+)", text)
    frames = re.findall(r"frame=\s*(\d+)", text)
    if not size or not frames:
        raise UsageError(f"cannot probe {video}: {text.strip().splitlines()[-1] if text else ''}")
    return int(frames[-1]), int(size.group(1)), int(size.group(2))
