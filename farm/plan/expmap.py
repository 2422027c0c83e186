"""Exponential-map geometry: a zoom as one log-polar strip plus a flat centre image.

A zoom's frames all share one centre. A point at distance ``r`` and angle ``theta``
from it appears, in frame ``k``, ``r / s_k`` pixels from the frame's centre (``s_k``
the frame's pixel spacing). Frame-by-frame rendering computes each point about 30
times at 30 frames per doubling; the exponential map computes it once:

**The strip.** Rows are log-radius, columns angle. All positions are logs relative
to the deepest frame's pixel spacing ``s_min``: ``L = log2(r / s_min)`` (a double
holds this at any depth). ``A`` columns cover the full turn: column ``i`` is at
``theta_i = 2 pi (i + 0.5) / A`` counter-clockwise from the positive real axis
(imaginary axis up). Global row ``g`` (``0`` innermost) is at
``L_g = l_base + (g + 0.5) / P``, ``P`` rows per octave (a factor 2 in radius). ``P``
is ``round(A ln 2 / (2 pi))``, so strip pixels are square (the map is conformal):
at radius ``r`` the samples are ``r 2 pi / A`` apart in both directions. Strip
pixel ``(g, i)`` is the point ``c = C + s_min 2**L_g (cos theta_i + i sin theta_i)``.

**Segments.** The strip is cut into octaves: segment ``j`` holds global rows
``j P .. j P + P - 1`` (the outermost segment may need fewer). Segment ``0`` is the
deepest, as in the zoom-out order of Kalles Fraktaler / Fraktaler-3 keyframes that
zoomasm reads (:mod:`farm.synth.exr`).

**Sharpness.** Frame ``k`` shows radius ``r`` (in its pixels) with
``A / (2 pi r)`` strip samples per output pixel. ``A = oversample * pi * hypot(W, H)``
(rounded up to a multiple of 16) gives ``oversample`` samples per output pixel at the
frame's corners (``r = hypot(W, H) / 2``), ``oversample * hypot(W, H) / W`` at the
middle of the left and right edges, ``oversample * hypot(W, H) / H`` at the top and
bottom, and more towards the centre (``2 oversample`` at half the corner radius).

**The centre image.** Near the zoom centre the strip would need ever more rows for
ever fewer pixels, so the centre of the deepest frames comes from a flat image
instead: the centre image has the deepest frame's centre, spacing
``s_min / centre_oversample``, and covers the disc of radius ``r_c`` (in deepest-frame
pixels; by default half the deepest frame's corner radius). Its size and parity put
the deepest frame's pixel centres exactly on its samples, so that frame is the
centre image subsampled. Between ``r_c 2**-blend`` and ``r_c`` a pixel blends
centre image and strip (weights linear in ``L``), so no seam shows where they meet.

**Turned frames.** A frame turned by the angle theta (farm/plan/curve.py) shows, at
its pixel (u, v) (v up), the point at the angle ``atan2(v, u) + theta`` around the zoom
centre and the same radius: the strip and the centre image do not depend on the
turn, nor do the rows and units a frame reads. Synthesis reads the strip ``A theta /
(2 pi)`` columns further on (the strip wraps) and the centre image at (u, v) turned
by theta (farm/synth/__init__.py). ``turns[k]`` holds frame k's angle as an exact
fraction of a full turn in [0, 1) (``()`` when no frame is turned).

Everything here is plain float arithmetic on logs; coordinates at full precision
for the kernels are built from these numbers in :mod:`farm.numerics` (phase 2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from farm.plan import FramePlan, Plan

COLUMN_ALIGN = 16  # A is a multiple of this (tile widths, vector loads)
TWO_PI = 2.0 * math.pi


@dataclass(frozen=True)
class ExpmapGeometry:
    """Where every strip row and centre-image pixel is, for a zoom of ``frames``
    frames of ``width x height`` pixels whose pixel spacings span ``zoom_octaves``
    octaves (``log2(s_max / s_min)``).

    ``depths[k]`` is frame k's ``log2(s_k / s_min)`` (0 for the deepest frame).
    Lengths: ``angles`` (A) columns, ``rows`` (G) strip rows, ``rows_per_octave``
    (P); logs (``l_base``, ``l_centre``, ``blend``) in octaves relative to ``s_min``.
    """

    width: int  # W, output pixels
    height: int  # H
    depths: tuple[float, ...]  # per frame: log2(s_k / s_min) >= 0
    oversample: float  # strip samples per output pixel at a frame's corner
    angles: int  # A: strip columns over the full turn
    rows_per_octave: int  # P
    l_base: float  # log2(radius / s_min) of the inner edge of strip row 0
    rows: int  # G: strip rows (0 when every frame lies inside the centre image)
    centre_oversample: int  # q: centre-image samples per deepest-frame pixel
    centre_size: tuple[int, int]  # (Wc, Hc) centre-image pixels
    l_centre: float  # log2(r_c / s_min): beyond it, pixels come from the strip only
    blend: float  # octaves below l_centre where centre image and strip blend
    # per frame: its angle as a fraction of a full turn in [0, 1), exact; () when no
    # frame is turned
    turns: tuple[Fraction, ...] = ()

    # ------------------------------------------------------------------ frames
    @property
    def frames(self) -> int:
        return len(self.depths)

    def turn(self, k: int) -> Fraction:
        """Frame k's angle as a fraction of a full turn, in [0, 1)."""
        return self.turns[k] if self.turns else Fraction(0)

    @property
    def corner(self) -> float:
        """Distance of a frame's corner pixel centre from its centre, in its pixels."""
        return 0.5 * math.hypot(self.width - 1, self.height - 1)

    def frame_extent(self, k: int) -> tuple[float, float]:
        """(smallest, largest) ``L`` of frame k's pixel centres."""
        nearest = 0.5 * math.hypot(1 - self.width % 2, 1 - self.height % 2)
        low = self.depths[k] + math.log2(nearest) if nearest > 0 else -math.inf
        return low, self.depths[k] + math.log2(self.corner)

    def uses_strip(self, k: int) -> bool:
        """Whether some pixel of frame k lies beyond the blend band's inner edge."""
        return self.rows > 0 and self.frame_extent(k)[1] > self.l_centre - self.blend

    def uses_centre(self, k: int) -> bool:
        """Whether some pixel of frame k lies inside ``l_centre``."""
        return self.frame_extent(k)[0] < self.l_centre

    # ------------------------------------------------------------------ strip
    @property
    def segments(self) -> int:
        """Octave segments (the last may be partial; 0 without a strip)."""
        return -(-self.rows // self.rows_per_octave)

    def segment_rows(self, j: int) -> tuple[int, int]:
        """(first global row, row count) of segment j (0: innermost)."""
        if not 0 <= j < self.segments:
            raise IndexError(f"segment {j} of {self.segments}")
        first = j * self.rows_per_octave
        return first, min(self.rows_per_octave, self.rows - first)

    def segment_frames(self, j: int) -> list[int]:
        """Frames that read segment j: its rows' iteration limit must be the largest of
        theirs (a frame with a lower limit counts later escapes as interior)."""
        first, count = self.segment_rows(j)
        return self.frames_reading(first, first + count)

    def segment_spacing_log2(self, j: int) -> float:
        """log2 of segment j's finest sample spacing (its inner row's) relative to s_min:
        the spacing its number format must resolve."""
        return self.row_spacing_log2(self.segment_rows(j)[0])

    def row_log2_radius(self, g: float) -> float:
        """``L`` of global row g's centre."""
        return self.l_base + (g + 0.5) / self.rows_per_octave

    def row_position(self, log2_radius: float) -> float:
        """The continuous global row at ``L = log2_radius`` (integers at row centres)."""
        return (log2_radius - self.l_base) * self.rows_per_octave - 0.5

    def row_spacing_log2(self, g: float) -> float:
        """log2 of the sample spacing (radial = angular) of row g, relative to s_min."""
        return self.row_log2_radius(g) + math.log2(TWO_PI / self.angles)

    def frame_rows(self, k: int) -> tuple[int, int]:
        """Strip rows frame k reads, ``(first, stop)`` (stop exclusive; (0, 0) when it
        reads none): every row a bilinear sample of one of its pixels can touch."""
        if not self.uses_strip(k):
            return 0, 0
        low, high = self.frame_extent(k)
        low = max(low, self.l_centre - self.blend)
        first = max(0, math.floor(self.row_position(low)))
        stop = min(self.rows, math.floor(self.row_position(high)) + 2)
        return first, stop

    def frames_reading(self, first: int, stop: int) -> list[int]:
        """Frames that read any of the strip rows ``first .. stop - 1``."""
        out = []
        for k in range(self.frames):
            a, b = self.frame_rows(k)
            if a < b and a < stop and first < b:
                out.append(k)
        return out

    # ------------------------------------------------------------------ centre image
    @property
    def centre_spacing_log2(self) -> float:
        """log2 of the centre image's pixel spacing relative to s_min."""
        return -math.log2(self.centre_oversample)

    # ------------------------------------------------------------------ counts
    @property
    def strip_pixels(self) -> int:
        return self.rows * self.angles

    @property
    def centre_pixels(self) -> int:
        return self.centre_size[0] * self.centre_size[1]

    @property
    def pixels(self) -> int:
        """Pixels the expmap method computes: strip plus centre image."""
        return self.strip_pixels + self.centre_pixels

    @property
    def frame_pixels(self) -> int:
        """Pixels the frame-by-frame method computes for the same zoom."""
        return self.frames * self.width * self.height

    def samples_per_pixel(self, radius: float) -> float:
        """Strip samples per output pixel at ``radius`` output pixels from a frame's
        centre (the same for every frame: the map is scale invariant)."""
        return self.angles / (TWO_PI * radius)

    def edge_samples(self) -> dict[str, float]:
        """Angular samples per output pixel at the corner and edge midpoints."""
        return {"corner": self.samples_per_pixel(0.5 * math.hypot(self.width, self.height)),
                "left/right edge": self.samples_per_pixel(0.5 * self.width),
                "top/bottom edge": self.samples_per_pixel(0.5 * self.height)}


def angles_for(width: int, height: int, oversample: float) -> int:
    """``A``: ``oversample * pi * hypot(W, H)`` rounded up to a multiple of 16."""
    need = oversample * math.pi * math.hypot(width, height)
    return COLUMN_ALIGN * math.ceil(need / COLUMN_ALIGN - 1e-9)


def centre_size_for(width: int, height: int, radius: float, q: int) -> tuple[int, int]:
    """(Wc, Hc): the smallest centre image that holds the disc of ``radius``
    deepest-frame pixels plus a sample on each side (for bilinear interpolation),
    with the parity that puts the deepest frame's pixel centres on its samples.

    Deepest-frame pixel ``i`` is at ``u = i + 0.5 - W/2``; centre pixel ``x`` at
    ``(x + 0.5 - Wc/2) / q``. ``x = q u + Wc/2 - 0.5`` is an integer for every i when
    Wc is odd (q even) or has W's parity (q odd)."""
    def side(n: int) -> int:
        parity = 1 if q % 2 == 0 else n % 2
        m = 2 * math.ceil(radius * q + 1.0) + 1
        return m if m % 2 == parity else m + 1
    return side(width), side(height)


def make_geometry(width: int, height: int, depths: list[float] | tuple[float, ...],
                  oversample: float = 1.0, centre_oversample: int = 2,
                  centre_radius: float | None = None, blend: float = 1 / 16,
                  turns: Sequence[Fraction] = ()) -> ExpmapGeometry:
    """The geometry of a zoom whose frame ``k`` has pixel spacing ``s_min 2**depths[k]``
    (and is turned by ``turns[k]`` of a full turn, reduced into [0, 1); ``()``: none).

    ``centre_radius``: r_c in deepest-frame pixels (default: half the corner radius,
    so the strip covers every frame's outer half at >= ``oversample`` samples per
    pixel and the centre image its inner part at >= ``centre_oversample``).
    """
    if width < 2 or height < 2:
        raise ValueError("an exponential map needs frames of at least 2x2 pixels")
    if not depths or min(depths) != 0.0 or any(d < 0 for d in depths):
        raise ValueError("depths are log2(s_k / s_min): >= 0 with a 0")
    if oversample <= 0 or centre_oversample < 1 or blend <= 0:
        raise ValueError("oversample > 0, centre_oversample >= 1 and blend > 0")
    if turns and len(turns) != len(depths):
        raise ValueError(f"{len(turns)} turns for {len(depths)} frames")
    turned = tuple(Fraction(t) % 1 for t in turns) if any(Fraction(t) % 1 for t in turns) else ()
    corner = 0.5 * math.hypot(width - 1, height - 1)
    r_c = 0.5 * corner if centre_radius is None else centre_radius
    a = angles_for(width, height, oversample)
    p = max(1, round(a * math.log(2) / TWO_PI))
    l_centre = math.log2(r_c)
    # row 0 sits a row inside the blend band, so bilinear samples there have two rows
    l_base = l_centre - blend - 1.0 / p
    l_outer = max(depths) + math.log2(corner)
    rows = 0
    if l_outer > l_centre - blend:
        rows = math.floor((l_outer - l_base) * p - 0.5) + 2
    wc, hc = centre_size_for(width, height, r_c, centre_oversample)
    return ExpmapGeometry(width, height, tuple(float(d) for d in depths), oversample, a, p,
                          l_base, rows, centre_oversample, (wc, hc), l_centre, blend, turned)


def zoom_depths(frames: int, log2_zoom: float) -> list[float]:
    """``depths`` of a constant-speed zoom of ``frames`` frames over ``log2_zoom``
    octaves (DESIGN.md: frame k has width w0 (w1/w0)**(k/(F-1))), deepest last when
    log2_zoom > 0 (a zoom in), first when < 0 (a zoom out)."""
    if frames == 1:
        return [0.0]
    octaves = abs(log2_zoom)
    ks = range(frames) if log2_zoom >= 0 else range(frames - 1, -1, -1)
    return [octaves * (frames - 1 - k) / (frames - 1) for k in ks]


def frame_depths(frames: Sequence[FramePlan]) -> list[float]:
    """``depths`` of frames: ``log2(s_k / s_min)`` from their mpmath widths."""
    import farm.numerics as num

    w_min = min(f.width for f in frames)
    with num.workprec(num.WIDTH_BITS):
        return [0.0 if f.width == w_min else num.log10(f.width / w_min) / math.log10(2.0)
                for f in frames]


def plan_depths(plan: Plan) -> list[float]:
    """``depths`` of a plan's video frames."""
    return frame_depths(plan.video_frames)
