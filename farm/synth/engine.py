"""Engines that synthesise the video frames of an expmap store from its units, and the
window of strip rows they keep.

An engine keeps a window of strip rows: a ring in which global strip row ``g`` lives
in ring row ``g % ring`` (:class:`RowWindow`); consecutive frames of a zoom read nearly
the same rows, so each new frame fetches only the rows it adds (about
``P / frames-per-octave``), never the whole window (a 1080p frame reads about 11
octaves of strip, 0.5 GB); and the centre image.

Engines: ``opencl`` (:class:`farm.compute.synth.FrameSynthesizer`, the ring on the
device) and ``numpy`` (:class:`HostEngine`, the reference :func:`farm.synth.
synthesize_arrays` on a ring in host memory); both give the same frames bit for bit
(tests/test_expmap_synth.py). Which one synthesises a store's frames, and the frames
kept between requests, is farm/compute/synthesis.py's business (it knows both).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from farm.plan.expmap import ExpmapGeometry
from farm.synth import Raster, synthesize_arrays

Fetch = Callable[[int, int], Raster]  # global strip rows a .. b-1


class RowWindow:
    """Which global strip rows a ring of ``ring`` rows holds: one interval
    ``row_lo .. row_hi - 1``. Rows that join the interval extend it, and when it
    outgrows the ring the rows farthest from the new ones go; rows that do not join it
    replace it."""

    def __init__(self, ring: int):
        self.ring = ring
        self.row_lo = self.row_hi = 0

    def missing(self, first: int, stop: int) -> list[tuple[int, int]]:
        """The row spans of ``first .. stop - 1`` that are not resident."""
        if stop - first > self.ring:
            raise ValueError(f"rows {first}..{stop - 1} exceed the ring of {self.ring}")
        lo, hi = self.row_lo, self.row_hi
        if lo < hi and first < hi and stop > lo:
            return [(a, b) for a, b in ((first, lo), (hi, stop)) if a < b]
        return [(first, stop)] if first < stop else []

    def loaded(self, first: int, stop: int) -> None:
        """Rows ``first .. stop - 1`` were written into their ring rows."""
        lo, hi = self.row_lo, self.row_hi
        if lo < hi and first <= hi and stop >= lo:
            lo, hi = min(lo, first), max(hi, stop)
            if hi - lo > self.ring:
                lo, hi = (hi - self.ring, hi) if stop == hi else (lo, lo + self.ring)
        else:
            lo, hi = first, stop
        self.row_lo, self.row_hi = lo, hi


def ring_rows(geom: ExpmapGeometry) -> int:
    """The ring's default size: the most strip rows any frame reads, and two segments
    more (:func:`whole_segments`), at least 2."""
    most = max((b - a for a, b in map(geom.frame_rows, range(geom.frames))), default=0)
    return max(2, min(geom.rows, most + 2 * geom.rows_per_octave))


def whole_segments(geom: ExpmapGeometry, first: int, stop: int, ring: int) -> tuple[int, int]:
    """Strip rows ``first .. stop - 1`` widened to whole segments (a segment is a unit's
    rows; with ``tile = "auto"`` one stored tile high), when a ring of ``ring`` rows
    holds them. A frame of a zoom adds a few rows (P / frames per octave) to the window;
    fetched as they are, each frame would decode every tile they cross again (30 times
    over on a 1080p zoom at 30 frames an octave, BENCHMARKS.md); fetched as whole
    segments, each tile is decoded once."""
    p = geom.rows_per_octave
    a, b = first - first % p, min(geom.rows, -(-stop // p) * p)
    return (a, b) if b - a <= ring else (first, stop)


class Engine(Protocol):
    window: RowWindow

    def set_centre(self, centre: Raster) -> None: ...
    def ensure_rows(self, first: int, stop: int, fetch: Fetch) -> int: ...
    def synthesize(self, k: int, max_iter: int) -> dict[str, np.ndarray]: ...


class HostEngine:
    """The numpy reference on a ring of strip rows in host memory (the interface of
    :class:`farm.compute.synth.FrameSynthesizer`), in ``threads`` bands of rows at once
    (numpy releases the GIL in its array operations; default: one per core, at most 8)."""

    def __init__(self, geom: ExpmapGeometry, ring: int | None = None, threads: int | None = None):
        self.geom = geom
        self.threads = max(1, min(geom.height, threads or min(8, os.cpu_count() or 1)))
        self.window = RowWindow(ring or ring_rows(geom))
        shape = (self.window.ring, geom.angles)
        self.iterations = np.zeros(shape, np.uint32)
        self.fraction = np.zeros(shape, np.float32)
        self.centre: Raster | None = None

    def set_centre(self, centre: Raster) -> None:
        self.centre = centre

    def ensure_rows(self, first: int, stop: int, fetch: Fetch) -> int:
        """Make global rows ``first .. stop - 1`` resident; returns the rows fetched."""
        spans = self.window.missing(first, stop)
        for a, b in spans:
            rows = fetch(a, b)
            slots = np.arange(a, b) % self.window.ring
            self.iterations[slots] = rows.iterations
            self.fraction[slots] = rows.fraction
            self.window.loaded(a, b)
        return sum(b - a for a, b in spans)

    def synthesize(self, k: int, max_iter: int) -> dict[str, np.ndarray]:
        w = self.window
        strip = Raster(self.iterations, self.fraction, w.row_lo, None, w.row_hi)
        args = (self.geom, k, strip if w.row_lo < w.row_hi else None, self.centre, max_iter)
        if self.threads == 1:
            return synthesize_arrays(*args)
        cuts = np.linspace(0, self.geom.height, self.threads + 1).astype(int)
        with ThreadPoolExecutor(self.threads, thread_name_prefix="farm-synth") as pool:
            parts = list(pool.map(lambda b: synthesize_arrays(*args, band=b),
                                  zip(cuts[:-1], cuts[1:], strict=True)))
        out = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]
               if name != "histogram"}
        out["histogram"] = np.sum([p["histogram"] for p in parts], axis=0)
        return out
