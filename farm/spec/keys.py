"""The film's timeline in the job spec: ``[[animation.keys]]``, ``animation.duration``.

A key is a waypoint: a time in seconds from the video's start and the view's width
then (``width``, a decimal string, or ``zoom``, with ``width = 4 / zoom``), and how the
zoom goes on to the next key (``interpolation``: ``"cubic"``, monotone in log width;
``"linear"`` in log width, a constant zoom speed; ``"hold"``, the width stays until
the next key). How a frame's width follows the keys is plan code
(:mod:`farm.plan.curve`); here the keys are parsed and checked, and their rules say
how the spec's derived values are filled in (:func:`farm.spec.derived.complete`):

* the video's length: ``animation.frames``, or ``animation.duration`` in seconds
  (``frames = round(duration * fps)``), or ``"audio"`` (the soundtrack's length,
  ``output.audio``), or with keys and neither, up to the last key
  (``frames = round(t_last * fps) + 1``, so the last frame shows the last key);
* with keys, ``view.width`` is derived: ``[widest, deepest]`` of the keys (the range the
  zoom covers; it must not be given otherwise).

The canonical text (:func:`farm.spec.canonical_text`) holds the resolved frames and
the keys, never ``duration``: a store's spec needs no audio file to be rebuilt, and
MPI workers and resumes compute the same widths from it.

Rotation: each frame turns the view by an angle (degrees, counter-clockwise: the
picture turns clockwise on the screen as the angle grows), from one of

* ``view.angle`` (degrees, default 0) plus ``animation.turn`` (degrees per second,
  default 0): frame ``k`` at ``view.angle + turn * k / fps`` (a constant turning speed);
* ``angle`` in the keys (degrees at that time), on the same timeline and with the same
  per-segment interpolation as the widths, in plain degrees (farm/plan/curve.py):
  every key gives one when one does, and ``view.angle`` and ``animation.turn`` are
  then left out.

Angles are numbers read as the shortest decimal that gives them (as key times are):
``angle = 0.1`` is exactly 1/10 of a degree. The canonical text leaves ``view.angle``,
``animation.turn`` and keys' ``angle`` out when they are not given (0, 0, none), so
jobs without rotation keep their text and hash.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

from farm.errors import SpecError

INTERPOLATIONS = ("cubic", "linear", "hold")
KEY_FIELDS = ("time", "width", "zoom", "interpolation", "angle")
MAX_TIME = 1e6  # seconds (11.6 days of video)
MAX_FRAMES = 100_000  # farm.spec: animation.frames
MAX_ANGLE = 1e9  # degrees (|angle|; turns beyond a full one are reduced exactly)
MAX_TURN = 1e6  # degrees per second (|animation.turn|)


@dataclass(frozen=True)
class Key:
    """A waypoint of the zoom (one ``[[animation.keys]]`` table)."""

    time: float  # seconds from the start; read as the decimal it was written as (time_exact)
    width: str | None = None  # decimal string, complex-plane units across the image
    zoom: str | None = None  # decimal string: the width is 4 / zoom
    interpolation: str = "cubic"  # from this key to the next: cubic | linear | hold
    angle: float | None = None  # degrees at this time (counter-clockwise); None: not keyed

    @property
    def time_exact(self) -> Fraction:
        """The time as the shortest decimal that gives the float (0.1 is 1/10): what
        the user wrote, so a key at 0.1 s falls exactly on frame 3 at 30 fps."""
        return Fraction(repr(self.time))

    @property
    def angle_exact(self) -> Fraction:
        """The angle as the shortest decimal that gives the float (degrees)."""
        assert self.angle is not None
        return exact(self.angle)

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


def exact(value: float) -> Fraction:
    """A float as the shortest decimal that gives it, exactly (0.1 is 1/10)."""
    return Fraction(repr(float(value)))


def _number(value: Any, field: str, lo: float, hi: float, unit: str = "seconds") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(field, f"must be a number of {unit}, got {value!r}")
    if not lo <= value <= hi:
        raise SpecError(field, f"{value} is out of range: {lo:g} to {hi:g}")
    return float(value)


def _key(item: Any, field: str, decimal: Callable[[Any, str], str]) -> Key:
    if not isinstance(item, dict):
        raise SpecError(field, "must be a table {time = seconds, width = \"...\"}")
    for name in item:
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
    angle = None
    if "angle" in item:
        angle = _number(item["angle"], f"{field}.angle", -MAX_ANGLE, MAX_ANGLE, "degrees")
    return Key(time, text if name == "width" else None, text if name == "zoom" else None, how, angle)


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
    angled = [key.angle is not None for key in keys]
    if any(angled) and not all(angled):
        k = angled.index(False)
        raise SpecError(f"{field}[{k}].angle", "is required: when one key gives an angle, every "
                        f"key does (key {angled.index(True)} gives one)")
    return keys


def parse_angle(value: Any, field: str) -> float:
    """``view.angle``: degrees, counter-clockwise."""
    return _number(value, field, -MAX_ANGLE, MAX_ANGLE, "degrees")


def parse_turn(value: Any, field: str) -> float:
    """``animation.turn``: degrees per second (a constant turning speed)."""
    return _number(value, field, -MAX_TURN, MAX_TURN, "degrees per second")


def keyed_angles(keys: tuple[Key, ...]) -> bool:
    """Whether the keys carry the angle (every key then has one)."""
    return bool(keys) and keys[0].angle is not None


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


def key_range(keys: tuple[Key, ...]) -> tuple[str, str]:
    """(widest, deepest) width of the keys, as decimal strings: the derived view.width."""
    widest = max(keys, key=Key.width_exact)
    deepest = min(keys, key=Key.width_exact)
    return widest.width_text(), deepest.width_text()
