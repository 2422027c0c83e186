"""Fraktaler-3 parameters: its TOML (``.f3.toml``), and the same TOML inside F3's EXR
headers and PNG comments.

What the farm reads (F3 writes only the keys that differ from its defaults):

* ``location.real``, ``location.imag``: the view's centre (strings, maybe broken
  across lines); ``location.zoom``: zoom 1 shows the imaginary axis from -2 to +2, so
  the view's height is ``4 / zoom`` (F3's pixel spacing is ``4 / (zoom H)``);
* ``bailout.iterations`` (default 1024), ``bailout.escape_radius`` (default 625);
* ``image.width``, ``image.height`` (default 1024 x 576);
* ``transform.rotate`` (degrees): ``view.angle``, the same convention
  (:mod:`farm.film.locations.model`).

Named in one note each when they differ from F3's defaults: another formula (the
``[[formula]]`` blocks: one block with power 2 and no abs/neg is the Mandelbrot set),
``transform.reflect``, ``transform.stretch_angle`` and
``transform.stretch_amount`` (skew), ``transform.exponential_map``, an escape radius
outside the farm's 2..128, ``image.subframes`` (anti-aliasing); settings that do not
change the picture (reference, algorithm, OpenCL, render, newton, colour) in one note.
"""

from __future__ import annotations

import math
import tomllib
from typing import Any

from farm.film.locations.model import F3, Invalid, Location, decimal_text, positive_zoom

ESCAPE_RANGE = (2.0, 128.0)  # farm.spec.ESCAPE_RADIUS_RANGE
TRANSFORM: dict[str, tuple[Any, str]] = {
    "reflect": (False, "reflection is not available"),
    "stretch_angle": (0.0, "skew is not available"),
    "stretch_amount": (0.0, "skew is not available"),
    "exponential_map": (False, "the farm makes exponential maps with animation.method = "
                               "\"expmap\"; the location is imported as a flat view"),
}
QUIET = ("program", "version", "reference", "algorithm", "opencl", "render", "newton", "colour")


def looks_like(data: dict[str, Any]) -> bool:
    """Whether a parsed TOML document is F3 parameters (it has a [location] table, or
    says it is F3's), not a farm job."""
    return "view" not in data and (isinstance(data.get("location"), dict)
                                   or data.get("program") == "fraktaler-3")


def _is_mandelbrot(formula: Any) -> bool:
    if formula is None:
        return True
    if isinstance(formula, dict):  # older versions: formula.name
        return str(formula.get("name", "mandelbrot")).lower() in ("mandelbrot", "")
    if not isinstance(formula, list) or len(formula) != 1 or not isinstance(formula[0], dict):
        return False
    f = formula[0]
    if "opcodes" in f:
        return list(f["opcodes"]) in (["sqr", "add"], ["sqr"])
    flags = any(bool(f.get(k, False)) for k in ("abs_x", "abs_y", "neg_x", "neg_y"))
    return not flags and f.get("power", 2) == 2


def _table(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise Invalid(f"{name} is not a table")
    return value


def _notes(data: dict[str, Any], escape: float) -> list[str]:
    notes = []
    if not _is_mandelbrot(data.get("formula")):
        notes.append("formula: another formula than the Mandelbrot set z^2 + c is not available")
    for key, (default, meaning) in TRANSFORM.items():
        value = _table(data, "transform").get(key, default)
        if value != default:
            notes.append(f"transform.{key} = {value!r}: {meaning}")
    if "escape_radius" in _table(data, "bailout") and not ESCAPE_RANGE[0] <= escape <= ESCAPE_RANGE[1]:
        notes.append(f"bailout.escape_radius = {escape:g}: the farm's escape radius is 2..128; "
                     "the job uses 2 (escape times shift by about a count, the picture is the same)")
    subframes = _table(data, "image").get("subframes", 1)
    if subframes != 1:
        notes.append(f"image.subframes = {subframes}: anti-aliasing samples; set image.samples "
                     "in the job for the farm's own")
    quiet = [k for k in data if k in QUIET and k not in ("program", "version")]
    tuning = [f"bailout.{k}" for k in _table(data, "bailout") if k not in ("iterations", "escape_radius")]
    tuning += [f"image.{k}" for k in _table(data, "image") if k not in ("width", "height", "subframes")]
    quiet += [k for k in data if k not in QUIET and k not in ("location", "bailout", "image",
                                                               "transform", "formula")]
    if quiet or tuning:
        notes.append(f"ignored (no effect on the farm's picture): {', '.join(quiet + tuning)}")
    return notes


def parse_data(data: dict[str, Any]) -> Location:
    """A parsed F3 TOML document as a :class:`Location`."""
    location = _table(data, "location")
    for key in ("real", "imag", "zoom"):
        if key not in location:
            raise Invalid(f"location.{key} is missing")
    bailout, image = _table(data, "bailout"), _table(data, "image")
    iterations = bailout.get("iterations", 1024)
    escape = bailout.get("escape_radius", 625.0)
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise Invalid(f"bailout.iterations is {iterations!r}, not a positive integer")
    if isinstance(escape, bool) or not isinstance(escape, int | float) or escape <= 0:
        raise Invalid(f"bailout.escape_radius is {escape!r}, not a positive number")
    size = (image.get("width", 1024), image.get("height", 576))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size):
        raise Invalid(f"image.width, image.height are {size!r}, not positive integers")
    rotate = _table(data, "transform").get("rotate", 0.0)
    if isinstance(rotate, bool) or not isinstance(rotate, int | float) or not math.isfinite(rotate):
        raise Invalid(f"transform.rotate is {rotate!r}, not a number of degrees")
    return Location(
        F3, decimal_text(location["real"], "location.real"),
        decimal_text(location["imag"], "location.imag"),
        positive_zoom(location["zoom"], "location.zoom"),
        iterations=iterations,
        escape_radius=float(escape) if ESCAPE_RANGE[0] <= escape <= ESCAPE_RANGE[1] else None,
        size=(int(size[0]), int(size[1])),
        angle=float(rotate),
        notes=tuple(_notes(data, float(escape))))


def parse(text: str) -> Location:
    """F3 TOML text as a :class:`Location`; Invalid when it is not F3's."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise Invalid(f"it is not TOML ({err})") from None
    if not looks_like(data):
        raise Invalid("it has no [location] table")
    return parse_data(data)
