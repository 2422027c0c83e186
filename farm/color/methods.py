"""Colour methods: one function per method, one signature, numpy (the reference).

Every method is ``method(raw, stats, style) -> uint8 (H, W, 3)`` for a frame of one
sample per pixel (:class:`~farm.color.raw.RawFrame` with (H, W) arrays, a band of rows or
the whole frame); :func:`farm.color.render.colour` applies it to every sample of an
anti-aliased frame and to row bands on threads. Interior pixels (count 0) take
``style.interior`` in every method; every escaped pixel takes a palette colour.

``histogram``  palette position ``t = cycles * cdf(mu)`` (mod 1), ``cdf`` the
               frame's smoothed CDF interpolated at the escape time ``mu = n + d``:
               equalised, the default of older versions.
``smooth``     ``t = density * ln(1 + max(mu - mu_low, 0))`` (mod 1): smooth iteration
               on a log scale, ``density`` palette cycles per e-fold, measured from
               ``mu_low`` (the frame's 0.1% escape-time quantile, smoothed like the
               CDF), so the far field keeps its colour at every depth.
``distance``   the histogram colours, with the set's filaments drawn over them as
               lines ``line_width`` output pixels wide (the same width at every
               depth): a pixel at distance ``D`` pixels from the set is covered by
               ``clip(line_width/2 + 0.5 - D, 0, 1)`` (a one-pixel soft edge).
``shade``      the histogram colours lit from ``light`` (azimuth, elevation in
               degrees; azimuth 0 = light from the right, 90 = from the top): a
               relief rising towards the set, steep within a few pixels of it and
               flat in the far field, its slope direction the distance estimate's
               (:func:`shading`): shadowed slopes darker, lit ones towards white.
               Filaments stand out at every depth and in every palette, also dark
               ones on dark ground; dense regions keep their colours. The default.

``distance`` and ``shade`` use the frame's distance estimate when the store has one,
and otherwise one estimated from the smooth escape time
(:func:`farm.color.distance.estimated_distance`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.color.distance import line_cover, shading, slopes
from farm.color.raw import RawFrame
from farm.color.relief import palette_entries, shade_estimated
from farm.color.stats import FrameStats
from farm.spec.palettes import LUT_SIZE, lut

SHADE_RELIEF = 2.0  # shading relief: height per e-fold of distance, in pixels
SHADE_GLOSS = 0.5  # how far lit slopes go towards white (at the brightest, 20%)


@dataclass(frozen=True)
class Style:
    """Colour settings resolved for colouring (palette loaded, angles in radians)."""

    method: str
    lut: np.ndarray  # uint8 (LUT_SIZE, 3)
    cycles: float = 3.0
    density: float = 1.0
    line_width: float = 1.0  # output pixels
    light: tuple[float, float] = (math.radians(135.0), math.radians(45.0))  # azimuth, elevation
    relief: float = SHADE_RELIEF
    interior: tuple[int, int, int] = (0, 0, 0)
    line: tuple[int, int, int] = (0, 0, 0)

    @classmethod
    def from_settings(cls, color: Any) -> Style:
        """From a :class:`farm.spec.Color` (the ``[color]`` section)."""
        az, el = color.light
        return cls(method=color.method, lut=lut(color.palette), cycles=color.cycles,
                   density=color.density, line_width=color.line_width,
                   light=(math.radians(az), math.radians(el)))

    @property
    def table(self) -> np.ndarray:
        """uint8 (LUT_SIZE + 1, 3): the palette, then the interior colour at ``INTERIOR``."""
        return _tables(self.lut, self.interior)[0]

    @property
    def table_float(self) -> np.ndarray:
        """:attr:`table` as float32."""
        return _tables(self.lut, self.interior)[1]

    @property
    def planes(self) -> np.ndarray:
        """:attr:`table_float` by channel: float32 (3, LUT_SIZE + 1), C-contiguous."""
        return _tables(self.lut, self.interior)[2]

    @property
    def light_vector(self) -> tuple[float, float, float]:
        """Unit vector towards the light: x right, y up, z towards the viewer."""
        az, el = self.light
        return math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)

    @property
    def halo(self) -> int:
        """Rows of context a band needs on each side (the estimated distance's differences)."""
        return 1 if self.method in ("distance", "shade") else 0


# ---------------------------------------------------------------------------- helpers


INTERIOR = LUT_SIZE  # the table entry of interior pixels
_TABLES: dict[tuple[bytes, tuple[int, int, int]], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _tables(palette: np.ndarray, interior: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = (palette.tobytes(), interior)
    if key not in _TABLES:
        table = np.concatenate([palette, np.array([interior], np.uint8)])
        as_float = table.astype(np.float32)
        _TABLES[key] = (table, as_float, np.ascontiguousarray(as_float.T))
    return _TABLES[key]


def _interior(idx: np.ndarray, raw: RawFrame) -> np.ndarray:
    """Point interior pixels of a palette index array at the interior colour."""
    np.copyto(idx, INTERIOR, where=raw.iterations == 0)
    return idx


def palette_index(t: np.ndarray) -> np.ndarray:
    """Palette entry (intp) at position ``t`` (any real, taken mod 1)."""
    idx = (t - np.floor(t)) * LUT_SIZE
    return idx.astype(np.intp) & (LUT_SIZE - 1)


def histogram_index(raw: RawFrame, stats: FrameStats, style: Style) -> np.ndarray:
    """Table entry (intp (H, W)) of each pixel by the histogram method:
    ``floor(cycles * cdf(mu) * LUT_SIZE) mod LUT_SIZE``, ``INTERIOR`` for interior
    pixels, with the smoothed CDF
    interpolated linearly at ``mu = n + d`` (clipped to the table). ``floor(mu)`` and
    the offset inside the step are taken from ``n`` and ``d`` apart (exact in int64 and
    float32), the table is scaled once per frame."""
    scaled = stats.positions(style.cycles)[0]
    top = len(scaled) - 1
    whole = np.floor(raw.fraction)
    x = raw.fraction - whole  # offset of mu inside [i, i + 1], float32
    i = raw.iterations.astype(np.intp)
    i += whole.astype(np.intp)  # floor(mu)
    np.maximum(i, 0, out=i)
    high = i >= top  # mu at or past the table's end: its last value
    if high.any():
        i[high], x[high] = top - 1, 1.0
    pos = np.take(scaled, i)
    i += 1
    pos += (np.take(scaled, i) - pos) * x
    return _interior(pos.astype(np.intp) & (LUT_SIZE - 1), raw)


# ---------------------------------------------------------------------------- methods


def histogram(raw: RawFrame, stats: FrameStats, style: Style) -> np.ndarray:
    # histogram_index's entries in fewer passes (farm.color.relief.positions)
    return np.take(style.table, palette_entries(raw, stats, style.cycles, INTERIOR), axis=0)


def smooth(raw: RawFrame, stats: FrameStats, style: Style) -> np.ndarray:
    v = raw.escape_time()
    v -= stats.mu_low
    np.maximum(v, 0.0, out=v)
    t = np.log1p(v, out=v)
    t *= style.density
    return np.take(style.table, _interior(palette_index(t), raw), axis=0)


def distance(raw: RawFrame, stats: FrameStats, style: Style) -> np.ndarray:
    out = np.take(style.table_float, histogram_index(raw, stats, style), axis=0)
    cover = line_cover(slopes(raw)[0], style.line_width)
    np.putmask(cover, raw.iterations == 0, 0.0)  # interior keeps its colour
    out += (np.asarray(style.line, np.float32) - out) * cover[..., None]
    return np.rint(out, out=out).astype(np.uint8)


def shade(raw: RawFrame, stats: FrameStats, style: Style) -> np.ndarray:
    if raw.distance is None:  # the same colours in a third of the passes
        return shade_estimated(raw, stats, style.planes, INTERIOR, style.cycles, style.light_vector,
                               style.relief, SHADE_GLOSS)
    return shade_reference(raw, stats, style)


def shade_reference(raw: RawFrame, stats: FrameStats, style: Style) -> np.ndarray:
    """``shade`` as the composition of its parts (palette entry, slopes, light, blend):
    what :func:`farm.color.relief.shade_estimated` is tested against."""
    out = np.take(style.table_float, histogram_index(raw, stats, style), axis=0)
    light = shading(slopes(raw), style.light_vector, style.relief)
    # shadowed (light < 1): darker; lit beyond flat ground: towards white by
    # g = (light - 1) * SHADE_GLOSS, a sheen that shows dark filaments on dark ground.
    # c * min(light, 1) + (255 - c) * g, written as c * a + 255 g (never outside 0..255)
    g = np.maximum(light - 1.0, 0.0)
    g *= SHADE_GLOSS
    a = np.minimum(light, 1.0)
    a -= g
    inside = raw.iterations == 0  # interior keeps its colour: a = 1, g = 0
    np.putmask(a, inside, 1.0)
    np.putmask(g, inside, 0.0)
    out *= a[..., None]
    g *= 255.0
    out += g[..., None]
    return np.rint(out, out=out).astype(np.uint8)


METHODS: dict[str, Callable[[RawFrame, FrameStats, Style], np.ndarray]] = {
    "histogram": histogram, "smooth": smooth, "distance": distance, "shade": shade,
}
