"""The spec's derived values (:func:`complete`): the video's frames from
``animation.duration``, the soundtrack (``"audio"``) or the timeline's keys, and
``view.width`` from the keys, with the checks that what the job file gave agrees.

The rules are those of the timing keys (farm/spec/keys.py); a soundtrack is measured
by ffmpeg (:func:`farm.runtime.media.track_seconds`), imported only when a job asks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from farm.errors import SpecError
from farm.spec.keys import MAX_FRAMES, key_range, keyed_angles
from farm.spec.sections import JobSpec


def _frames(spec: JobSpec, duration: float | str | None,
            probe: Callable[[str], float] | None) -> int:
    """The video's frames when animation.frames is not given."""
    fps, keys = spec.animation.fps, spec.animation.keys
    if duration == "audio":
        if spec.output.audio is None:
            raise SpecError("animation.duration", '"audio" needs a soundtrack: output.audio')
        if probe is None:
            from farm.runtime.media import track_seconds

            probe = track_seconds
        seconds = probe(spec.output.audio)
        field = "output.audio"
    elif duration is not None:
        seconds, field = float(duration), "animation.duration"
    elif keys:
        return min(MAX_FRAMES, round(keys[-1].time_exact * fps) + 1)
    else:
        raise SpecError("animation.frames", 'is required (or animation.duration: seconds, or '
                        '"audio"; or [[animation.keys]])')
    frames = max(1, round(seconds * fps))
    if frames > MAX_FRAMES:
        raise SpecError(field, f"{seconds:g} s at {fps} fps is {frames} frames; at most {MAX_FRAMES}")
    return frames


def complete(spec: JobSpec, given: dict[str, Any],
             probe: Callable[[str], float] | None = None) -> JobSpec:
    """The spec with its derived values: ``animation.frames`` from the duration or the
    keys, ``view.width`` from the keys. ``given``: ``{"frames": bool, "width": bool,
    "duration": value or None}``, what the job file said. ``probe(path)``: a
    soundtrack's length in seconds (default: farm.runtime.media.track_seconds)."""
    animation, view = spec.animation, spec.view
    duration = given.get("duration")
    if given["frames"] and duration is not None:
        raise SpecError("animation.duration", "give animation.frames or animation.duration, not both")
    if not given["frames"]:
        animation = dataclasses.replace(animation, frames=_frames(spec, duration, probe))
    if animation.keys:
        derived = key_range(animation.keys)
        if given["width"] and tuple(view.width) != derived:
            raise SpecError("view.width", "with [[animation.keys]] the widths come from the keys; "
                            f"leave view.width out (or give [widest, deepest] = {list(derived)})")
        view = dataclasses.replace(view, width=derived)
    elif not given["width"]:
        raise SpecError("view.width", "is required (or [[animation.keys]])")
    if keyed_angles(animation.keys):
        for name, value in (("view.angle", view.angle), ("animation.turn", animation.turn)):
            if value != 0:
                raise SpecError(name, "the keys give the angle ([[animation.keys]] angle); "
                                f"leave {name} out")
    return dataclasses.replace(spec, animation=animation, view=view)
