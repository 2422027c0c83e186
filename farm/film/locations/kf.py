"""Kalles Fraktaler 2+ parameters: ``.kfr`` locations, ``.kfp`` palettes, and the same
text inside KF's PNG comments and EXR headers.

The format: one setting a line, ``Key: value`` (KF writes CR LF line ends). What the
farm reads:

* ``Re``, ``Im``: the view's centre, decimal strings; ``Zoom``: the view's half height
  is ``2 / Zoom`` (so its height is ``4 / Zoom``), whatever the image's width;
* ``Iterations``: KF's iteration limit;
* ``RotateAngle`` (degrees) and ``ImagPointsUp`` (0 or 1, default 0): the view's
  rotation and orientation, imported as :mod:`farm.film.locations.model` explains
  (``view.angle = -RotateAngle``; without ImagPointsUp the job centres on ``Re - Im i``,
  whose view is KF's picture);
* ``Colors``: the palette, comma-separated integers in B,G,R triplets (Windows' byte
  order), spread evenly over one cycle; ``InteriorColor`` likewise (the farm's
  interior is black).

Settings that change the picture's geometry or formula and have no farm counterpart
(another ``FractalType`` or ``Power``, skew through ``StretchAngle`` and
``StretchAmount`` or a ``Ratio`` other than 360, the old ``Rotate`` that KF itself
ignores since 2.15.1, seeds and factors of other formulas, hybrid formulas) are named
in one note each when they differ from KF's defaults; KF's colouring settings are
named together in one note; anything else (render tuning such as ``Period`` or
``MaxReferences``) in one more.
"""

from __future__ import annotations

import math
import re

from farm.film.locations.model import KF, RGB, Invalid, Location, decimal_text, positive_zoom

_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*:\s?(.*?)\s*$")

# key -> (KF's default, what a different value means). Geometry and formula: not honoured.
GEOMETRY: dict[str, tuple[float, str]] = {
    "FractalType": (0, "another formula than the Mandelbrot set (FractalType 0)"),
    "Power": (2, "another power than z^2 + c"),
    "Rotate": (0, "an older KF's rotation, which KF ignores since 2.15.1 (RotateAngle is "
                  "today's): not imported"),
    "StretchAngle": (0, "skew (non-square pixels) is not available"),
    "StretchAmount": (0, "skew (non-square pixels) is not available"),
    "Ratio": (360, "a stretched view (Ratio other than 360: non-square pixels) is not available"),
    "SeedR": (0, "a seed other than 0 (another formula) is not available"),
    "SeedI": (0, "a seed other than 0 (another formula) is not available"),
    "FactorAR": (1, "formula factors are not available"),
    "FactorAI": (0, "formula factors are not available"),
    "real": (1, "a changed real part of the formula (conjugate, ...) is not available"),
    "imag": (1, "a changed imaginary part of the formula (conjugate, ...) is not available"),
    "UseHybridFormula": (0, "hybrid formulas are not available"),
}
COLOURING = ("IterDiv", "SmoothMethod", "ColorMethod", "Differences", "ColorOffset",
             "ColorPhaseStrength", "Smooth", "MultiColor", "BlendMC", "MultiColors", "Slopes",
             "SlopePower", "SlopeRatio", "SlopeAngle", "InteriorColor", "Texture", "TextureMerge",
             "TexturePower", "TextureRatio", "TextureFile", "UseColorIterations", "ColorIterations",
             "InfiniteWaves", "InteriorChecker", "Flat", "InverseTransition", "Blend")
HONOURED = ("Re", "Im", "Zoom", "Iterations", "Colors", "RotateAngle", "ImagPointsUp", "ImageWidth",
            "ImageHeight")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no", "")


