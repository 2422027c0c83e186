"""The rules of a job file's keys: one parser a kind of value, the bounds and choices
they check, and the table of every section and key (:data:`SCHEMA`), with its parser
and default, in the canonical order.

Each parser takes ``(value, field)`` and returns the parsed value or raises a
:class:`~farm.errors.SpecError` naming ``field`` (``view.width``) and saying what is
allowed. Decimal strings are checked as exact Decimals, never through a Python float.
A gradient file named by ``color.palette`` is read here (:func:`resolve_palette`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from farm.errors import SpecError
from farm.spec.keys import Key, parse_angle, parse_duration, parse_keys, parse_turn
from farm.spec.palettes import FILE_SUFFIXES, STOPS, Gradient, gradient_table, read_gradient

PALETTES = tuple(STOPS)
COLOR_METHODS = ("shade", "histogram", "smooth", "distance")
ENCODE_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow",
                  "slower", "veryslow")
CODECS = ("auto", "libx264", "h264_nvenc")
STORE_CODECS = ("zstd", "none")  # farm/store/codec.py: CODECS

PRECISIONS = ("auto", "f64", "fp128", "quad-single", "perturb")
METHODS = ("frames", "expmap")  # animation.method: every frame rendered, or exponential-map strips
MAX_ITER_LIMIT = 10_000_000  # histogram rows are max_iter+1 int64 bins
MAX_SIDE = 32768
MAX_PIXELS = 1 << 28
MAX_SAMPLES = 64  # farm/plan/samples.py
# fp128 holds 32 integer bits: |z|^2 of the step after escape must fit (see kernels/fp128.cl).
ESCAPE_RADIUS_RANGE = (2.0, 128.0)
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _decimal(value: Any, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        hint = " (write it in quotes so no digit is lost)" if isinstance(value, float | int) else ""
        raise SpecError(field, f"must be a decimal number in a string, got {value!r}{hint}")
    text = value.strip()
    if not _DECIMAL.fullmatch(text):
        raise SpecError(field, f"{value!r} is not a decimal number (like \"-0.75\" or \"1e-20\")")
    return text


def _exact(text: str, field: str) -> Decimal:
    """A checked decimal string as an exact Decimal, for range checks. Decimal parses
    any number of digits (Fraction goes through int(), which Python limits to 4300
    digits, and a deep centre has as many digits as its depth)."""
    try:
        return Decimal(text)
    except InvalidOperation:
        raise SpecError(field, f"{text[:40]}: its exponent is out of range") from None


def _center(value: Any, field: str) -> tuple[str, str]:
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(field, "must be two decimal strings [real, imaginary]")
    parts = tuple(_decimal(v, f"{field}[{k}]") for k, v in enumerate(value))
    for k, part in enumerate(parts):
        if abs(_exact(part, f"{field}[{k}]")) > 1000:
            raise SpecError(f"{field}[{k}]", f"{part} is too far out: |coordinate| <= 1000")
    return parts  # type: ignore[return-value]


def _widths(value: Any, field: str) -> tuple[str, str]:
    if isinstance(value, str):
        value = [value, value]
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(field, "must be [first, last] as decimal strings (or one string)")
    parts = tuple(_decimal(v, f"{field}[{k}]") for k, v in enumerate(value))
    for k, part in enumerate(parts):
        w = _exact(part, f"{field}[{k}]")
        if w <= 0:
            raise SpecError(f"{field}[{k}]", f"{part} must be > 0")
        if w > 1000:
            raise SpecError(f"{field}[{k}]", f"{part} is absurdly wide: width <= 1000")
    return parts  # type: ignore[return-value]


def _int_in(lo: int, hi: int) -> Callable[[Any, str], int]:
    def parse(value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(field, f"must be an integer from {lo} to {hi}, got {value!r}")
        if not lo <= value <= hi:
            raise SpecError(field, f"{value} is out of range: {lo} to {hi}")
        return value

    return parse


def _float_in(lo: float, hi: float) -> Callable[[Any, str], float]:
    def parse(value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(field, f"must be a number from {lo:g} to {hi:g}, got {value!r}")
        if not lo <= value <= hi:
            raise SpecError(field, f"{value} is out of range: {lo:g} to {hi:g}")
        return float(value)

    return parse


def _pair(item: Callable[[Any, str], int], what: str) -> Callable[[Any, str], tuple[int, int]]:
    def parse(value: Any, field: str) -> tuple[int, int]:
        if not isinstance(value, list) or len(value) != 2:
            raise SpecError(field, f"must be {what}")
        return (item(value[0], f"{field}[0]"), item(value[1], f"{field}[1]"))

    return parse


def _size(value: Any, field: str) -> tuple[int, int]:
    w, h = _pair(_int_in(1, MAX_SIDE), "[width, height] in pixels")(value, field)
    if w * h > MAX_PIXELS:
        raise SpecError(field, f"{w}x{h} is {w * h} pixels; at most {MAX_PIXELS} per frame")
    return (w, h)


def _tile(value: Any, field: str) -> tuple[int, int] | str:
    if value == "auto":
        return "auto"
    if isinstance(value, str):
        raise SpecError(field, f'must be "auto" or [width, height] in pixels, got {value!r}')
    return _pair(_int_in(8, 4096), '"auto" or [width, height] in pixels')(value, field)


def _max_iter(value: Any, field: str) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, str):
        raise SpecError(field, f'must be "auto" or an integer, got {value!r}')
    return _int_in(1, MAX_ITER_LIMIT)(value, field)


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(field, f"must be true or false, got {value!r}")
    return value


def _samples(value: Any, field: str) -> int:
    n = _int_in(1, MAX_SAMPLES)(value, field)
    if n == 2:
        raise SpecError(field, f"2 is not allowed: two samples cannot be centred on the pixel; "
                               f"use 1, or 3 to {MAX_SAMPLES} (4, 9, 16 are typical)")
    return n


def _choice(options: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, field: str) -> str:
        if value not in options:
            allowed = " | ".join(options)
            raise SpecError(field, f"{value!r} is not one of: {allowed}")
        return str(value)

    return parse


def _palette(value: Any, field: str) -> str | Gradient:
    """A built-in name, a Gradient (read by :func:`resolve_palette`) or its table; a
    file name that was not read (a spec parsed without a job file's folder, as stores
    made before gradients were kept) stays a path, read when colouring."""
    if isinstance(value, Gradient):
        return value
    if isinstance(value, dict):
        return gradient_table(value, field)
    if isinstance(value, str) and (value in PALETTES or value.lower().endswith(FILE_SUFFIXES)):
        return value
    raise SpecError(field, f"{value!r} is not a built-in palette ({' | '.join(PALETTES)}) "
                    f"nor a gradient file ending {' or '.join(FILE_SUFFIXES)}")


def resolve_palette(value: Any, base: str | os.PathLike[str]) -> Any:
    """``color.palette`` as given, with a gradient file name (relative to the folder
    ``base``) read into a Gradient; SpecError naming ``color.palette``."""
    if isinstance(value, str) and value.lower().endswith(FILE_SUFFIXES):
        return read_gradient(Path(base) / value, "color.palette")
    return value


def _light(value: Any, field: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(field, "must be [azimuth, elevation] in degrees")
    return (_float_in(0.0, 360.0)(value[0], f"{field}[0]"), _float_in(1.0, 90.0)(value[1], f"{field}[1]"))


def _path(suffixes: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise SpecError(field, "must be a file path in a string")
        if not value.endswith(suffixes):
            raise SpecError(field, f"{value!r} must end with {' or '.join(suffixes)}")
        return value

    return parse


REQUIRED = object()
DERIVED = object()  # not required: derived from other keys (farm.spec.derived.complete)
OPTIONAL = object()  # None unless given
# Keys parsed and checked, then resolved into others (never in the canonical text).
RESOLVED = (("animation", "duration"),)
# Keys left out of the canonical text when they have their default (so that jobs
# without them keep their text and hash, and existing stores match their jobs).
OMITTED_DEFAULTS = {("animation", "keys"): (), ("output", "audio"): None,
                    ("view", "angle"): 0.0, ("animation", "turn"): 0.0,
                    ("output", "compression"): "zstd", ("output", "compression_level"): 1}


def _keys(value: Any, field: str) -> tuple[Key, ...]:
    return parse_keys(value, field, _decimal)


def _audio(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field, "must be a file path in a string (any format ffmpeg reads)")
    return value


# section -> key -> (parser, default). Order here is the canonical order.
SCHEMA: dict[str, dict[str, tuple[Callable[[Any, str], Any], Any]]] = {
    "view": {"center": (_center, REQUIRED), "width": (_widths, DERIVED), "angle": (parse_angle, 0.0)},
    "image": {"size": (_size, REQUIRED), "samples": (_samples, 1)},
    "animation": {
        "frames": (_int_in(1, 100_000), DERIVED),
        "fps": (_int_in(1, 240), 30),
        "method": (_choice(METHODS), "frames"),
        "oversample": (_float_in(0.5, 4.0), 1.0),
        "duration": (parse_duration, OPTIONAL),
        "keys": (_keys, ()),
        "turn": (parse_turn, 0.0),
    },
    "iterations": {
        "max": (_max_iter, "auto"),
        "escape_radius": (_float_in(*ESCAPE_RADIUS_RANGE), 2.0),
    },
    "render": {
        "precision": (_choice(PRECISIONS), "auto"),
        "tile": (_tile, "auto"),
        "distance": (_bool, False),
    },
    "color": {
        "method": (_choice(COLOR_METHODS), "shade"),
        "palette": (_palette, "classic"),
        "cycles": (_float_in(0.01, 1000.0), 3.0),
        "smoothing": (_int_in(0, 1000), 4),
        "density": (_float_in(0.01, 1000.0), 1.0),
        "line_width": (_float_in(0.0, 100.0), 1.0),
        "light": (_light, (135.0, 45.0)),
    },
    "output": {
        "store": (_path((".h5", ".hdf5")), None),
        "video": (_path((".mp4",)), None),
        "crf": (_int_in(0, 51), 18),
        "preset": (_choice(ENCODE_PRESETS), "faster"),
        "codec": (_choice(CODECS), "auto"),
        "compression": (_choice(STORE_CODECS), "zstd"),
        "compression_level": (_int_in(1, 19), 1),
        "audio": (_audio, OPTIONAL),
    },
}
