"""Frame synthesis on an OpenCL device: ``kernels/synth.cl`` driven from the host.

:class:`FrameSynthesizer` keeps the centre image and a window of strip rows on the
device. The window is a ring: global strip row ``g`` lives in ring row ``g % ring``,
so moving from frame k to frame k+1 uploads only the rows frame k+1 reads that are
not there yet (about ``P / frames-per-octave`` rows), never the whole window. A frame
is then one kernel launch and the readback of its counts, offsets and histogram.

Each output pixel's place in the strip (its column and log radius) is the same for
every frame up to a shift of rows (and, for a turned frame, of columns: its angle's
``x_shift``; farm/synth/__init__.py), so the host computes it once, with the numpy
reference's own expressions, and the kernel needs no transcendental function; the
result equals :func:`farm.synth.synthesize_arrays` bit for bit on the devices tested
(tests/test_expmap_synth.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyopencl as cl
import pyopencl.cltypes as clt

from farm.compute import programs
from farm.compute.device import candidates
from farm.compute.events import wait_quietly
from farm.compute.inventory import DeviceInfo
from farm.compute.launch import LaunchConfig
from farm.errors import FarmError
from farm.plan.expmap import ExpmapGeometry
from farm.synth import Raster, frame_params, pixel_offsets, polar_coordinates
from farm.synth.engine import RowWindow, ring_rows


class FrameSynthesizer:
    """Synthesises frames of one geometry on one device.

    ``bins``: histogram length (the largest ``max_iter + 1`` asked for);
    ``ring``: strip rows kept on the device (default: the most any frame reads);
    ``distance``: the strip and centre rasters carry a distance estimate."""

    def __init__(self, device: cl.Device, info: DeviceInfo, geom: ExpmapGeometry, bins: int,
                 ring: int | None = None, distance: bool = False,
                 config: LaunchConfig | None = None):
        self.geom = geom
        self.info = info
        self.bins = bins
        self.distance = distance
        self.config = config or LaunchConfig.for_device(info)
        self.ctx = cl.Context([device])
        self.queue = cl.CommandQueue(self.ctx)
        options = programs.device_options(device, self.config.local_bins)
        self.hist_dtype = np.int64 if "-DHIST64" in options else np.uint32
        if distance:
            options += ("-DWITH_DISTANCE",)
        self.kernel = cl.Kernel(programs.build(self.ctx, ("histogram.cl", "synth.cl"), options), "synth")
        self.window = RowWindow(max(2, ring or ring_rows(geom)))
        self.ring = self.window.ring
        mf = cl.mem_flags
        a, (wc, hc) = geom.angles, geom.centre_size
        npix = geom.width * geom.height

        def buf(count: int, itemsize: int, flags: int = mf.READ_ONLY) -> cl.Buffer:
            return cl.Buffer(self.ctx, flags, max(1, count) * itemsize)

        self.strip = [buf(self.ring * a, 4), buf(self.ring * a, 4)]
        self.centre = [buf(wc * hc, 4), buf(wc * hc, 4)]
        if distance:
            self.strip.append(buf(self.ring * a, 8))
            self.centre.append(buf(wc * hc, 8))
        self.out = [buf(npix, 4, mf.WRITE_ONLY), buf(npix, 4, mf.WRITE_ONLY)]
        if distance:
            self.out.append(buf(npix, 8, mf.WRITE_ONLY))
        self.hist = buf(bins, 8, mf.READ_WRITE)
        u, v = pixel_offsets(geom.width, geom.height)
        x, rho = polar_coordinates(geom, u, v)  # frame-independent parts (a turn adds x_shift)
        polar = np.ascontiguousarray(np.stack([x, rho], axis=-1), dtype=np.float64)
        self.polar = cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=polar)

    @property
    def row_lo(self) -> int:
        return self.window.row_lo

    @property
    def row_hi(self) -> int:
        return self.window.row_hi

    # ------------------------------------------------------------------ data
    def _channels(self, raster: Raster) -> list[np.ndarray]:
        chans = [np.ascontiguousarray(raster.iterations, np.uint32),
                 np.ascontiguousarray(raster.fraction, np.float32)]
        if self.distance:
            if raster.distance is None:
                raise ValueError("this synthesizer was built for rasters with a distance estimate")
            chans.append(np.ascontiguousarray(raster.distance, np.complex64))
        return chans

    def set_centre(self, centre: Raster) -> None:
        """Upload the centre image ((Hc, Wc) rasters)."""
        if centre.shape != (self.geom.centre_size[1], self.geom.centre_size[0]):
            raise ValueError(f"centre image {centre.shape}, geometry wants {self.geom.centre_size[::-1]}")
        wait_quietly([cl.enqueue_copy(self.queue, dst, src, is_blocking=False)
                      for dst, src in zip(self.centre, self._channels(centre), strict=True)])

    def load_rows(self, rows: Raster) -> None:
        """Put global strip rows ``rows.first_row ..`` (at most ``ring``) into the ring
        (:class:`farm.synth.engine.RowWindow` keeps track of which rows are there)."""
        first, count = rows.first_row, rows.shape[0]
        if count > self.ring:
            raise ValueError(f"{count} rows do not fit a ring of {self.ring}")
        a = self.geom.angles
        copies = []
        for dst, src in zip(self.strip, self._channels(rows), strict=True):
            item = src.dtype.itemsize * a
            done = 0
            while done < count:  # split where the ring wraps
                slot = (first + done) % self.ring
                n = min(count - done, self.ring - slot)
                copies.append(cl.enqueue_copy(self.queue, dst, src[done:done + n], dst_offset=slot * item,
                                              is_blocking=False))
                done += n
        wait_quietly(copies)  # (the host arrays stay alive until the copies are done)
        self.window.loaded(first, first + count)

    def ensure_rows(self, first: int, stop: int, fetch: Callable[[int, int], Raster]) -> int:
        """Make global rows ``first .. stop-1`` resident, fetching only the missing ones
        (``fetch(a, b)`` returns a Raster of rows a..b-1). Returns the rows uploaded."""
        spans = self.window.missing(first, stop)
        for a, b in spans:
            self.load_rows(fetch(a, b))
        return sum(b - a for a, b in spans)

    # ------------------------------------------------------------------ frames
    def synthesize(self, k: int, max_iter: int) -> dict[str, np.ndarray]:
        """Frame k's arrays, as :func:`farm.synth.synthesize_arrays` returns them."""
        if max_iter + 1 > self.bins:
            raise ValueError(f"max_iter {max_iter} needs {max_iter + 1} histogram bins, have {self.bins}")
        geom, fp = self.geom, frame_params(self.geom, k)
        first, stop = geom.frame_rows(k)
        if first < stop and not (self.row_lo <= first and stop <= self.row_hi):
            raise ValueError(f"frame {k} reads strip rows {first}..{stop - 1}; "
                             f"rows {self.row_lo}..{self.row_hi - 1} are loaded")
        w, h = geom.width, geom.height
        npix = w * h
        q = self.queue
        cl.enqueue_fill_buffer(q, self.hist, np.zeros(1, self.hist_dtype), 0,
                               (max_iter + 1) * np.dtype(self.hist_dtype).itemsize)
        wc, hc = geom.centre_size
        args: list = [*self.strip[:2], np.uint32(self.ring), np.uint32(geom.angles), self.polar,
                      np.float64(fp.y_off), np.float64(fp.rows_per_octave),
                      np.int32(self.row_lo), np.int32(max(self.row_hi, self.row_lo + 2)),
                      *self.centre[:2], np.uint32(wc), np.uint32(hc), np.float64(fp.zoom),
                      np.float64(fp.t_off), np.float64(fp.inv_blend),
                      np.array([fp.cos, fp.sin], dtype=np.float64).view(clt.double2)[0],
                      np.float64(fp.x_shift), np.uint32(w), np.uint32(h), np.uint32(max_iter)]
        if self.distance:
            args += [self.strip[2], self.centre[2], np.float64(fp.de_off), self.out[2]]
        args += [self.out[0], self.out[1], self.hist]
        global_size = self.config.global_size(npix, self.info.compute_units)
        self.kernel(q, (global_size,), (self.config.local_size,), *args)
        iterations = np.empty((h, w), np.uint32)
        fraction = np.empty((h, w), np.float32)
        hist = np.empty(max_iter + 1, self.hist_dtype)
        copies = [cl.enqueue_copy(q, iterations, self.out[0], is_blocking=False),
                  cl.enqueue_copy(q, fraction, self.out[1], is_blocking=False),
                  cl.enqueue_copy(q, hist, self.hist, is_blocking=False)]
        de = np.empty((h, w), np.complex64) if self.distance else None
        if de is not None:
            copies.append(cl.enqueue_copy(q, de, self.out[2], is_blocking=False))
        wait_quietly(copies)
        out: dict[str, np.ndarray] = {"iterations": iterations, "fraction": fraction,
                                      "histogram": hist.astype(np.int64)}
        if de is not None:
            out["distance"] = de
        return out


def device_synthesizer(geom: ExpmapGeometry, bins: int, gpu_only: bool = True,
                       ring: int | None = None) -> FrameSynthesizer | None:
    """A synthesizer on the best OpenCL device (with ``gpu_only``, only a GPU), or None
    when there is none."""
    try:
        devices = candidates("gpu" if gpu_only else "auto")
    except FarmError:
        return None
    for info, device in devices:
        if info.fp64 and (info.kind == "GPU" or not gpu_only):
            return FrameSynthesizer(device, info, geom, bins, ring)
    return None
