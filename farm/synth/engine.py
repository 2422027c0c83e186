"""Synthesising the video frames of an expmap store, one frame after another.

:class:`Synthesis` turns the units of an expmap render into video frames
(:class:`~farm.color.raw.RawFrame`) for the store reader (``Store.raw``), so that
``farm frames``, ``farm encode`` and the frame sink colour them like directly rendered
frames. It keeps, between frames:

* a window of strip rows: a ring in which global strip row ``g`` lives in ring row
  ``g % ring``; consecutive frames of a zoom read nearly the same rows, so each new
  frame fetches only the rows it adds (about ``P / frames-per-octave``), never the
  whole window (a 1080p frame reads about 11 octaves of strip, 0.5 GB);
* the centre image;
* the last ``keep`` synthesised frames: colouring reads a frame's histogram some
  frames before the frame itself (its smoothing window), and gets the same frame
  back without a second synthesis.

Engines: ``opencl`` (:class:`farm.compute.synth.FrameSynthesizer`, the ring on the
device) and ``numpy`` (:class:`HostEngine`, the reference :func:`farm.synth.
synthesize_arrays` on a ring in host memory); both give the same frames bit for bit
(tests/test_expmap_synth.py). ``auto`` takes the OpenCL engine on a GPU and numpy
otherwise; the environment variable ``FARM_SYNTH_ENGINE`` (auto | numpy | opencl)
overrides it. One frame is synthesised at a time (a lock): the sink's frame threads
share one :class:`Synthesis`.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

import numpy as np

from farm.color.raw import RawFrame
from farm.compute.nodes import gpu_possible
from farm.errors import UsageError
from farm.plan.expmap import ExpmapGeometry
from farm.plan.units import ExpmapLayout
from farm.synth import Raster, synthesize_arrays

if TYPE_CHECKING:
    from farm.plan import Plan

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


def make_engine(geom: ExpmapGeometry, bins: int, engine: str = "auto") -> Engine:
    """The engine that synthesises frames of ``geom`` with up to ``bins`` histogram
    bins: ``numpy``, ``opencl`` (the best OpenCL device: a GPU, else PoCL's CPU) or
    ``auto`` (OpenCL on a GPU, numpy otherwise; ``FARM_SYNTH_ENGINE`` overrides)."""
    if engine == "auto":
        engine = os.environ.get("FARM_SYNTH_ENGINE", "auto") or "auto"
    if engine not in ("auto", "numpy", "opencl"):
        raise UsageError(f"FARM_SYNTH_ENGINE: {engine!r} is not auto, numpy or opencl")
    if engine == "auto" and not gpu_possible():
        engine = "numpy"  # no GPU device node: skip OpenCL's start-up
    if engine != "numpy":
        from farm.compute.synth import device_synthesizer

        found = device_synthesizer(geom, bins, gpu_only=engine == "auto")
        if found is not None:
            return found
        if engine == "opencl":
            raise UsageError("FARM_SYNTH_ENGINE=opencl: no OpenCL device can synthesise frames")
    return HostEngine(geom)


class Synthesis:
    """The video frames of one expmap render, synthesised on demand (thread-safe).

    ``layout``: its units (farm/plan/units.py); ``limits[k]``: video frame k's
    iteration limit, and its histogram's length less one; ``bins``: the store's
    histogram length (the engine's largest); ``keep``: synthesised frames kept for the
    next request of the same frame."""

    def __init__(self, layout: ExpmapLayout, limits: Sequence[int], bins: int, engine: str = "auto",
                 keep: int = 16):
        self.layout = layout
        self.geom = layout.geom
        self.limits = [int(m) for m in limits]
        self.bins = bins
        self.keep = keep
        self._engine_name = engine
        self._engine: Engine | None = None
        self._centre_loaded = False
        self._frames: collections.OrderedDict[int, RawFrame] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.synthesised = 0  # frames synthesised (not served from the cache)
        self.rows_fetched = 0  # strip rows read

    @classmethod
    def for_plan(cls, plan: Plan, engine: str = "auto", keep: int = 16) -> Synthesis:
        if plan.layout is None:
            raise ValueError("not an expmap plan")
        return cls(plan.layout, [f.max_iter for f in plan.video], plan.bins, engine, keep)

    def frame(self, k: int, rows: Fetch, centre: Callable[[], Raster]) -> RawFrame:
        """Video frame k, whose units must be complete; ``rows(a, b)`` reads global strip
        rows a .. b-1, ``centre()`` the centre image (called once, for the first frame
        that reads it: during a render the centre image may be the last to complete)."""
        with self._lock:
            if k in self._frames:
                self._frames.move_to_end(k)
                return self._frames[k]
            engine = self._ready_engine()
            if self.geom.uses_centre(k) and not self._centre_loaded:
                engine.set_centre(centre())
                self._centre_loaded = True
            first, stop = self.geom.frame_rows(k)
            if first < stop:
                first, stop = whole_segments(self.geom, first, stop, engine.window.ring)
                self.rows_fetched += engine.ensure_rows(first, stop, rows)
            limit = self.limits[k]
            arrays = engine.synthesize(k, limit)  # (its histogram: counts 0 .. limit)
            raw = RawFrame(k, arrays["iterations"], arrays["fraction"],
                           np.asarray(arrays["histogram"], np.int64))
            self.synthesised += 1
            self._frames[k] = raw
            while len(self._frames) > self.keep:
                self._frames.popitem(last=False)
            return raw

    def _ready_engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self.geom, self.bins, self._engine_name)
        return self._engine


# Synthesis state shared by every Store opened on the same file in this process (the
# frame sink opens the store afresh for each frame): key -> Synthesis.
_SHARED: dict[tuple, Synthesis] = {}
_SHARED_LOCK = threading.Lock()


def shared(key: tuple, make: Callable[[], Synthesis]) -> Synthesis:
    """The process's :class:`Synthesis` for ``key`` (a store's identity), made once."""
    with _SHARED_LOCK:
        if key not in _SHARED:
            if len(_SHARED) >= 4:  # stores seen long ago: free their windows
                _SHARED.pop(next(iter(_SHARED)))
            _SHARED[key] = make()
        return _SHARED[key]
