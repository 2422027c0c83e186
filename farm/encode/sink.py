"""The frame sink: colour and write frames as soon as their raw data is complete.

One code path for "video during the render" and for ``farm encode`` / ``farm frames``
afterwards: the render's master calls :meth:`FrameSink.frame_complete` for each frame
whose tiles are all stored (a finished store: every frame, up front), then
:meth:`FrameSink.finish` (or :meth:`FrameSink.abort`).

Frame ``f`` is coloured once ``f`` and every frame of its colouring window
(``f-K .. f+K``, ``K = color.smoothing``) are complete. Its raw data and histograms
are read through one store reader kept open for the sink's life
(:meth:`farm.store.reader.Store.raw`): what a render changes under it (tiles, their
lengths, histogram rows, done flags) it reads with pread, past HDF5's caches. Work is
off the caller's thread: a scheduler thread hands ready frames, in output order, to a
few frame threads (read, colour on every core, and for PNG outputs compress and
write); for a video it then pipes the coloured frames to ffmpeg in order, and closes
the output as soon as the last frame is written (ffmpeg then encodes the frames it still
holds: x264's lookahead, a third of a second at 1080p; each segment of a segmented video
does so on its own, not in turn at :meth:`FrameSink.finish`).

Thread-safety: ``frame_complete`` only records the frame and wakes the scheduler (it
never blocks on colouring, encoding or I/O, and never raises); ``finish`` and ``abort``
are called once, from one thread.

Interrupted (``abort``, or an error) before its last frame is written: ffmpeg is killed
and the partial video ``.NAME.partial.mp4`` removed; PNGs already in place are complete
(after the last frame the video is complete, and stays). Nothing half written is ever
left under a final name. A resumed render colours the video from the start.
"""

from __future__ import annotations

import collections
import concurrent.futures
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from farm.color.methods import Style
from farm.color.raw import PlanesFrame, RawFrame
from farm.color.stats import FrameStats, Statistics
from farm.encode.early import SELECTORS, colour_engine
from farm.encode.outputs import Output
from farm.errors import StoreError, UsageError
from farm.runtime.cores import usable_cores
from farm.runtime.progress import Progress
from farm.store.reader import Store

# tests only: seconds each frame waits, so that a test can interrupt a small encode
TEST_DELAY = float(os.environ.get("FARM_TEST_FRAME_DELAY", "0") or 0)

# (frame, its statistics, style) -> uint8 (H, W, 3); the frame is a RawFrame, or a
# PlanesFrame for a colourer whose ``takes_planes`` is true (farm/compute/color.py). A
# colourer with a method ``gives_i420(style, samples, distance)`` that says yes for the
# store is called with ``i420=True`` for a video, and then gives the video's planes
# (farm/color/yuv.py) for ffmpeg to take as they are.
Colourer = Callable[..., Any]


class Bar(Protocol):
    """A progress bar (:class:`farm.runtime.progress.Progress`, or one shared by sinks)."""

    def advance(self, n: int = 1) -> None: ...
    def close(self) -> None: ...


def default_colourer(engine: str = "auto", bands: bool = True) -> Colourer:
    """``numpy``, ``opencl`` (kernels/color.cl on the best OpenCL device: a GPU, else
    PoCL's CPU device) or ``auto``: the kernel on a GPU when there is one, numpy
    otherwise (numpy needs no device, and on two cores PoCL's kernel took 10.5 ms of CPU
    a 640x360 frame against numpy's 3.8). The environment variable FARM_COLOR_ENGINE
    overrides ``auto``. ``bands``: numpy colours a frame's row bands on every core (the
    band pool), else in the calling thread (a video's sink, which colours several frames
    at once: splitting each over the cores as well cost 0.10-0.15 CPU s more for the
    120 frames of a 640x360 zoom on two cores, where x264 needs every cycle)."""
    engine = colour_engine(engine)
    if engine in SELECTORS:
        from farm.compute.color import gpu_colourer

        cl_colourer = gpu_colourer(require=engine == "opencl", selector=SELECTORS[engine])
        if cl_colourer is not None:
            return cl_colourer
    elif engine != "numpy":
        raise UsageError(f"FARM_COLOR_ENGINE: {engine!r} is not auto, numpy or opencl")
    from farm.color.render import band_pool, steady_malloc

    steady_malloc()  # (band_pool's first call does it too)
    return NumpyColourer(band_pool() if bands else None)


