"""Which settings made a store's video, and where a recoloured one goes.

``farm encode STORE`` with other colours (``--palette ice``, ``--job``'s ``[color]``,
``--crf``, ...) and no ``--video`` never overwrites the video that is there: it writes
beside it, under a name that says what changed, ``seahorse.ice.mp4`` or
``seahorse.histogram.ice.cycles1.5.mp4`` (a one-frame store: ``seahorse.ice.png``). The
video is overwritten only when it was made with the same settings (then the new one is
the same video), or when ``--video`` (or ``--job``'s ``output.video``) names the path.

The settings that make a video (:data:`VIDEO_KEYS`) are the ``[color]`` section,
``animation.fps`` and ``output.crf``, ``preset`` and ``codec``.

The store remembers the videos its renders made (farm/store/videos.py): for each
absolute path ``{"settings": digest, "values": {key: value}, "size": bytes,
"mtime_ns": ns}`` (:func:`remember`; ``values`` name a gradient by its name), written
once the video is in place and the render's writer has closed the store. ``farm
render`` or ``farm resume`` of a complete store whose video is in place, the same size
and modification time as recorded and made with the same settings, does nothing more
(:func:`up_to_date`); a video missing, changed or made with other settings is made
again. A video without a record (``farm encode`` keeps the store read-only) is taken
to have the store's own settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from farm import spec as specmod
from farm.spec.palettes import Gradient
from farm.store import videos

# (section, key) of every setting that changes the video made from a store's frames
VIDEO_KEYS = (("color", "method"), ("color", "palette"), ("color", "cycles"),
              ("color", "smoothing"), ("color", "density"), ("color", "line_width"),
              ("color", "light"), ("animation", "fps"), ("output", "crf"),
              ("output", "preset"), ("output", "codec"))
_UNSAFE = re.compile(r"[^A-Za-z0-9._,+-]+")


def _settings(spec: specmod.JobSpec) -> dict[str, Any]:
    """The video settings of ``spec``; the soundtrack among them when there is one (so a
    silent video's digest is what it was before soundtracks counted)."""
    out = {f"{section}.{key}": getattr(getattr(spec, section), key) for section, key in VIDEO_KEYS}
    if spec.output.audio is not None:
        out["output.audio"] = spec.output.audio
    return out


def digest(spec: specmod.JobSpec) -> str:
    """A short hash of every video setting of ``spec`` (a gradient's stops included)."""
    values = {k: dataclasses.asdict(v) if isinstance(v, Gradient) else v
              for k, v in _settings(spec).items()}
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def values(spec: specmod.JobSpec) -> dict[str, Any]:
    """The video settings of ``spec`` as JSON values, a gradient by its name (what
    names a recoloured video)."""
    out = {k: v.name if isinstance(v, Gradient) else v for k, v in _settings(spec).items()}
    return dict(json.loads(json.dumps(out)))  # tuples as lists, as the record holds them


def _label(name: str, value: Any) -> str:
    """A file-name part for one changed setting: ``ice``, ``histogram``, ``cycles1.5``."""
    key = name.partition(".")[2]
    if key == "palette":
        text = Path(str(value)).stem
    elif key == "audio":
        text = f"audio-{Path(str(value)).stem}"
    elif key in ("method", "preset", "codec"):
        text = str(value)
    elif key == "light":
        text = "light" + ",".join(f"{v:g}" for v in value)
    else:
        text = f"{key}{value:g}"
    return _UNSAFE.sub("-", text).strip(".") or key


def changed_name(video: str | os.PathLike[str], new: dict[str, Any], old: dict[str, Any]) -> Path:
    """``video`` with a part for each of the :func:`values` ``new`` that differs from
    ``old`` (in :data:`VIDEO_KEYS` order): ``renders/seahorse.ice.mp4``; ``video``
    itself when none differs."""
    parts = [_label(k, v) for k, v in new.items() if v != old.get(k)]
    path = Path(video)
    return path.with_name(".".join([path.stem, *parts]) + path.suffix) if parts else path


def output_path(video: str | os.PathLike[str], frames: int) -> Path:
    """The file a video path gives for a store of ``frames`` frames (1: the PNG)."""
    from farm.encode import still_path

    return still_path(video) if frames == 1 else Path(video)


def _stat(path: str | os.PathLike[str]) -> dict[str, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _entry(store: str | os.PathLike[str], output: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The store's record of the file ``output``, if that file is still the one recorded."""
    entry = videos.read(store).get(os.path.abspath(output))
    now = _stat(output)
    if entry is None or now is None or {k: entry.get(k) for k in now} != now:
        return None
    return entry


def up_to_date(store: str | os.PathLike[str], output: str | os.PathLike[str],
               spec: specmod.JobSpec) -> bool:
    """Whether the file ``output`` is the one the store's render made with ``spec``'s
    video settings, unchanged since."""
    entry = _entry(store, output)
    return entry is not None and entry.get("settings") == digest(spec)


def remember(store: str | os.PathLike[str], output: str | os.PathLike[str],
             spec: specmod.JobSpec) -> None:
    """Record that the file ``output`` was made from the store with ``spec``'s video
    settings. Call it with nobody writing the store (the render's writer closed, its
    lock held). Best effort: a store that cannot be opened for writing keeps its old
    record (the video is then made again next time)."""
    now = _stat(output)
    if now is None:
        return
    entries = videos.read(store)
    key = os.path.abspath(output)
    entries.pop(key, None)
    entries[key] = {"settings": digest(spec), "values": values(spec), **now}  # newest last
    videos.write(store, entries)


def beside_store(store: str | os.PathLike[str], video: str | os.PathLike[str]) -> Path:
    """The default video path of ``farm encode``: a relative ``video`` (the job's
    ``output.video``, relative to where the render ran) by its file name in the store's
    folder, wherever the command runs; an absolute one as it is."""
    path = Path(video)
    return path if path.is_absolute() else Path(store).parent / path.name


def recolour_target(store: str | os.PathLike[str], stored: specmod.JobSpec,
                    spec: specmod.JobSpec, frames: int, force: bool = False) -> Path:
    """Where ``farm encode`` without ``--video`` writes the video of ``spec``'s settings
    (``spec.output.video`` is the default path): that path when nothing is there, when
    what is there was made with the same settings (soundtrack included), or with
    ``force``; else beside it (:func:`changed_name` against the settings it was made
    with: the store's record, else the stored job's). ``frames``: the store's (1: the
    picture is a PNG)."""
    video = Path(spec.output.video)
    existing = output_path(video, frames)
    if force or not existing.exists():
        return video
    entry = _entry(store, existing)
    if entry is not None and entry.get("settings") == digest(spec):
        return video
    if entry is None and digest(spec) == digest(stored):
        return video
    made = entry["values"] if entry is not None else values(stored)
    target = changed_name(video, values(spec), made)
    if target == video:  # e.g. two gradients of one name: the settings' digest tells them apart
        target = video.with_name(f"{video.stem}.{digest(spec)[:8]}{video.suffix}")
    return target
