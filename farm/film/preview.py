"""``farm preview``: a few frames of a job's timeline, small and fast, on one contact sheet.

Which frames: the first, the frame at each key's time (``round(t fps)``) and one
halfway between consecutive keys, and the last; without keys, ``count`` frames evenly
spread. Each is rendered at the job's centre, that frame's exact width and its angle
(farm/plan/curve.py; the angle to a double), ``width`` pixels wide (default 256, the
job's aspect ratio), one sample a pixel, by the same farm as ``farm render`` (the
job's precision and iteration rule, the same device selection) into a temporary
store: a preview job of one frame per pick, whose ``[[animation.keys]]`` hold each
picked width and angle at times 0, 1, 2, ... at 1 fps. ``max_iter`` caps the
iteration limit when given (a lower limit turns late-escaping pixels black, so by
default the job's own rule is kept). The frames are coloured with the job's
``[color]`` (no smoothing across frames: they are far apart) and laid out with their
frame number, time and width under each
(farm/encode/sheet.py).
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from farm import spec as specmod
from farm.encode.sheet import write_sheet
from farm.encode.sink import FrameSink

THUMB_WIDTH = 256
COLUMNS = 4


@dataclass(frozen=True)
class Pick:
    frame: int  # the video frame
    width: str  # decimal string (40 significant digits), complex-plane units
    key: int | None  # the key at this frame, if any
    label: str  # the width to 3 digits
    angle: float = 0.0  # degrees, counter-clockwise (farm/plan/curve.py, to a double)


def picks(spec: specmod.JobSpec, count: int = 6) -> list[Pick]:
    """The frames a preview shows (see the module's docstring), with their widths."""
    import farm.numerics as num
    from farm.plan.curve import angles_of, widths_of

    last = spec.frames - 1
    fps, keys = spec.animation.fps, spec.animation.keys
    at_key = {min(last, round(k.time_exact * fps)): i for i, k in enumerate(keys)}
    chosen = {0, last, *at_key}
    if keys:
        times = sorted(at_key)
        chosen |= {(a + b) // 2 for a, b in zip(times, times[1:], strict=False)}
    else:
        chosen |= {round(i * last / max(1, count - 1)) for i in range(count)}
    frames = sorted(chosen)
    widths, angles = widths_of(spec, frames), angles_of(spec, frames)
    return [Pick(k, num.decimal_text(w, 40), at_key.get(k), num.decimal_text(w, 3), float(a))
            for k, w, a in zip(frames, widths, angles, strict=True)]


def preview_spec(spec: specmod.JobSpec, chosen: list[Pick], folder: Path, width: int = THUMB_WIDTH,
                 max_iter: int | None = None) -> specmod.JobSpec:
    """The preview job: one frame per pick at its width, ``width`` pixels wide, its
    store in ``folder``."""
    data = tomllib.loads(specmod.canonical_text(spec))
    w, h = spec.size
    data["view"].pop("width")
    data["view"].pop("angle", None)  # each pick's angle is its key's
    data["image"] = {"size": [width, max(2, round(width * h / w))], "samples": 1}
    data["animation"] = {"fps": 1, "frames": len(chosen), "keys": [
        {"time": j, "width": p.width, "angle": p.angle, "interpolation": "hold"}
        for j, p in enumerate(chosen)]}
    data["render"]["tile"] = "auto"
    if max_iter is not None:
        data["iterations"]["max"] = max_iter
    data["color"]["smoothing"] = 0
    data["output"] = {"store": str(folder / "preview.h5"), "video": str(folder / "preview.mp4")}
    return specmod.from_dict(data, name="preview")


class _Frames:
    """A frame sink output that keeps the coloured frames in memory."""

    ordered = False

    def __init__(self) -> None:
        self.frames: dict[int, np.ndarray] = {}

    def prepare(self) -> None:
        pass

    def write(self, f: int, rgb: np.ndarray) -> None:
        self.frames[f] = rgb

    def close(self) -> Path:
        return Path(".")

    def abort(self) -> None:
        pass


def _captions(spec: specmod.JobSpec, chosen: list[Pick]) -> list[list[str]]:
    fps = spec.animation.fps
    out = []
    for p in chosen:
        key = f"  key {p.key}" if p.key is not None else ""
        out.append([f"frame {p.frame}  t {p.frame / fps:.2f} s{key}",
                    f"width {p.label}"])
    return out


def render_preview(spec: specmod.JobSpec, out: str | os.PathLike[str], source: str, *,
                   device: str = "auto", width: int = THUMB_WIDTH, count: int = 6,
                   max_iter: int | None = None) -> Path:
    """Render the preview of ``spec`` and write its contact sheet at ``out``."""
    from farm.color.methods import Style
    from farm.run import RenderOptions, render

    chosen = picks(spec, count)
    style = Style.from_settings(spec.color)
    specmod.check_writable(out, "--out")
    with tempfile.TemporaryDirectory(prefix="farm-preview-") as tmp:
        small = preview_spec(spec, chosen, Path(tmp), width, max_iter)
        render(small, options=RenderOptions(device=device, video=False, progress=False,
                                            check_space=False))
        frames = _Frames()
        sink = FrameSink(small.output.store, frames, style, 0)
        try:
            for f in range(len(chosen)):
                sink.frame_complete(f)
            sink.finish()
        except BaseException:
            sink.abort()
            raise
    w, h = spec.size
    title = (f"{source}: {spec.frames} frames at {spec.animation.fps} fps "
             f"({spec.frames / spec.animation.fps:.1f} s), {w}x{h}; {len(chosen)} shown")
    images = [frames.frames[f] for f in range(len(chosen))]
    return write_sheet(out, images, _captions(spec, chosen), title, COLUMNS)
