"""OpenEXR export of exponential-map strips, in the layout zoomasm reads.

zoomasm (a zoom video assembler) reads the exponential-map keyframes that Kalles
Fraktaler 2+ and Fraktaler-3 write; this module writes the farm's strip the same way:

* one file per octave segment, ``<stem>.00000000.exr``, ``<stem>.00000001.exr``, ... in
  zoom-out order: file 0 is the deepest (innermost) octave, file m+1 continues file m
  outward by a factor 2 in radius;
* each file ``A x P`` pixels (angles x rows per octave); column ``i`` is at angle
  ``2 pi (i + 0.5) / A`` counter-clockwise from the positive real axis (imaginary axis
  up); row ``y`` (0 at the top) is at radius ``R 2**((y + 0.5) / P)``, ``R`` the
  file's inner radius: the top row is the innermost ring, the bottom row the outermost
  (the orientation Fraktaler-3 writes);
* channels ``N`` (uint32) and ``NF`` (float32), KF's raw-data convention: for an
  escaped pixel ``N + NF - IterationsBias`` is its continuous escape time (the farm's
  ``n + d``; ``NF`` in [0, 1)); ``N = 0xFFFFFFFF`` marks an interior pixel and
  ``N = 0`` a pixel with no data (rows of the outermost octave that no frame needs);
  header attributes ``Iterations`` (int, the strip's iteration limit) and
  ``IterationsBias`` (int, 1024 as Fraktaler-3 uses);
* ``DEX``, ``DEY`` (float32) when the strip carries a distance estimate: the farm's
  ``DEX + i DEY`` in units of the local strip sample spacing (so a neighbouring
  boundary sample is at distance about 1), direction in the image axes of the frames;
* a ``zoomfarm`` string attribute with the geometry (JSON), for tools that want it.

Below the strip, the centre image (flat, 2x the deepest frame's resolution) is
resampled onto the same log-polar rows, octave by octave down to one deepest-frame
pixel from the centre (``inner_octaves``), so zoomasm gets data down to the end of the
zoom; these files come first in the numbering.

The binding is the ``OpenEXR`` package on PyPI (the Academy Software Foundation's
bindings, ``OpenEXR.File(header, channels).write(path)``, version 3.3 or newer), an
optional dependency: ``pip install 'zoomfarm[exr]'``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import UsageError
from farm.plan.expmap import TWO_PI, ExpmapGeometry
from farm.synth import Raster, bilinear

BIAS = 1024  # IterationsBias, as Fraktaler-3 writes it
INTERIOR = 0xFFFFFFFF


def openexr() -> Any:
    """The OpenEXR module, or a UsageError saying how to install it."""
    try:
        import OpenEXR
    except ImportError:
        raise UsageError("OpenEXR export needs the OpenEXR package: "
                         "pip install 'zoomfarm[exr]' (or: pip install OpenEXR)") from None
    return OpenEXR


def kf_channels(raster: Raster, rows: int) -> dict[str, np.ndarray]:
    """``N``, ``NF`` (and ``DEX``, ``DEY``) of a file of ``rows`` rows whose first
    ``raster.shape[0]`` rows are ``raster``, inner ring first; rows beyond it get
    N = 0 (no data). Every stored count n >= 1 escaped (within its own limit)."""
    n = raster.iterations.astype(np.uint64)
    mu = n.astype(np.float64) + raster.fraction.astype(np.float64)
    escaped = n >= 1
    whole = np.floor(mu)
    big_n = np.where(escaped, whole + BIAS, INTERIOR).astype(np.uint32)
    nf = np.where(escaped, mu - whole, 0.0).astype(np.float32)
    pad = rows - raster.shape[0]
    out = {"N": np.pad(big_n, ((0, pad), (0, 0))), "NF": np.pad(nf, ((0, pad), (0, 0)))}
    if raster.distance is not None:
        de = np.where(escaped, raster.distance, 0)
        out["DEX"] = np.pad(de.real.astype(np.float32), ((0, pad), (0, 0)))
        out["DEY"] = np.pad(de.imag.astype(np.float32), ((0, pad), (0, 0)))
    return out


def centre_rows(geom: ExpmapGeometry, centre: Raster, first: int, stop: int) -> Raster:
    """Global strip rows ``first .. stop-1`` (negative: inside the strip's inner edge)
    resampled from the centre image with the synthesis rules (nearest sample decides
    interior, mu bilinear over escaped samples)."""
    g = np.arange(first, stop, dtype=np.float64)
    radius = np.exp2(geom.l_base + (g + 0.5) / geom.rows_per_octave)  # deepest-frame pixels
    angle = TWO_PI * (np.arange(geom.angles) + 0.5) / geom.angles
    q = geom.centre_oversample
    wc, hc = geom.centre_size
    x = q * radius[:, None] * np.cos(angle)[None, :] + 0.5 * wc - 0.5
    y = -q * radius[:, None] * np.sin(angle)[None, :] + 0.5 * hc - 0.5
    s = bilinear(centre, x.ravel(), y.ravel(), False, 2**32 - 1, None)
    n = np.where(s.exterior, s.count, 0).astype(np.uint32)
    d = np.where(s.exterior, s.mu - n, 0.0).astype(np.float32)
    shape = (stop - first, geom.angles)
    return Raster(n.reshape(shape), d.reshape(shape), first)


def write_segments(geom: ExpmapGeometry, read_rows: Callable[[int, int], Raster],
                   centre: Raster | None, max_iter: int, out_dir: str | Path,
                   stem: str = "expmap", inner_octaves: int | None = None,
                   metadata: dict | None = None) -> list[Path]:
    """Write every octave as ``<out_dir>/<stem>.NNNNNNNN.exr`` (zoom-out order) and
    return the paths. ``read_rows(a, b)`` gives strip rows a..b-1; ``centre`` (may be
    None: no inner files) fills ``inner_octaves`` octaves below the strip (default:
    down to one deepest-frame pixel from the centre)."""
    mod = openexr()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    p = geom.rows_per_octave
    inner = 0
    if centre is not None:
        inner = max(0, math.ceil(geom.l_base)) if inner_octaves is None else inner_octaves
    info = {"angles": geom.angles, "rows_per_octave": p, "inner_octaves": inner,
            "l_base": geom.l_base, "centre_oversample": geom.centre_oversample,
            **(metadata or {})}
    paths = []
    for m in range(inner + geom.segments):
        j = m - inner  # strip segment; negative: resampled from the centre image
        if j < 0:
            raster = centre_rows(geom, centre, j * p, (j + 1) * p)  # type: ignore[arg-type]
        else:
            first, count = geom.segment_rows(j)
            raster = read_rows(first, first + count)
        header = {"compression": mod.ZIP_COMPRESSION, "type": mod.scanlineimage,
                  "Iterations": int(max_iter), "IterationsBias": BIAS,
                  "zoomfarm": json.dumps({**info, "file": m, "segment": j})}
        path = out / f"{stem}.{m:08d}.exr"
        with mod.File(header, kf_channels(raster, p)) as f:
            f.write(str(path))
        paths.append(path)
    return paths


def read_exr(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(header, channels) of an EXR file, channels as numpy arrays (for tests and tools)."""
    mod = openexr()
    with mod.File(str(path)) as f:
        return dict(f.header()), {k: np.array(c.pixels) for k, c in f.channels().items()}