class NumpyColourer:
    """farm/color/render.py's :func:`colour`, on ``pool`` (None: in the calling thread)."""

    def __init__(self, pool: Any = None):
        self.pool = pool

    def gives_i420(self, style: Style, samples: int, distance: bool) -> bool:
        from farm.color.render import gives_i420

        return gives_i420(style, samples, distance)

    def __call__(self, raw: RawFrame, stats: FrameStats, style: Style, i420: bool = False) -> Any:
        from farm.color.render import colour, colour_i420

        return (colour_i420 if i420 else colour)(raw, stats, style, self.pool)


def i420_for(colourer: Colourer | None, style: Style, samples: int, distance: bool) -> bool:
    """Whether a video's frames come from ``colourer`` as planes (``i420``). None: the
    colourer :func:`default_colourer` will make, decided before it is made (the encoder
    starts first): the device's kernel converts every frame; numpy where it colours the
    planes directly (elsewhere ffmpeg's own conversion is cheaper than numpy's). Where a
    device was to colour and none can, numpy converts the frames it cannot make as planes
    itself (farm.color.yuv.from_rgb): slower than ffmpeg, and only then."""
    if colourer is None:
        if colour_engine() in SELECTORS:
            return True
        return NumpyColourer().gives_i420(style, samples, distance)
    says = getattr(colourer, "gives_i420", None)
    return bool(says and says(style, samples, distance))


