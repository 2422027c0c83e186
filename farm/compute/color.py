"""The colour methods as an OpenCL kernel (kernels/color.cl): a frame in, RGB out.

:class:`ClColourer` has the signature of :func:`farm.color.render.colour`
(``(RawFrame, FrameStats, Style) -> uint8 (H, W, 3)``, or with ``i420`` the video's
planes) and gives the same colours,
at most 1 in 255 per channel apart (tests/test_color_kernel.py). It runs on a GPU,
or on PoCL's CPU device, which spreads the kernel over every core.

Threads: the sink's frame threads call it at once. Each calling thread has its own
command queue, kernel object and device buffers (kept from frame to frame while the
frame's size stays; the CDF's buffer grows as needed), so nothing is shared but the
context, the program and the read-only tables: while one thread's frame is copied or
coloured, another reads its next frame from the store. A call enqueues its uploads
without waiting (the host arrays are kept alive until the copies are done), the
kernel after them, and waits once, for the copy of the colours back.

Frames of a compressed store come as their channels' byte planes when the store
holds a frame as one tile (:meth:`farm.store.reader.Store.planes`): they are uploaded
as they are and unshuffled on the device (kernels/shuffle.cl, ``element_bytes``), which
spares the host's numpy unshuffle, 6 of the 14 CPU seconds the sink spent reading the
360 frames of the 1080p minibrot zoom on a 16-core H200 host (py-spy, BENCHMARKS.md).

A 1080p frame moves 16 MB to the device (counts and offsets, 4 bytes each; 24 MB more
with a stored distance) and 6 MB back (3 MB for a video, whose planes are made on the
device: farm/color/yuv.py); on a PCIe 5 GPU that is a few milliseconds,
against ~17 ms per frame when every call allocated its buffers and copied under one
lock (58 frames/s measured on an H200).
"""

from __future__ import annotations

import functools
import threading

import numpy as np
import pyopencl as cl

from farm.color import yuv
from farm.color.methods import METHODS, SHADE_GLOSS, Style
from farm.color.raw import PlanesFrame, RawFrame
from farm.color.render import TO_LINEAR, TO_SRGB
from farm.color.stats import FrameStats
from farm.compute import clstart
from farm.compute.device import candidates
from farm.compute.events import wait_quietly
from farm.compute.inventory import DeviceInfo
from farm.compute.programs import build
from farm.errors import FarmError
from farm.spec.palettes import LUT_SIZE

GROUP = 64  # work-items per work-group, along a row (PoCL runs a group as one loop)
METHOD_IDS = {name: k for k, name in enumerate(("histogram", "smooth", "distance", "shade"))}
assert set(METHOD_IDS) == set(METHODS)


