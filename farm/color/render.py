"""Colouring a whole frame: row bands on a thread pool, samples averaged in linear light.

:func:`colour` is what the sink and the commands call. It cuts the frame into bands
of rows and runs the method (:mod:`farm.color.methods`) on each band in a thread
pool; numpy releases the GIL inside its loops, so the bands use every core. A band
is given ``style.halo`` extra rows on each side (the estimated distance takes
differences across rows) and cropped after. Working on bands also keeps each step's
temporaries in the cache, which makes one thread faster too.

Anti-aliased frames ((H, W, S) arrays) are coloured sample by sample and averaged in
linear light (sRGB decoded, averaged, encoded again), so a filament covering half a
pixel gives the colour of half the light, not a darker one.

For a video, :func:`colour_i420` gives the encoder's own planes (farm/color/yuv.py)
instead of RGB bytes: made from the colours directly where the method allows it
(:func:`gives_i420`: ``shade`` of one-sample frames without a stored distance, the
default), converted from the RGB bytes otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor

import numpy as np

from farm.color import yuv
from farm.color.methods import INTERIOR, METHODS, SHADE_GLOSS, Style
from farm.color.raw import RawFrame
from farm.color.relief import shade_i420
from farm.color.stats import FrameStats
from farm.runtime.cores import usable_cores

# Pixels a band: enough to amortise each band's Python and numpy calls, few enough to
# stay near the cache. Measured with `shade` on the 2-core machine (ms a frame, 2
# threads): 1920x1080 bands of 32 rows 32.8, 64 26.7, 135 23.3, 270 24.7, 540 32.3;
# 640x360 bands of 32 rows 7.1, 90 3.7, 180 2.7 (one band a thread), 360 4.2.
BAND_PIXELS = 1 << 18


def _srgb_to_linear() -> np.ndarray:
    c = np.arange(256) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4).astype(np.float32)


TO_LINEAR = _srgb_to_linear()  # float32 (256,): sRGB byte -> linear light 0..1
ENCODE_STEPS = 4096


def _linear_to_srgb() -> np.ndarray:
    x = (np.arange(ENCODE_STEPS) + 0.5) / ENCODE_STEPS
    s = np.where(x <= 0.0031308, 12.92 * x, 1.055 * x ** (1 / 2.4) - 0.055)
    return np.clip(np.rint(s * 255), 0, 255).astype(np.uint8)


TO_SRGB = _linear_to_srgb()  # uint8 (ENCODE_STEPS,): linear light -> sRGB byte


def encode_linear(linear: np.ndarray) -> np.ndarray:
    """Linear light 0..1 (float) to sRGB bytes."""
    idx = np.clip(linear * ENCODE_STEPS, 0, ENCODE_STEPS - 1).astype(np.intp)
    out: np.ndarray = TO_SRGB[idx]
    return out


def colour_band(raw: RawFrame, stats: FrameStats, style: Style, y0: int, y1: int) -> np.ndarray:
    """uint8 (y1 - y0, W, 3): rows y0..y1-1 of the frame, every sample averaged."""
    h = raw.shape[0]
    lo, hi = max(0, y0 - style.halo), min(h, y1 + style.halo)
    band = raw.rows(lo, hi)
    method = METHODS[style.method]
    if raw.samples == 1:
        return method(band, stats, style)[y0 - lo:y1 - lo]
    acc = np.zeros((y1 - y0, raw.shape[1], 3), np.float32)
    for s in range(raw.samples):
        acc += TO_LINEAR[method(band.sample(s), stats, style)[y0 - lo:y1 - lo]]
    acc /= raw.samples
    return encode_linear(acc)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def steady_malloc() -> None:
    """Keep freed memory in the process (glibc): a band's temporaries (a few hundred kB
    each) would otherwise be mmapped and unmapped, or trimmed from the threads' heaps,
    at every step, and page faults took 40% of the colouring time (shade, 1080p,
    measured). Raises glibc's mmap threshold to 32 MB and its trim threshold to 256 MB
    (what MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ would set). No-op elsewhere."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def band_pool() -> Executor:
    """The process's band thread pool (created on first use, one thread a core)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            steady_malloc()
            _pool = ThreadPoolExecutor(usable_cores(), thread_name_prefix="farm-colour")
        return _pool


def band_rows_for(height: int, width: int, threads: int) -> int:
    """Rows a band: about BAND_PIXELS pixels, and no more than an even share of the
    frame's rows among ``threads`` (a small frame still spreads over every thread)."""
    rows = -(-BAND_PIXELS // max(1, width))
    share = -(-height // max(1, threads))
    return max(1, min(rows, share))


def gives_i420(style: Style, samples: int, distance: bool) -> bool:
    """Whether :func:`colour_i420` makes the video's planes from the colours themselves for
    frames of ``samples`` samples with (``distance``) or without a stored distance;
    elsewhere it converts its RGB bytes (farm.color.yuv.from_rgb, slower than leaving the
    conversion to ffmpeg)."""
    return style.method == "shade" and samples == 1 and not distance


def _in_bands(height: int, width: int, band_rows: int | None, pool: Executor | None,
              run: Callable[[int, int], None], pairs: bool = False) -> None:
    """``run(y0, y1)`` for each band of rows of a ``height`` x ``width`` frame: bands of
    ``band_rows`` rows (else :func:`band_rows_for`; ``pairs``: rounded up to even), on
    ``pool`` (None: in this thread)."""
    if band_rows is None:
        band_rows = band_rows_for(height, width, 1 if pool is None else usable_cores())
    if pairs:
        band_rows += band_rows % 2
    bands = [(y, min(height, y + band_rows)) for y in range(0, height, band_rows)]
    if pool is None:
        for y0, y1 in bands:
            run(y0, y1)
        return
    for fut in [pool.submit(run, y0, y1) for y0, y1 in bands]:
        fut.result()


def colour(raw: RawFrame, stats: FrameStats, style: Style, pool: Executor | None = None,
           band_rows: int | None = None) -> np.ndarray:
    """RGB uint8 (H, W, 3) of one frame; bands (of ``band_rows`` rows, else
    :func:`band_rows_for`) run on ``pool`` (None: in this thread). The result does not
    depend on the bands (tests/test_color.py)."""
    h, w = raw.shape
    out = np.empty((h, w, 3), np.uint8)

    def run(y0: int, y1: int) -> None:
        out[y0:y1] = colour_band(raw, stats, style, y0, y1)

    _in_bands(h, w, band_rows, pool, run)
    return out


def colour_i420(raw: RawFrame, stats: FrameStats, style: Style, pool: Executor | None = None,
                band_rows: int | None = None) -> yuv.I420:
    """:func:`colour`'s frame as the video's planes (:class:`farm.color.yuv.I420`):
    made from the colours where :func:`gives_i420` says so (relief.shade_i420, in bands
    of an even number of rows: a chroma row covers two), else :func:`colour`'s bytes
    converted."""
    if not gives_i420(style, raw.samples, raw.distance is not None):
        return yuv.from_rgb(colour(raw, stats, style, pool, band_rows))
    h, w = raw.shape
    frame = yuv.I420.empty(*yuv.even(w, h))
    planes = frame.planes
    eh = frame.height
    light = style.light_vector
    palette = yuv.palette_planes(style.planes)  # once a frame, not once a band

    def run(y0: int, y1: int) -> None:
        c0, c1 = max(0, y0 - yuv.REACH), min(eh, y1 + yuv.REACH)  # the chroma filter's rows
        lo, hi = max(0, c0 - style.halo), min(h, c1 + style.halo)
        out = (planes[0][y0:y1], planes[1][y0 // 2:y1 // 2], planes[2][y0 // 2:y1 // 2])
        shade_i420(raw.rows(lo, hi), stats, palette, INTERIOR, style.cycles, light,
                   style.relief, SHADE_GLOSS, slice(y0 - lo, y1 - lo), slice(c0 - lo, c1 - lo),
                   (c0 - (y0 - yuv.REACH), y1 + yuv.REACH - c1), out)

    _in_bands(eh, w, band_rows, pool, run, pairs=True)
    return frame