def settings(text: str) -> dict[str, str]:
    """The ``Key: value`` lines of a KF text (the first of a repeated key wins, as in KF)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2)
    return out


def looks_like(text: str) -> bool:
    """Whether ``text`` is KF parameters (a location: Re, Im and Zoom; or a palette: Colors)."""
    keys = settings(text)
    return {"Re", "Im", "Zoom"} <= keys.keys() or "Colors" in keys


def triplets(value: str, key: str) -> tuple[RGB, ...]:
    """``B,G,R,B,G,R,...`` (a trailing comma allowed) as RGB colours."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise Invalid(f"{key} is not a list of integers") from None
    if len(numbers) % 3 or any(not 0 <= n <= 255 for n in numbers):
        raise Invalid(f"{key} has {len(numbers)} values: B,G,R triplets of 0..255 expected")
    return tuple((numbers[k + 2], numbers[k + 1], numbers[k]) for k in range(0, len(numbers), 3))


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _size(keys: dict[str, str]) -> tuple[int, int] | None:
    """The image size KF saved (ImageWidth, ImageHeight), or None."""
    try:
        size = (int(keys["ImageWidth"]), int(keys["ImageHeight"]))
    except (KeyError, ValueError):
        return None
    return size if min(size) > 0 else None


def _notes(keys: dict[str, str]) -> list[str]:
    notes = []
    for key, (default, meaning) in GEOMETRY.items():
        if key in keys and _number(keys[key]) not in (None, default):
            notes.append(f"{key}: {keys[key]}: {meaning}")
        elif key in keys and _number(keys[key]) is None and keys[key]:
            notes.append(f"{key}: {keys[key]!r}: {meaning}")
    colouring = [k for k in COLOURING if k in keys]
    if colouring:
        notes.append(f"KF's colouring settings ({', '.join(colouring)}) are not reproduced: the "
                     "farm colours with its [color] section and the imported palette")
    if "RotateAngle" in keys and _number(keys["RotateAngle"]) is None:
        notes.append(f"RotateAngle: {keys['RotateAngle']!r} is not a number: the view is imported "
                     "unrotated")
    if ("ImageWidth" in keys or "ImageHeight" in keys) and _size(keys) is None:
        notes.append(f"ImageWidth, ImageHeight: {keys.get('ImageWidth')!r}, {keys.get('ImageHeight')!r} "
                     "are not two positive integers: the job takes --size, else 1920x1080")
    up = keys.get("ImagPointsUp", "0").strip().lower()
    if up not in TRUE + FALSE:
        notes.append(f"ImagPointsUp: {keys['ImagPointsUp']!r} is not 0 or 1: taken as 0 (KF's "
                     "default, the imaginary axis down)")
    other = [k for k in keys if k not in GEOMETRY and k not in COLOURING and k not in HONOURED]
    if other:
        notes.append(f"ignored (no effect on the farm's picture): {', '.join(other)}")
    return notes


def parse(text: str) -> Location:
    """A KF parameter text as a :class:`Location` (a palette alone when Re, Im and Zoom
    are missing). Invalid when it is neither."""
    keys = settings(text)
    has_view = {"Re", "Im", "Zoom"} <= keys.keys()
    if not has_view and "Colors" not in keys:
        raise Invalid("it has no Re, Im and Zoom (nor Colors)")
    colours = triplets(keys["Colors"], "Colors") if "Colors" in keys else ()
    iterations = None
    if "Iterations" in keys:
        try:
            iterations = int(float(keys["Iterations"]))
        except ValueError:
            raise Invalid(f"Iterations is {keys['Iterations']!r}, not a number") from None
    rotate = _number(keys.get("RotateAngle", "0")) or 0.0
    if not math.isfinite(rotate):
        raise Invalid(f"RotateAngle is {keys['RotateAngle']!r}, not a finite number")
    up = keys.get("ImagPointsUp", "0").strip().lower() in TRUE
    return Location(
        KF,
        decimal_text(keys["Re"], "Re") if has_view else None,
        decimal_text(keys["Im"], "Im") if has_view else None,
        positive_zoom(keys["Zoom"], "Zoom") if has_view else None,
        iterations=iterations, colours=colours, angle=-rotate if rotate else 0.0,
        conjugate=has_view and not up, size=_size(keys), notes=tuple(_notes(keys)))
