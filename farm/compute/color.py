"""The colour methods as an OpenCL kernel (kernels/color.cl): a frame in, RGB out.

:class:`ClColourer` has the signature of :func:`farm.color.render.colour`
(``(RawFrame, FrameStats, Style) -> uint8 (H, W, 3)``) and gives the same colours,
at most 1 in 255 per channel apart (tests/test_color_kernel.py). It runs on a GPU,
or on PoCL's CPU device, which spreads the kernel over every core. One call at a time
per colourer (a lock): the sink's frame threads share it.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
import pyopencl as cl

from farm.color.methods import METHODS, SHADE_GLOSS, Style
from farm.color.palettes import LUT_SIZE
from farm.color.render import TO_LINEAR, TO_SRGB
from farm.color.stats import FrameStats
from farm.compute.device import DeviceInfo, candidates
from farm.compute.programs import build
from farm.errors import FarmError
from farm.raw import RawFrame

GROUP = 64  # work-items per work-group, along a row (PoCL runs a group as one loop)
METHOD_IDS = {name: k for k, name in enumerate(("histogram", "smooth", "distance", "shade"))}
assert set(METHOD_IDS) == set(METHODS)


class ClColourer:
    def __init__(self, info: DeviceInfo, device: cl.Device):
        self.info = info
        self.ctx = cl.Context([device])
        self.queue = cl.CommandQueue(self.ctx)
        self.kernel = cl.Kernel(build(self.ctx, ("color.cl",)), "colour")
        mf = cl.mem_flags
        self._to_lin = cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=TO_LINEAR)
        self._to_srgb = cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=TO_SRGB)
        self._none = cl.Buffer(self.ctx, mf.READ_ONLY, 8)
        self._luts: dict[bytes, cl.Buffer] = {}
        self._lock = threading.Lock()

    def _lut(self, table: np.ndarray) -> cl.Buffer:
        key = table.tobytes()
        if key not in self._luts:
            rgba = np.zeros((LUT_SIZE, 4), np.uint8)
            rgba[:, :3] = table
            self._luts[key] = cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                        hostbuf=rgba)
        return self._luts[key]

    def _upload(self, array: np.ndarray) -> cl.Buffer:
        return cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                         hostbuf=np.ascontiguousarray(array))

    def __call__(self, raw: RawFrame, stats: FrameStats, style: Style) -> np.ndarray:
        h, w = raw.shape
        s = raw.samples
        out = np.empty((h, w, 3), np.uint8)
        with self._lock:
            iters = self._upload(raw.iterations.astype(np.uint32, copy=False))
            frac = self._upload(raw.fraction.astype(np.float32, copy=False))
            dist = (self._upload(raw.distance.astype(np.complex64, copy=False))
                    if raw.distance is not None else self._none)
            cdf = self._upload(np.asarray(stats.cdf, np.float64) * (style.cycles * LUT_SIZE))
            rgb = cl.Buffer(self.ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
            light = np.array([*style.light_vector, 0.0], np.float32)
            gw = -(-w // GROUP) * GROUP
            self.kernel(self.queue, (gw, h), (GROUP, 1), iters, frac, dist, cdf, self._lut(style.lut),
                        self._to_lin, self._to_srgb, rgb,
                        np.uint32(w), np.uint32(h), np.uint32(s), np.uint32(len(stats.cdf)),
                        np.uint32(METHOD_IDS[style.method]), np.uint32(raw.distance is not None),
                        np.float64(style.density),
                        np.float64(stats.mu_low),
                        np.float32(style.line_width / 2 + 0.5 if style.line_width > 0 else 0.0),
                        np.float32(style.relief), np.float32(SHADE_GLOSS), light,
                        np.array([*style.interior, 0], np.uint8), np.array([*style.line, 0], np.uint8))
            cl.enqueue_copy(self.queue, out, rgb)
        return out


@functools.cache
def _colourer(selector: str) -> ClColourer:
    info, device = candidates(selector)[0]
    return ClColourer(info, device)


def gpu_colourer(require: bool = False, selector: str = "auto") -> ClColourer | None:
    """A colourer on the best OpenCL device (a GPU, else PoCL's CPU), built once per
    process; None when there is none (``require``: raise instead)."""
    try:
        return _colourer(selector)
    except (FarmError, cl.Error):
        if require:
            raise
        return None
