"""Synthesising the video frames of an expmap store, one frame after another, on the
engine chosen for this machine.

:class:`Synthesis` turns the units of an expmap render into video frames
(:class:`~farm.color.raw.RawFrame`) for the store reader (``Store.raw``), so that
``farm frames``, ``farm encode`` and the frame sink colour them like directly rendered
frames. It keeps, between frames:

* its engine's window of strip rows and the centre image (farm/synth/engine.py);
* the last ``keep`` synthesised frames: colouring reads a frame's histogram some
  frames before the frame itself (its smoothing window), and gets the same frame
  back without a second synthesis.

The engine (:func:`make_engine`): ``auto`` takes the OpenCL engine
(:class:`farm.compute.synth.FrameSynthesizer`) on a GPU and numpy
(:class:`farm.synth.engine.HostEngine`) otherwise; the environment variable
``FARM_SYNTH_ENGINE`` (auto | numpy | opencl) overrides it. One frame is synthesised
at a time (a lock): the sink's frame threads share one :class:`Synthesis`.
:func:`shared` keeps one per store for the whole process.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from farm.color.raw import RawFrame
from farm.compute.nodes import gpu_possible
from farm.errors import UsageError
from farm.plan.expmap import ExpmapGeometry
from farm.plan.units import ExpmapLayout
from farm.synth import Raster
from farm.synth.engine import Engine, Fetch, HostEngine, whole_segments

if TYPE_CHECKING:
    from farm.plan import Plan


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
        from farm.compute.synth import device_synthesizer  # (pyopencl only where it may be used)

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
