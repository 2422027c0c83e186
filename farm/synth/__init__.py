"""Frame synthesis from exponential-map strips: raw data resampled, then coloured as usual.

:func:`synthesize` is the numpy reference: it turns the strip rows a frame reads and
the centre image (geometry: :mod:`farm.plan.expmap`) into the frame's
:class:`~farm.color.raw.RawFrame`, so colouring (histogram equalisation, palettes) is the
same code as for directly rendered frames. The OpenCL kernel ``kernels/synth.cl``
(:mod:`farm.compute.synth`) computes the same, and is tested against it.

Resampling rules, per output pixel (``mu = n + d`` the continuous escape time):

1. Position: frame k's pixel ``(i, j)`` is ``(u, v) = (i + 0.5 - W/2, -(j + 0.5 - H/2))``
   frame pixels from the centre, at ``L = depth_k + log2 |u + i v|`` and angle
   ``atan2(v, u)``; in the strip at row ``P (L - l_base) - 0.5`` and column
   ``A angle / (2 pi) - 0.5`` (columns wrap around), in the centre image at column
   ``q 2**depth_k u + Wc/2 - 0.5`` and row ``-q 2**depth_k v + Hc/2 - 0.5``.
2. Per source, the four samples around the position. A sample is *exterior* when
   ``1 <= n <= max_iter`` of the frame (a sample rendered with a higher limit that
   escaped later counts as interior, as it would in a direct render of the frame).
   The *nearest* sample decides interior or exterior; an exterior pixel takes the
   nearest sample's count ``n`` and ``mu`` interpolated bilinearly over the exterior
   samples (weights renormalised), so ``d = mu - n``. Where the exterior samples'
   ``mu`` spread over more than ``SPREAD_SMOOTH`` counts, ``mu`` moves linearly towards
   the nearest sample's, reaching it at ``SPREAD_POINT``: chaotic data keep their
   texture, as in a direct render, instead of being averaged into a blur; calm data
   interpolate smoothly from frame to frame. A pixel exactly on a sample copies it
   bit for bit.
3. Sources: the centre image for ``L < l_centre - blend``, the strip for
   ``L >= l_centre``; in between ``mu`` is blended with the strip's weight
   ``t = (L - l_centre + blend) / blend``, and the source with the larger weight
   decides interior/exterior and ``n``.
4. The histogram counts the output pixels per count, as the store's does.

The distance estimate (when the strips carry one, complex: ``DEX + i DEY``) is
interpolated like ``mu``, after converting each sample from its source's pixel
units (a strip row's sample spacing, the centre image's spacing) into the frame's
output pixels; interior pixels get 0.

A turned frame (angle theta, ``geom.turns``, farm/plan/expmap.py) reads, at its pixel
(u, v), the point at angle ``atan2(v, u) + theta``: strip column ``x + A theta /
(2 pi)`` (``x_shift``), centre image at ``(u cos - v sin, u sin + v cos)`` in place of
``(u, v)``; and its distance estimate, in the unturned axes of the sources, is turned
by ``e^(i theta)`` into the frame's own image axes (as kernels/mandel.cl turns a
directly rendered turned frame's). Unturned frames compute exactly what they computed
before (none of these operations).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from farm.color.raw import RawFrame
from farm.plan.expmap import TWO_PI, ExpmapGeometry

# Where the four samples around a pixel spread over more than SPREAD_SMOOTH counts of
# mu, the pixel leans towards the nearest sample's value, fully beyond SPREAD_POINT:
# there the data are chaotic, and a point sample (as a direct render takes) keeps their
# texture where a bilinear mean would blur it (tests/test_expmap_synth.py).
SPREAD_SMOOTH = 1.0
SPREAD_POINT = 2.0


@dataclass(frozen=True)
class Raster:
    """Raw data of a strip window or of the centre image, ``(rows, columns)`` row-major.

    ``first_row``: the global strip row of row 0 (0 for the centre image).
    ``distance``: complex64 in this raster's own sample spacing, or None.
    ``stop_row``: None, or the raster is a ring holding global strip rows
    ``first_row .. stop_row - 1``, row g at ``g % R`` (the host engine's window,
    :mod:`farm.synth.engine`)."""

    iterations: np.ndarray  # uint32 (R, C): escape count, 0 interior
    fraction: np.ndarray  # float32 (R, C): smooth offset d
    first_row: int = 0
    distance: np.ndarray | None = None  # complex64 (R, C)
    stop_row: int | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.iterations.shape[0], self.iterations.shape[1]


@dataclass
class Sampled:
    """One source's bilinear result for a set of pixels (1-D arrays)."""

    exterior: np.ndarray  # bool: the nearest sample escaped within max_iter
    mu: np.ndarray  # float64: interpolated continuous escape time (exterior pixels)
    count: np.ndarray  # uint32: the nearest sample's count
    distance: np.ndarray | None  # complex128 in output pixels, or None


