"""Render units of the expmap method: what the store's first axis holds, and what each
tile of a unit computes.

With ``[animation] method = "expmap"`` the farm does not render video frames. It
renders *units*, all of one shape, ``P`` rows by ``A`` columns (the strip's rows per
octave and angles, :mod:`farm.plan.expmap`), cut into the same tiles; the scheduler,
the store's writer, its done bitmap, resume and MPI treat a unit exactly as they
treat a frame of the frames method. Video frames are synthesised from the units
afterwards, or while the render runs (:mod:`farm.synth`).

**Units, in render order.** Strip segment ``j`` (one octave of radius, rows
``j P .. j P + P - 1``; ``0`` is the innermost, the zoom-out numbering of the OpenEXR
export) is one unit; its unit row ``r`` is global strip row ``j P + r`` (innermost
first), its column ``i`` strip column ``i``. Then the centre image, cut into pieces
that are packed into extra units (below). Units are numbered in the order the video
needs them: for a zoom in (frame 0 the shallowest) unit 0 is the outermost segment,
then segments inwards, then the centre units; for a zoom out the centre units come
first, then segments outwards. So frame 0's units finish first and the video can be
coloured while the render goes on (:meth:`ExpmapLayout.frames_ready`).

**Regions.** Tile slot ``t`` of a unit computes a :class:`Region` at the slot's
top-left corner; the rest of the slot is filler (count 0, offset 0), rendered for
free and never read. A strip region is the slot's block of strip rows and columns,
cut at the strip's last row (the outermost segment is usually partial). The centre
image (``Wc x Hc``) is cut into a grid of equal pieces no larger than a full-size
slot; piece ``p`` goes to the ``p % n``-th full-size slot of centre unit ``p // n``
(``n`` full-size slots per unit), so a centre tile is an ordinary flat tile of the
centre image.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from farm.plan.expmap import ExpmapGeometry
from farm.plan.tiles import TileGrid

if TYPE_CHECKING:
    from farm.plan import FramePlan, Plan
    from farm.spec import JobSpec

SEGMENT, CENTRE = "segment", "centre"
STRIP, EMPTY = "strip", "empty"  # region kinds besides CENTRE


@dataclass(frozen=True)
class Unit:
    kind: str  # SEGMENT or CENTRE
    number: int  # segment j (0: innermost octave), or centre unit c (0, 1, ...)


@dataclass(frozen=True)
class Region:
    """What a tile slot computes: ``width x height`` pixels at the slot's top-left.

    ``kind`` STRIP: global strip rows ``y0 .. y0 + height - 1`` by strip columns
    ``x0 .. x0 + width - 1`` (pixel ``(col, row)`` of the block is strip sample
    ``(y0 + row, x0 + col)``); CENTRE: centre-image pixels ``(x0 + col, y0 + row)``;
    EMPTY: nothing (the whole slot is filler)."""

    kind: str
    width: int = 0
    height: int = 0
    x0: int = 0
    y0: int = 0

    @property
    def pixels(self) -> int:
        return self.width * self.height


@dataclass(frozen=True)
class ExpmapLayout:
    """The units of an expmap render, their tiles, and which units each video frame reads.

    ``grid`` cuts a unit (``A x P``) into tile slots; ``pieces`` are the centre
    image's pieces in packing order; ``full_slots`` the slots of full tile size (the
    ones pieces go to); ``needs[k] = (lo, hi)``: video frame k reads units
    ``lo .. hi - 1`` (always a contiguous run, by the unit order)."""

    geom: ExpmapGeometry
    grid: TileGrid
    units: tuple[Unit, ...]
    pieces: tuple[Region, ...]
    full_slots: tuple[int, ...]
    zoom_in: bool  # frame 0 is the shallowest: outer segments first
    needs: tuple[tuple[int, int], ...]

    @property
    def count(self) -> int:
        return len(self.units)

    def unit_of_segment(self, j: int) -> int:
        s = self.geom.segments
        if not 0 <= j < s:
            raise IndexError(f"segment {j} of {s}")
        return s - 1 - j if self.zoom_in else self.count - s + j

    @property
    def centre_units(self) -> range:
        c = self.count - self.geom.segments
        return range(self.geom.segments, self.count) if self.zoom_in else range(c)

    # ------------------------------------------------------------------ tiles
    def region(self, u: int, t: int) -> Region:
        """What tile slot t of unit u computes."""
        tile = self.grid.tile(t)
        unit = self.units[u]
        if unit.kind == SEGMENT:
            first, count = self.geom.segment_rows(unit.number)
            height = min(tile.height, count - tile.y0)
            if height <= 0:
                return Region(EMPTY)
            return Region(STRIP, tile.width, height, tile.x0, first + tile.y0)
        if t not in self.full_slots:
            return Region(EMPTY)
        p = unit.number * len(self.full_slots) + self.full_slots.index(t)
        return self.pieces[p] if p < len(self.pieces) else Region(EMPTY)

    def unit_pixels(self, u: int) -> int:
        """Pixels unit u computes (filler left out): the sum of its regions' pixels."""
        unit = self.units[u]
        if unit.kind == SEGMENT:
            return self.geom.segment_rows(unit.number)[1] * self.geom.angles
        n = len(self.full_slots)
        return sum(piece.pixels for piece in self.pieces[unit.number * n:(unit.number + 1) * n])

    def centre_tiles(self) -> list[tuple[int, int, Region]]:
        """(unit, slot, piece) of every centre piece."""
        n = len(self.full_slots)
        return [(self.centre_units[p // n], self.full_slots[p % n], piece)
                for p, piece in enumerate(self.pieces)]

    def strip_blocks(self, first: int, stop: int) -> list[tuple[int, int, int, int]]:
        """Global strip rows ``first .. stop - 1`` as (unit, first unit row, stop unit
        row, global row of that first row) blocks, innermost first."""
        p = self.geom.rows_per_octave
        out = []
        g = first
        while g < stop:
            j = g // p
            r0, r1 = g - j * p, min(stop - j * p, p)
            out.append((self.unit_of_segment(j), r0, r1, g))
            g = j * p + r1
        return out

    # ------------------------------------------------------------------ numbers
    def spacing_log2(self, u: int) -> float:
        """log2 of unit u's finest sample spacing relative to s_min (its number format)."""
        unit = self.units[u]
        if unit.kind == SEGMENT:
            return self.geom.segment_spacing_log2(unit.number)
        return self.geom.centre_spacing_log2

    def radius_log2(self, u: int) -> float:
        """log2 of the largest distance of unit u's samples from the zoom centre,
        relative to s_min (bounds |dc| of perturbation)."""
        unit = self.units[u]
        if unit.kind == SEGMENT:
            first, count = self.geom.segment_rows(unit.number)
            return self.geom.row_log2_radius(first + count - 1)
        wc, hc = self.geom.centre_size
        return math.log2(0.5 * math.hypot(wc, hc) / self.geom.centre_oversample)

    def frames_of_unit(self, u: int) -> np.ndarray:
        """Video frames that read unit u (its iteration limit is the largest of theirs),
        ascending int64 indices."""
        lo, hi = np.array(self.needs, dtype=np.int64).reshape(-1, 2).T
        return np.flatnonzero((lo <= u) & (u < hi))

    def frames_ready(self, unit_done: np.ndarray) -> np.ndarray:
        """Video frames whose units are all complete, ascending (int64 indices), given
        ``unit_done`` bool (U,)."""
        done = np.asarray(unit_done, dtype=bool)
        if not self.needs:
            return np.zeros(0, np.int64)
        have = np.concatenate([[0], np.cumsum(done, dtype=np.int64)])
        lo, hi = np.array(self.needs, dtype=np.int64).T
        return np.flatnonzero(have[hi] - have[lo] == hi - lo)


class ReadyFrames:
    """The master's frame callback for an expmap render: called with each unit that
    completes (from the writer's thread), it calls ``notify(f)`` once for every video
    frame that has become ready (all its units complete), in ascending order. Frames
    ready from the start (``done``: the units complete before) are taken as told."""

    def __init__(self, layout: ExpmapLayout, done: np.ndarray, notify: Callable[[int], None]):
        self.layout = layout
        self.notify = notify
        self.done = np.array(done, dtype=bool)
        self.told = np.zeros(len(layout.needs), bool)
        self.told[layout.frames_ready(self.done)] = True
        self._lock = threading.Lock()

    def __call__(self, unit: int) -> None:
        with self._lock:
            self.done[unit] = True
            ready = self.layout.frames_ready(self.done)
            new = ready[~self.told[ready]]
            self.told[new] = True
        for f in new:
            self.notify(int(f))


def _pieces(size: tuple[int, int], grid: TileGrid) -> tuple[Region, ...]:
    """The centre image cut into a grid of equal pieces no larger than a tile (the
    last row and column of pieces may be smaller), row-major."""
    wc, hc = size
    nx, ny = -(-wc // grid.tile_w), -(-hc // grid.tile_h)
    pw, ph = -(-wc // nx), -(-hc // ny)
    return tuple(Region(CENTRE, min(pw, wc - x), min(ph, hc - y), x, y)
                 for y in range(0, hc, ph) for x in range(0, wc, pw))


def make_layout(geom: ExpmapGeometry, grid: TileGrid) -> ExpmapLayout:
    """The units of ``geom`` with tile slots ``grid`` (over ``A x P``), in the order the
    video needs them."""
    if (grid.width, grid.height) != (geom.angles, geom.rows_per_octave):
        raise ValueError(f"unit grid {grid.width}x{grid.height}, strip unit "
                         f"{geom.angles}x{geom.rows_per_octave}")
    pieces = _pieces(geom.centre_size, grid)
    full = tuple(t for t in range(grid.count)
                 if (grid.tile(t).width, grid.tile(t).height) == (grid.tile_w, grid.tile_h))
    n_centre = -(-len(pieces) // len(full)) if any(map(geom.uses_centre, range(geom.frames))) else 0
    segments = [Unit(SEGMENT, j) for j in range(geom.segments)]
    centre = [Unit(CENTRE, c) for c in range(n_centre)]
    zoom_in = geom.depths[0] >= geom.depths[-1]
    units = tuple(segments[::-1] + centre) if zoom_in else tuple(centre + segments)
    layout = ExpmapLayout(geom, grid, units, pieces if n_centre else (), full, zoom_in, ())
    return ExpmapLayout(geom, grid, units, layout.pieces, full, zoom_in, _needs(layout))


def _needs(layout: ExpmapLayout) -> tuple[tuple[int, int], ...]:
    geom, p = layout.geom, layout.geom.rows_per_octave
    out = []
    for k in range(geom.frames):
        units: set[int] = set()
        first, stop = geom.frame_rows(k)
        if first < stop:
            units.update(layout.unit_of_segment(j) for j in range(first // p, (stop - 1) // p + 1))
        if geom.uses_centre(k):
            units.update(layout.centre_units)
        lo, hi = min(units), max(units) + 1
        if hi - lo != len(units):  # the unit order makes every frame's units a run
            raise AssertionError(f"frame {k} reads units {sorted(units)}: not a run")
        out.append((lo, hi))
    return tuple(out)


# ---------------------------------------------------------------------------- the plan
def layout_for(spec: JobSpec, depths: Sequence[float]) -> ExpmapLayout:
    """The layout of an expmap job whose video frames have ``depths`` (log2 of their
    pixel spacing over the deepest's, farm/plan/expmap.py): a pure function of them and
    the spec's size, oversample, tile and frame angles (exact rationals from the spec,
    farm/plan/curve.py), so a store that keeps the depths rebuilds it without
    arbitrary-precision arithmetic (ValueError for frames below 2x2 pixels)."""
    import farm.numerics as num
    from farm.plan.curve import frame_angles
    from farm.plan.expmap import make_geometry

    w, h = spec.size
    geom = make_geometry(w, h, list(depths), spec.animation.oversample,
                         turns=[num.turns(a) for a in frame_angles(spec)])
    tile = spec.render.tile
    a, p = geom.angles, geom.rows_per_octave
    grid = TileGrid.auto(a, p) if tile == "auto" else TileGrid.fitted(a, p, *tile)
    return make_layout(geom, grid)


def expmap_plan(spec: JobSpec, frames: list[FramePlan],
                stored: Sequence[tuple[int, str]] | None = None) -> Plan:
    """The plan of an expmap job whose video frames are ``frames``: the geometry of
    their zoom, the units and their tiles (``render.tile`` cuts a unit), and each
    unit's iteration limit (the largest of the frames reading it), number format and
    coordinate precision (``stored``: as a store recorded them)."""
    import farm.numerics as num
    from farm.errors import SpecError
    from farm.plan import FramePlan, Plan
    from farm.plan.expmap import frame_depths

    if spec.image.samples > 1:
        raise SpecError("image.samples", "the expmap method takes one sample per strip pixel "
                        "(the strip samples a frame's centre several times per pixel already)")
    if spec.render.distance:
        raise SpecError("render.distance", "not yet available for the expmap method (its "
                        "strip is rendered by perturbation, which does not carry the derivative)")
    requested = spec.render.precision
    if requested not in ("auto", "perturb"):
        raise SpecError("render.precision", f"{requested!r}: the expmap method renders its "
                        "strip by perturbation; use \"auto\" or \"perturb\"")
    w, h = spec.size
    try:
        layout = layout_for(spec, frame_depths(frames))
    except ValueError:
        raise SpecError("image.size", f"{w}x{h}: the expmap method needs frames of at least "
                        "2x2 pixels") from None
    s_min = min(frames, key=lambda f: f.width).spacing
    limits = np.array([f.max_iter for f in frames], dtype=np.int64)
    lo, hi = np.array(layout.needs, dtype=np.int64).reshape(-1, 2).T
    units = []
    for u, unit in enumerate(layout.units):
        spacing = scaled(s_min, layout.spacing_log2(u))
        log10_s = num.log10(spacing)
        if stored is not None:
            max_iter, fmt = stored[u]
        else:
            readers = (lo <= u) & (u < hi)  # layout.frames_of_unit(u), all units at once
            max_iter = int(limits[readers].max() if readers.any() else limits.max())
            fmt = _unit_precision(requested, unit, u, log10_s)
        width = 2 * scaled(s_min, layout.radius_log2(u))
        units.append(FramePlan(u, width, spacing, log10_s, max_iter, fmt,
                               num.coordinate_bits(spacing)))
    return Plan(spec, tuple(units), layout.grid, tuple(frames), layout)


def scaled(s_min: Any, log2_factor: float) -> Any:
    """``s_min * 2**log2_factor`` as an mpf (``log2_factor`` a double: exact)."""
    import mpmath

    import farm.numerics as num

    whole = math.floor(log2_factor)
    with num.workprec(num.WIDTH_BITS):
        return mpmath.ldexp(s_min * mpmath.mpf(2.0 ** (log2_factor - whole)), whole)


def _unit_precision(requested: str, unit: Unit, u: int, log10_s: float) -> str:
    """Strip segments: perturbation (a polar tile is a set of offsets from the centre);
    the centre image: the format a frame of its spacing would get."""
    from farm.errors import SpecError
    from farm.plan import _frame_precision, precision

    if unit.kind == SEGMENT:
        if not precision.resolves("perturb", log10_s):
            raise SpecError("view.width", f"unit {u} has sample spacing 1e{log10_s:.1f}, beyond "
                            "perturbation's limit")
        return "perturb"
    return _frame_precision(requested, u, log10_s)
