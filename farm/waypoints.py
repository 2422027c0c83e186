"""The film's timeline in the job spec: ``[[animation.keys]]``, ``animation.duration``.

A key is a waypoint: a time in seconds from the video's start and the view's width
then (``width``, a decimal string, or ``zoom``, with ``width = 4 / zoom``), and how the
zoom goes on to the next key (``interpolation``: ``"cubic"``, monotone in log width;
``"linear"`` in log width, a constant zoom speed; ``"hold"``, the width stays until
the next key). How a frame's width follows the keys is plan code
(:mod:`farm.plan.curve`); here the keys are parsed, checked, and the spec's derived
values filled in (:func:`complete`):

* the video's length: ``animation.frames``, or ``animation.duration`` in seconds
  (``frames = round(duration * fps)``), or ``"audio"`` (the soundtrack's length,
  ``output.audio``), or with keys and neither, up to the last key
  (``frames = round(t_last * fps) + 1``, so the last frame shows the last key);
* with keys, ``view.width`` is derived: ``[widest, deepest]`` of the keys (the range the
  zoom covers; it must not be given otherwise).

The canonical text (:func:`farm.spec.canonical_text`) holds the resolved frames and
the keys, never ``duration``: a store's spec needs no audio file to be rebuilt, and
MPI workers and resumes compute the same widths from it.

Rotation (later): a key will carry ``angle`` (degrees at that time) beside its width,
interpolated on the same timeline; ``angle`` is recognised now and refused with a
message saying so.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from farm.errors import SpecError

if TYPE_CHECKING:
    from farm.spec import JobSpec

INTERPOLATIONS = ("cubic", "linear", "hold")
KEY_FIELDS = ("time", "width", "zoom", "interpolation")
MAX_TIME = 1e6  # seconds (11.6 days of video)
MAX_FRAMES = 100_000  # farm.spec: animation.frames


@dataclass(frozen=True)
class Key:
    """A waypoint of the zoom (one ``[[animation.keys]]`` table)."""

    time: float  # seconds from the start; read as the decimal it was written as (time_exact)
    width: str | None = None  # decimal string, complex-plane units across the image
    zoom: str | None = None  # decimal string: the width is 4 / zoom
    interpolation: str = "cubic"  # from this key to the next: cubic | linear | hold

    @property
    def time_exact(self) -> Fraction:
        """The time as the shortest decimal that gives the float (0.1 is 1/10): what
        the user wrote, so a key at 0.1 s falls exactly on frame 3 at 30 fps."""
        return Fraction(repr(self.time))

    def width_exact(self) -> Fraction:
        """The width as an exact rational (``4 / zoom`` for a zoom key)."""
        if self.width is not None:
            return Fraction(self.width)
        assert self.zoom is not None
        return 4 / Fraction(self.zoom)

    def width_text(self, digits: int = 40) -> str:
        """The width as a decimal string (a zoom key's to ``digits`` significant digits)."""
        if self.width is not None:
            return self.width
        assert self.zoom is not None
        with localcontext() as ctx:
            ctx.prec = digits
            return format((Decimal(4) / Decimal(self.zoom)).normalize(), "e")


def _number(value: Any, field: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(field, f"must be a number of seconds, got {value!r}")
    if not lo <= value <= hi:
        raise SpecError(field, f"{value} is out of range: {lo:g} to {hi:g}")
    return float(value)


def _key(item: Any, field: str, decimal: Callable[[Any, str], str]) -> Key:
    if not isinstance(item, dict):
        raise SpecError(field, "must be a table {time = seconds, width = \"...\"}")
    for name in item:
        if name == "angle":
            raise SpecError(f"{field}.angle", "rotation is not available yet (a later version "
                            "keys the angle on this timeline)")
        if name not in KEY_FIELDS:
            close = difflib.get_close_matches(name, KEY_FIELDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecError(f"{field}.{name}", f"unknown key{hint} (allowed: {', '.join(KEY_FIELDS)})")
    if "time" not in item:
        raise SpecError(f"{field}.time", "is required (seconds from the video's start)")
    time = _number(item["time"], f"{field}.time", 0.0, MAX_TIME)
    if ("width" in item) == ("zoom" in item):
        raise SpecError(field, "give width (a decimal string) or zoom (width = 4 / zoom), one of them")
    name = "width" if "width" in item else "zoom"
    text = decimal(item[name], f"{field}.{name}")
    value = Fraction(text)
    if value <= 0:
        raise SpecError(f"{field}.{name}", f"{text} must be > 0")
    if (value if name == "width" else 4 / value) > 1000:
        raise SpecError(f"{field}.{name}", f"{text} is absurdly wide: width <= 1000")
    how = item.get("interpolation", "cubic")
    if how not in INTERPOLATIONS:
        raise SpecError(f"{field}.interpolation", f"{how!r} is not one of: {' | '.join(INTERPOLATIONS)}")
    return Key(time, text if name == "width" else None, text if name == "zoom" else None, how)


def parse_keys(value: Any, field: str, decimal: Callable[[Any, str], str]) -> tuple[Key, ...]:
    """``[[animation.keys]]``: at least one key, times strictly increasing. ``decimal``
    parses a decimal string (farm.spec's parser)."""
    if not isinstance(value, list) or not value:
        raise SpecError(field, "must be one or more [[animation.keys]] tables")
    keys = tuple(_key(item, f"{field}[{k}]", decimal) for k, item in enumerate(value))
    for k in range(1, len(keys)):
        if keys[k].time_exact <= keys[k - 1].time_exact:
            raise SpecError(f"{field}[{k}].time", f"{keys[k].time} must be after the key "
                            f"before it ({keys[k - 1].time})")
    return keys


def parse_duration(value: Any, field: str) -> float | str:
    """``animation.duration``: seconds (> 0), or ``"audio"``."""
    if value == "audio":
        return "audio"
    if isinstance(value, str):
        raise SpecError(field, f'must be seconds or "audio", got {value!r}')
    seconds = _number(value, field, 0.0, MAX_TIME)
    if seconds <= 0:
        raise SpecError(field, f"{value} must be > 0")
    return seconds


def _frames(spec: JobSpec, duration: float | str | None,
            probe: Callable[[str], float] | None) -> int:
    """The video's frames when animation.frames is not given."""
    fps, keys = spec.animation.fps, spec.animation.keys
    if duration == "audio":
        if spec.output.audio is None:
            raise SpecError("animation.duration", '"audio" needs a soundtrack: output.audio')
        if probe is None:
            from farm.encode.audio import track_seconds

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


def key_range(keys: tuple[Key, ...]) -> tuple[str, str]:
    """(widest, deepest) width of the keys, as decimal strings: the derived view.width."""
    widest = max(keys, key=Key.width_exact)
    deepest = min(keys, key=Key.width_exact)
    return widest.width_text(), deepest.width_text()


def complete(spec: JobSpec, given: dict[str, Any],
             probe: Callable[[str], float] | None = None) -> JobSpec:
    """The spec with its derived values: ``animation.frames`` from the duration or the
    keys, ``view.width`` from the keys. ``given``: ``{"frames": bool, "width": bool,
    "duration": value or None}``, what the job file said. ``probe(path)``: a
    soundtrack's length in seconds (default: farm.encode.audio.track_seconds)."""
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
    return dataclasses.replace(spec, animation=animation, view=view)
