"""Which settings made a store's video, and where a recoloured one goes.

``farm encode STORE`` with other colours (``--palette ice``, ``--job``'s ``[color]``,
``--crf``, ...) and no ``--video`` never overwrites the video that is there: it writes
beside it, under a name that says what changed, ``seahorse.ice.mp4`` or
``seahorse.histogram.ice.cycles1.5.mp4`` (a one-frame store: ``seahorse.ice.png``). The
video is overwritten only when it was made with the same settings (then the new one is
the same video), or when ``--video`` (or ``--job``'s ``output.video``) names the path.

The settings that make a video (:data:`VIDEO_KEYS`) are the ``[color]`` section,
``animation.fps`` and ``output.crf``, ``preset`` and ``codec``; a video found at the
path is taken to have the store's own settings.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from farm import spec as specmod
from farm.color.palettes import Gradient

# (section, key) of every setting that changes the video made from a store's frames
VIDEO_KEYS = (("color", "method"), ("color", "palette"), ("color", "cycles"),
              ("color", "smoothing"), ("color", "density"), ("color", "line_width"),
              ("color", "light"), ("animation", "fps"), ("output", "crf"),
              ("output", "preset"), ("output", "codec"))
_UNSAFE = re.compile(r"[^A-Za-z0-9._,+-]+")


def video_settings(spec: specmod.JobSpec) -> dict[str, Any]:
    """``{"color.palette": ..., "output.crf": ...}``: what makes the video of ``spec``."""
    return {f"{section}.{key}": getattr(getattr(spec, section), key) for section, key in VIDEO_KEYS}


def _label(name: str, value: Any) -> str:
    """A file-name part for one changed setting: ``ice``, ``histogram``, ``cycles1.5``."""
    key = name.partition(".")[2]
    if key == "palette":
        text = value.name if isinstance(value, Gradient) else Path(str(value)).stem
    elif key in ("method", "preset", "codec"):
        text = str(value)
    elif key == "light":
        text = "light" + ",".join(f"{v:g}" for v in value)
    else:
        text = f"{key}{value:g}"
    return _UNSAFE.sub("-", text).strip(".") or key


def changed_name(video: str | os.PathLike[str], new: specmod.JobSpec, old: specmod.JobSpec) -> Path:
    """``video`` with a part for each setting of ``new`` that differs from ``old``
    (in :data:`VIDEO_KEYS` order): ``renders/seahorse.ice.mp4``. ``video`` itself when
    none differs."""
    a, b = video_settings(new), video_settings(old)
    parts = [_label(k, a[k]) for k in a if a[k] != b[k]]
    path = Path(video)
    return path.with_name(".".join([path.stem, *parts]) + path.suffix) if parts else path


def recolour_target(stored: specmod.JobSpec, spec: specmod.JobSpec, frames: int) -> Path:
    """Where ``farm encode`` without ``--video`` writes the video of ``spec``'s settings
    (``spec.output.video`` is the stored job's video path): that path when nothing is
    there or what is there was made with the same settings, else beside it
    (:func:`changed_name`). ``frames``: the store's (1: the picture is a PNG)."""
    from farm.encode import still_path

    video = Path(spec.output.video)
    existing = still_path(video) if frames == 1 else video
    if not existing.exists():
        return video
    return changed_name(video, spec, stored)