def pixel_offsets(width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """(u, v): each pixel's offset from the frame centre in frame pixels, float64
    ``(H, W)``, v up (the DESIGN.md pixel mapping)."""
    u = np.arange(width, dtype=np.float64) + 0.5 - width / 2
    v = -(np.arange(height, dtype=np.float64) + 0.5 - height / 2)
    return np.broadcast_to(u[None, :], (height, width)), np.broadcast_to(v[:, None], (height, width))


def bilinear(src: Raster, x: np.ndarray, y: np.ndarray, wrap: bool, max_iter: int,
              scale: list[np.ndarray] | float | None) -> Sampled:
    """Sample ``src`` at continuous (column x, global row y), integers at sample centres.

    ``wrap``: columns wrap around (the strip) and every row must be inside the raster;
    otherwise (the centre image) positions are clamped to its edge. ``scale``: factor
    from the raster's distance units to output pixels, one array per corner or one
    number."""
    rows, cols = src.shape
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = x - x0, y - y0
    xi, yi = x0.astype(np.int64), y0.astype(np.int64) - src.first_row
    if wrap:
        last = (rows if src.stop_row is None else src.stop_row - src.first_row) - 1
        if yi.size and (yi.min() < 0 or yi.max() + 1 > last):
            raise ValueError(f"strip rows {yi.min() + src.first_row}..{yi.max() + 1 + src.first_row}"
                             f" needed, rows {src.first_row}..{src.first_row + last} given")
        xa, xb = xi % cols, (xi + 1) % cols
        ya, yb = yi, yi + 1
        if src.stop_row is not None:  # a ring: global row g at g % rows
            ya, yb = (yi + src.first_row) % rows, (yi + 1 + src.first_row) % rows
    else:
        xa, xb = np.clip(xi, 0, cols - 1), np.clip(xi + 1, 0, cols - 1)
        ya, yb = np.clip(yi, 0, rows - 1), np.clip(yi + 1, 0, rows - 1)
    corners = [(ya, xa, (1 - fx) * (1 - fy)), (ya, xb, fx * (1 - fy)),
               (yb, xa, (1 - fx) * fy), (yb, xb, fx * fy)]
    near = (fx > 0.5).astype(np.int64) + 2 * (fy > 0.5).astype(np.int64)
    total = np.zeros_like(x)
    acc = np.zeros_like(x)
    lo, hi, mu_near = np.full_like(x, np.inf), np.full_like(x, -np.inf), np.zeros_like(x)
    dist = np.zeros(x.shape, np.complex128) if src.distance is not None else None
    de_near = np.zeros(x.shape, np.complex128) if dist is not None else None
    count = np.zeros(x.shape, np.uint32)
    exterior = np.zeros(x.shape, bool)
    for c, (r, col, w) in enumerate(corners):
        n = src.iterations[r, col]
        ext = (n >= 1) & (n <= max_iter)
        we = np.where(ext, w, 0.0)
        mu_c = n.astype(np.float64) + src.fraction[r, col].astype(np.float64)
        total += we
        acc += we * mu_c
        lo = np.where(ext, np.minimum(lo, mu_c), lo)
        hi = np.where(ext, np.maximum(hi, mu_c), hi)
        pick = near == c
        count[pick] = n[pick]
        exterior[pick] = ext[pick]
        mu_near[pick] = mu_c[pick]
        if dist is not None and de_near is not None and src.distance is not None:
            factor = scale[c] if isinstance(scale, list) else (1.0 if scale is None else scale)
            de_c = src.distance[r, col].astype(np.complex128) * factor
            dist += we * de_c
            de_near[pick] = de_c[pick]
    safe = np.where(exterior, total, 1.0)
    alpha = np.clip((hi - lo - SPREAD_SMOOTH) / (SPREAD_POINT - SPREAD_SMOOTH), 0.0, 1.0)
    mu = np.where(exterior, (1 - alpha) * (acc / safe) + alpha * mu_near, 0.0)
    if dist is not None and de_near is not None:
        dist = np.where(exterior, (1 - alpha) * (dist / safe) + alpha * de_near, 0)
    return Sampled(exterior, mu, count, dist)


@dataclass(frozen=True)
class FrameParams:
    """Frame k's resampling constants, as the kernel takes them (``rho = log2 |u + i v|``
    in frame pixels): strip row ``y_off + rows_per_octave rho``, strip column
    ``x_scale angle - 0.5 + x_shift``, centre-image position ``zoom (u', -v')`` from
    its centre with ``(u', v') = (u cos - v sin, u sin + v cos)``, strip weight ``t =
    clip((rho + t_off) inv_blend, 0, 1)``, and a strip sample's spacing at global row
    g is ``2**(de_off + g / P)`` frame pixels. ``(cos, sin)``: the frame's angle's
    (doubles, exact at multiples of 90 degrees), ``x_shift`` its strip columns (``A``
    times its fraction of a turn); ``turned`` False: (1, 0) and 0, not applied."""

    y_off: float
    rows_per_octave: float
    x_scale: float
    zoom: float
    t_off: float
    inv_blend: float
    de_off: float
    cos: float = 1.0
    sin: float = 0.0
    x_shift: float = 0.0

    @property
    def turned(self) -> bool:
        return (self.cos, self.sin) != (1.0, 0.0)


def frame_params(geom: ExpmapGeometry, k: int) -> FrameParams:
    depth, p = geom.depths[k], geom.rows_per_octave
    turn = geom.turn(k)
    cos, sin = _cis(turn)
    return FrameParams(
        y_off=(depth - geom.l_base) * p - 0.5, rows_per_octave=float(p),
        x_scale=geom.angles / TWO_PI, zoom=geom.centre_oversample * 2.0 ** depth,
        t_off=depth - geom.l_centre + geom.blend, inv_blend=1.0 / geom.blend,
        de_off=geom.row_spacing_log2(0) - depth, cos=cos, sin=sin,
        x_shift=float(turn * geom.angles))


def _cis(turn: Fraction) -> tuple[float, float]:
    """(cos, sin) of ``turn`` full turns as doubles (exact at quarter turns)."""
    if turn == 0:
        return 1.0, 0.0
    import farm.numerics as num

    return num.rotation_doubles(360 * turn)


def polar_coordinates(geom: ExpmapGeometry, u: np.ndarray,
                      v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, rho) of pixels at offsets (u, v) in an unturned frame: strip column
    (continuous) and rho = log2 |u + i v| (-inf at an exact centre pixel); the same for
    every frame (kernels/synth.cl takes them as a table)."""
    with np.errstate(divide="ignore"):
        rho = np.log2(np.hypot(u, v))
    angle = np.arctan2(v, u) % TWO_PI
    return angle * (geom.angles / TWO_PI) - 0.5, rho


def strip_coordinates(geom: ExpmapGeometry, k: int, u: np.ndarray,
                      v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, rho): strip column and global row (continuous) of frame k's pixels at
    offsets (u, v), and rho = log2 |u + i v| (-inf at an exact centre pixel)."""
    fp = frame_params(geom, k)
    x, rho = polar_coordinates(geom, u, v)
    if fp.turned:
        x = x + fp.x_shift
    return x, fp.y_off + fp.rows_per_octave * rho, rho


def synthesize_arrays(geom: ExpmapGeometry, k: int, strip: Raster | None, centre: Raster | None,
                      max_iter: int, band: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
    """Frame k's ``iterations`` (uint32 (H, W)), ``fraction`` (float32), ``histogram``
    (int64 (max_iter + 1,)) and, when the sources carry it, ``distance`` (complex64,
    output pixels). ``strip`` must hold rows ``geom.frame_rows(k)``; ``centre`` is
    needed when ``geom.uses_centre(k)``. ``band = (y0, y1)``: only output rows
    y0 .. y1 - 1 (arrays (y1 - y0, W), the histogram of those rows); every pixel is
    computed on its own, so bands put together are the whole frame bit for bit."""
    w, h = geom.width, geom.height
    u, v = pixel_offsets(w, h)
    if band is not None:
        u, v = u[band[0]:band[1]], v[band[0]:band[1]]
        h = band[1] - band[0]
    fp = frame_params(geom, k)
    x, y, rho = strip_coordinates(geom, k, u, v)
    t = np.clip((rho + fp.t_off) * fp.inv_blend, 0.0, 1.0)
    use_strip, use_centre = t > 0, t < 1
    exterior = np.zeros((h, w), bool)
    mu = np.zeros((h, w))
    count = np.zeros((h, w), np.uint32)
    with_distance = any(s is not None and s.distance is not None for s in (strip, centre))
    dist = np.zeros((h, w), np.complex128) if with_distance else None
    sampled: dict[str, tuple[np.ndarray, Sampled]] = {}
    if use_strip.any():
        if strip is None:
            raise ValueError(f"frame {k} reads strip rows {geom.frame_rows(k)}: no strip given")
        scale = None
        if strip.distance is not None:  # strip row spacing -> frame pixels, per pixel
            rows = np.floor(y[use_strip])
            scale = [np.exp2(fp.de_off + (rows + dy) / fp.rows_per_octave) for dy in (0, 0, 1, 1)]
        sampled["strip"] = (use_strip, bilinear(strip, x[use_strip], y[use_strip], True,
                                                 max_iter, scale))
    if use_centre.any():
        if centre is None:
            raise ValueError(f"frame {k} reads the centre image: none given")
        wc, hc = geom.centre_size
        uc, vc = u[use_centre], v[use_centre]
        if fp.turned:
            uc, vc = uc * fp.cos - vc * fp.sin, uc * fp.sin + vc * fp.cos
        cx = fp.zoom * uc + 0.5 * wc - 0.5
        cy = -fp.zoom * vc + 0.5 * hc - 0.5
        sampled["centre"] = (use_centre, bilinear(centre, cx, cy, False, max_iter, 1.0 / fp.zoom))
    for name in ("centre", "strip"):  # strip last: it wins where it dominates
        if name not in sampled:
            continue
        mask, s = sampled[name]
        dominant = t[mask] >= 0.5 if name == "strip" else t[mask] < 0.5
        sel = np.zeros((h, w), bool)
        sel[mask] = dominant
        exterior[sel] = s.exterior[dominant]
        count[sel] = s.count[dominant]
        mu[sel] = s.mu[dominant]
        if dist is not None and s.distance is not None:
            dist[sel] = s.distance[dominant]
    if len(sampled) == 2:  # the blend band: mix mu where both sources are exterior
        (m_c, c), (m_s, s) = sampled["centre"], sampled["strip"]
        both = m_c & m_s
        tc, ts = c.exterior[both[m_c]], s.exterior[both[m_s]]
        tb = t[both]
        mix = np.zeros((h, w), bool)
        mix[both] = tc & ts
        weight = tb[tc & ts]
        mu[mix] = (1 - weight) * c.mu[both[m_c]][tc & ts] + weight * s.mu[both[m_s]][tc & ts]
        if dist is not None and c.distance is not None and s.distance is not None:
            dist[mix] = ((1 - weight) * c.distance[both[m_c]][tc & ts]
                         + weight * s.distance[both[m_s]][tc & ts])
    iterations = np.where(exterior, count, 0).astype(np.uint32)
    fraction = np.where(exterior, mu - iterations, 0.0).astype(np.float32)
    hist = np.bincount(iterations.ravel(), minlength=max_iter + 1).astype(np.int64)
    out: dict[str, np.ndarray] = {"iterations": iterations, "fraction": fraction, "histogram": hist}
    if dist is not None:
        if fp.turned:  # from the sources' unturned axes into the frame's
            turned = np.empty_like(dist)
            turned.real = dist.real * fp.cos - dist.imag * fp.sin
            turned.imag = dist.real * fp.sin + dist.imag * fp.cos
            dist = turned
        out["distance"] = np.where(exterior, dist, 0).astype(np.complex64)
    return out


def synthesize(geom: ExpmapGeometry, k: int, strip: Raster | None, centre: Raster | None,
               max_iter: int) -> RawFrame:
    """Frame k as colouring takes it (see :func:`synthesize_arrays`); the distance
    estimate is passed on when :class:`RawFrame` has a ``distance`` field."""
    a = synthesize_arrays(geom, k, strip, centre, max_iter)
    extra = {}
    if "distance" in a and "distance" in {f.name for f in dataclasses.fields(RawFrame)}:
        extra["distance"] = a["distance"]
    return RawFrame(k, a["iterations"], a["fraction"], a["histogram"], **extra)


def frame_log2_radius(geom: ExpmapGeometry, k: int) -> np.ndarray:
    """``L`` of each pixel of frame k, float64 (H, W) (-inf at an exact centre pixel)."""
    u, v = pixel_offsets(geom.width, geom.height)
    with np.errstate(divide="ignore"):
        return geom.depths[k] + np.log2(np.hypot(u, v))


__all__ = ["FrameParams", "Raster", "frame_log2_radius", "frame_params", "pixel_offsets",
           "polar_coordinates", "strip_coordinates", "synthesize", "synthesize_arrays"]