class _Lane:
    """One thread's queue, kernels and buffers."""

    def __init__(self, ctx: cl.Context, program: cl.Program, unshuffle: cl.Program):
        self.ctx = ctx
        self.queue = cl.CommandQueue(ctx)
        self.kernel = cl.Kernel(program, "colour")
        self.to_i420 = cl.Kernel(program, "to_i420")
        self.unshuffle = cl.Kernel(unshuffle, "element_bytes")
        self.buffers: dict[str, tuple[cl.Buffer, int]] = {}  # name -> (buffer, its bytes)
        # the frame's uploads' events, kept until its colours are read back: pyopencl's
        # event of a copy from host memory waits for the copy when it is deleted, holding
        # the interpreter lock (every other frame thread would stall meanwhile)
        self.pending: list[cl.Event] = []

    def buffer(self, name: str, nbytes: int, flags: int) -> cl.Buffer:
        """The lane's buffer ``name`` of at least ``nbytes`` (reallocated when it grows)."""
        buf, size = self.buffers.get(name, (None, 0))
        if buf is None or size < nbytes:  # half as much again: a CDF grows a little every frame
            size = max(nbytes + nbytes // 2, 8)
            buf = cl.Buffer(self.ctx, flags, size)
            self.buffers[name] = (buf, size)
        return buf

    def upload(self, name: str, array: np.ndarray) -> cl.Buffer:
        """``array`` into the lane's buffer ``name``, enqueued without waiting."""
        host = np.ascontiguousarray(array)
        buf = self.buffer(name, host.nbytes, cl.mem_flags.READ_ONLY)
        self.pending.append(cl.enqueue_copy(self.queue, buf, host, is_blocking=False))
        return buf

    def upload_planes(self, name: str, planes: np.ndarray, size: int) -> cl.Buffer:
        """A channel's byte planes (elements of ``size`` bytes) uploaded as they are, then
        put back in element order on the device (kernels/shuffle.cl) into the lane's
        buffer ``name/elements``, enqueued without waiting."""
        staged = self.upload(name + "/planes", planes)
        n = planes.size // size
        buf = self.buffer(name + "/elements", planes.nbytes, cl.mem_flags.READ_WRITE)
        self.unshuffle(self.queue, (-(-n // GROUP) * GROUP,), (GROUP,), staged, buf,
                       np.uint32(size), np.uint32(n))
        return buf


class ClColourer:
    def __init__(self, info: DeviceInfo, device: cl.Device):
        self.info = info
        clstart.prepare_contexts([device])  # made without holding the interpreter's lock
        self.ctx = clstart.context(device)
        self.program = build(self.ctx, ("color.cl",))
        self.unshuffle = build(self.ctx, ("shuffle.cl",))
        mf = cl.mem_flags
        self._to_lin = cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=TO_LINEAR)
        self._to_srgb = cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=TO_SRGB)
        self._none = cl.Buffer(self.ctx, mf.READ_ONLY, 8)
        self._luts: dict[bytes, cl.Buffer] = {}
        self._lock = threading.Lock()  # guards the palette cache
        self._local = threading.local()

    def _lane(self) -> _Lane:
        lane: _Lane | None = getattr(self._local, "lane", None)
        if lane is None:
            lane = self._local.lane = _Lane(self.ctx, self.program, self.unshuffle)
        return lane

    def _lut(self, table: np.ndarray) -> cl.Buffer:
        key = table.tobytes()
        with self._lock:
            if key not in self._luts:
                rgba = np.zeros((LUT_SIZE, 4), np.uint8)
                rgba[:, :3] = table
                self._luts[key] = cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                            hostbuf=rgba)
            return self._luts[key]

    takes_planes = True  # a PlanesFrame will do: the device unshuffles (Store.planes)

    def gives_i420(self, style: Style, samples: int, distance: bool) -> bool:
        """Every frame's colours can come back as the video's planes (``i420``)."""
        return True

    def __call__(self, raw: RawFrame | PlanesFrame, stats: FrameStats, style: Style,
                 i420: bool = False) -> np.ndarray | yuv.I420:
        """uint8 (H, W, 3), or with ``i420`` the video's planes, converted on the device
        (kernels/color.cl, ``to_i420``): half the bytes to read back, none for ffmpeg
        to convert."""
        h, w = raw.shape
        s = raw.samples
        rgb_bytes = h * w * 3
        lane = self._lane()
        if isinstance(raw, PlanesFrame):
            iters = lane.upload_planes("iters", raw.iterations, 4)
            frac = lane.upload_planes("frac", raw.fraction, 4)
            dist = lane.upload_planes("dist", raw.distance, 8) if raw.distance is not None else self._none
        else:
            iters = lane.upload("iters", raw.iterations.astype(np.uint32, copy=False))
            frac = lane.upload("frac", raw.fraction.astype(np.float32, copy=False))
            dist = (lane.upload("dist", raw.distance.astype(np.complex64, copy=False))
                    if raw.distance is not None else self._none)
        cdf = lane.upload("cdf", stats.scaled(style.cycles))
        rgb = lane.buffer("rgb", rgb_bytes, cl.mem_flags.READ_WRITE)
        light = np.array([*style.light_vector, 0.0], np.float32)
        gw = -(-w // GROUP) * GROUP
        lane.kernel(lane.queue, (gw, h), (GROUP, 1), iters, frac, dist, cdf, self._lut(style.lut),
                    self._to_lin, self._to_srgb, rgb,
                    np.uint32(w), np.uint32(h), np.uint32(s), np.uint32(len(stats.cdf)),
                    np.uint32(METHOD_IDS[style.method]), np.uint32(raw.distance is not None),
                    np.float64(style.density),
                    np.float64(stats.mu_low),
                    np.float32(style.line_width / 2 + 0.5 if style.line_width > 0 else 0.0),
                    np.float32(style.relief), np.float32(SHADE_GLOSS), light,
                    np.array([*style.interior, 0], np.uint8), np.array([*style.line, 0], np.uint8))
        out: np.ndarray | yuv.I420
        if i420:
            out = yuv.I420.empty(*yuv.even(w, h))
            planes = lane.buffer("i420", out.data.nbytes, cl.mem_flags.WRITE_ONLY)
            ew, eh = out.width, out.height
            lane.to_i420(lane.queue, (-(-(ew // 2) // GROUP) * GROUP, eh // 2), (GROUP, 1), rgb,
                         np.uint32(w), np.uint32(ew), np.uint32(eh), planes)
            host, device = out.data, planes
        else:
            out = host = np.empty((h, w, 3), np.uint8)
            device = rgb
        wait_quietly([cl.enqueue_copy(lane.queue, host, device, is_blocking=False)])
        lane.pending.clear()  # complete: an in-order queue ran them before the read-back
        return out


_made = threading.Lock()


@functools.cache
def _colourer(selector: str) -> ClColourer:
    info, device = candidates(selector)[0]
    return ClColourer(info, device)


def gpu_colourer(require: bool = False, selector: str = "auto") -> ClColourer | None:
    """A colourer on the best OpenCL device (a GPU, else PoCL's CPU), built once per
    process (the sinks of a segmented video ask for it at once); None when there is
    none (``require``: raise instead)."""
    try:
        with _made:
            return _colourer(selector)
    except (FarmError, cl.Error):
        if require:
            raise
        return None