def video_threads() -> int:
    """Frames a video's sink reads and colours at once: half the cores, 3 to 8 (a frame's
    reading, decoding and colouring wait on the disk, the GPU and each other, and the
    encoder wants frames at its own pace)."""
    return min(8, max(3, usable_cores() // 2))


class FramePool:
    """Frame threads shared by the sinks of a segmented video, which run the lowest
    frame asked for first: the segments are then coloured in turn, and each segment's
    encoder has its frames, and starts its real work, as early as it can (x264 holds a
    short segment's frames until it has them all). Before, each sink had a pool of its
    own, every segment was fed at once and every encoder worked at the end (16 segments
    of the minibrot zoom on a 16-core H200 host: frames written until 2.2-4.6 s,
    encoders done at 3.0-8.1 s; BENCHMARKS.md, fourteenth session).
    ``submit(fn, frame)`` runs ``fn(frame)``; ``shutdown`` as an executor's."""

    def __init__(self, threads: int):
        self.threads = max(1, threads)
        self._heap: list[tuple[int, int, Callable[[int], Any], Future]] = []
        self._seq = itertools.count()  # equal frames (none, between segments) in order of asking
        self._cond = threading.Condition()
        self._closed = False
        self._workers = [threading.Thread(target=self._work, name=f"farm-frame_{k}", daemon=True)
                         for k in range(self.threads)]
        for worker in self._workers:
            worker.start()

    def submit(self, fn: Callable[[int], Any], frame: int) -> Future:
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the frame pool is shut down")
            heapq.heappush(self._heap, (frame, next(self._seq), fn, future))
            self._cond.notify()
        return future

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._heap and not self._closed:
                    self._cond.wait()
                if not self._heap:
                    return  # shut down, and nothing left
                frame, _, fn, future = heapq.heappop(self._heap)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(frame))
            except BaseException as err:  # the sink that asked raises it
                future.set_exception(err)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closed = True
            if cancel_futures:
                for *_, future in self._heap:
                    future.cancel()
                self._heap.clear()
            self._cond.notify_all()
        if wait:
            for worker in self._workers:
                worker.join()


def _drop(pending: collections.deque[tuple[int, Future]]) -> None:
    """Cancel the frames asked for and not begun; wait for those begun (a shared pool's
    threads would otherwise read a store the sink has closed)."""
    for _, fut in pending:
        fut.cancel()
    concurrent.futures.wait([fut for _, fut in pending])


class FrameSink:
    """Colours the frames ``frames`` (default: all) of the store at ``store_path`` with
    ``style`` and hands them to ``output`` as they become complete.

    ``threads``: frames read and coloured at once (for a video, :func:`video_threads`;
    for PNG outputs, one per core so that compression uses them all); ``pool``: the
    frame threads to use instead of ``threads`` of its own (then ``threads`` is how many
    of its frames it asks for at once: a :class:`FramePool` shared by a segmented
    video's sinks); ``on_closed``: called once the output is closed (all written). ``progress``:
    draw a progress bar; ``bar``: advance this one instead (shared with other sinks)."""

    def __init__(self, store_path: str | os.PathLike[str], output: Output, style: Style,
                 smoothing: int, frames: Iterable[int] | None = None, *,
                 colourer: Colourer | None = None, threads: int | None = None,
                 pool: FramePool | None = None, progress: bool = False, bar: Bar | None = None,
                 on_closed: Callable[[], None] | None = None):
        self.store_path = Path(store_path)
        # one reader for the sink's life, shared by its frame threads: what a render
        # changes it reads past HDF5's caches (farm/store/reader.py, Store._live); an
        # expmap store's frames come from the sink's own synthesis, whose window of
        # strip rows follows the sink's frames (a segment's, in a segmented video)
        self.store = Store(self.store_path, own_synthesis=True)
        self.total = self.store.frames
        self.order = sorted(set(range(self.total) if frames is None else frames))
        if self.order and not 0 <= self.order[0] <= self.order[-1] < self.total:
            self.store.close()
            raise StoreError(f"store {store_path}: has frames 0..{self.total - 1}")
        self.output, self.style = output, style
        self.stats = Statistics(self.total, smoothing)
        # made on the scheduler thread before the first frame (a GPU colourer opens an
        # OpenCL context and builds its kernel: a render need not wait for that)
        self.colourer: Colourer | None = colourer
        # a video's frames as its planes where the colourer makes them (farm/color/yuv.py)
        spec = self.store.spec
        self.i420 = (hasattr(output, "take_i420")
                     and i420_for(colourer, style, spec.image.samples, spec.render.distance))
        if threads is None:
            threads = video_threads() if output.ordered else usable_cores()
        self.threads = max(1, threads)
        self.error: BaseException | None = None
        self._result: Path | None = None  # the output's path, once it is closed
        self._on_closed = on_closed  # called then (a segmented video's join takes the segment)
        # for the render's timeline: seconds colouring (summed over frame threads), seconds
        # handing frames to the output (ffmpeg's pipe: encoding), frames written
        self.color_s = self.write_s = 0.0
        self.written = 0
        self._complete = np.zeros(self.total, bool)
        self._cond = threading.Condition()
        self._closing = self._stopped = False
        label = "encode" if output.ordered else "frames"
        self._bar: Bar | None = bar or (Progress(len(self.order), label, unit="frames") if progress else None)
        self._own_pool = pool is None
        self._pool: ThreadPoolExecutor | FramePool = (
            pool or ThreadPoolExecutor(self.threads, thread_name_prefix="farm-frame"))
        self._thread = threading.Thread(target=self._run, name="farm-sink", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Every frame is written and the output closed (a video's encoder has ended)."""
        return self._result is not None

    # ------------------------------------------------------------------ caller side
    def frame_complete(self, f: int) -> None:
        """Frame ``f``'s tiles and histogram are in the store. Cheap, never blocks."""
        with self._cond:
            if 0 <= f < self.total:
                self._complete[f] = True
                self._cond.notify_all()

    def finish(self) -> Path:
        """Wait until every frame is written; the finished video (or directory, or
        still) is then in place and its path returned. Raises what went wrong (after
        cleaning up, as :meth:`abort`), e.g. a frame that never completed."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        if self._own_pool:  # (a shared pool has run every frame of this sink by now)
            self._pool.shutdown(wait=True)
        self.store.close()
        if self.error is not None:
            self.output.abort()
            raise self.error
        if self._bar:
            self._bar.close()
        assert self._result is not None  # _run closed the output after the last frame
        return self._result

    def abort(self) -> None:
        """Stop now and remove whatever is not complete. Idempotent."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join()  # (it cancelled the frames it had asked for and not got)
        if self._own_pool:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self.store.close()
        self.output.abort()
        if self._bar:
            self._bar.close()

    def __enter__(self) -> FrameSink:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            self.abort()

    # ------------------------------------------------------------------ scheduler
    def _ready(self, f: int) -> bool:
        return bool(self._complete[self.stats.needs(f).start:self.stats.needs(f).stop].all())

    def _run(self) -> None:
        pending: collections.deque[tuple[int, Future[np.ndarray | None]]] = collections.deque()
        nxt = 0
        try:
            if self.i420:
                self.output.take_i420()  # type: ignore[attr-defined]
            self.output.prepare()  # the encoder starts before the first frame is ready
            if self.colourer is None:  # a video's frame threads each colour a frame whole
                self.colourer = default_colourer(bands=not self.output.ordered)
            while True:
                with self._cond:
                    while True:
                        if self._stopped:
                            break
                        submit = (nxt < len(self.order) and len(pending) < self.threads
                                  and self._ready(self.order[nxt]))
                        head = bool(pending) and pending[0][1].done()
                        if submit or head or (nxt == len(self.order) and not pending):
                            break
                        if self._closing and not pending:
                            missing = [g for g in self.stats.needs(self.order[nxt])
                                       if not self._complete[g]]
                            raise StoreError(f"store {self.store_path}: frame {missing[0]} is not "
                                             f"complete (needed for frame {self.order[nxt]})")
                        self._cond.wait()
                if self._stopped:  # (out of the lock: a frame thread takes it as it ends)
                    _drop(pending)
                    return
                if submit:
                    fut = self._pool.submit(self._frame, self.order[nxt])
                    fut.add_done_callback(self._wake)
                    pending.append((self.order[nxt], fut))
                    nxt += 1
                elif head:
                    f, done = pending.popleft()
                    rgb = done.result()
                    if self.output.ordered and rgb is not None:
                        t0 = time.perf_counter()
                        self.output.write(f, rgb)
                        self.write_s += time.perf_counter() - t0
                    self.written += 1
                    if self._bar:
                        self._bar.advance()
                else:  # every frame written: the output is finished now, not at finish()
                    # (a segment's encoder then flushes while later segments still encode)
                    self._result = self.output.close()
                    if self._on_closed is not None:
                        self._on_closed()
                    return
        except BaseException as err:  # finish() raises it
            self.error = err
            _drop(pending)

    def _wake(self, _fut: Future) -> None:
        with self._cond:
            self._cond.notify_all()

    def _frame(self, f: int) -> np.ndarray | None:
        """Read, colour and (unordered outputs) write frame ``f``; on a frame thread."""
        if TEST_DELAY:
            time.sleep(TEST_DELAY)
        stats = self.stats.stats(f, lambda g: self.store.histogram(g, full=False))
        # a colourer that unshuffles on the device takes the stored byte planes
        planes = getattr(self.colourer, "takes_planes", False)
        raw: RawFrame | PlanesFrame | None = self.store.planes(f) if planes else None
        if raw is None:
            raw = self.store.raw(f)
        self.stats.forget_before(f - self.threads)
        t0 = time.perf_counter()
        assert self.colourer is not None  # made before the first frame is submitted
        rgb = self.colourer(raw, stats, self.style, i420=True) if self.i420 else \
            self.colourer(raw, stats, self.style)
        t1 = time.perf_counter()
        if not self.output.ordered:
            self.output.write(f, rgb)
        with self._cond:
            self.color_s += t1 - t0
            self.write_s += time.perf_counter() - t1
        return rgb if self.output.ordered else None
