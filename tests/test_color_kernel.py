"""kernels/color.cl against the numpy colour methods: at most 1 in 255 per channel.

The kernel computes escape times and palette positions in double like numpy, and the
float32 parts (line cover, shading) in float; a different rounding of one operation
can move a palette index by one entry or a rounded byte by one, nothing more.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_de
from test_color import synthetic_frame

from farm.color import METHODS, Statistics, Style, colour
from farm.color.raw import PlanesFrame, RawFrame
from farm.spec.palettes import lut
from farm.store.codec import shuffle


@pytest.fixture(scope="module")
def frames():
    """One-sample and three-sample frames with interior, from the dz/dc reference."""
    c = reference_de.pixel_grid((-0.745, 0.113), 0.01, (97, 61))
    one = reference_de.render(c, 1500, 0.01 / 97)
    offsets = [(0.0, 0.0), (0.3, -0.2), (-0.25, 0.35)]
    three = reference_de.render(reference_de.pixel_grid((-0.745, 0.113), 0.01, (53, 37), offsets),
                                1500, 0.01 / 53)
    it, fr, hist = synthetic_frame((41, 77))
    return {"one": one, "three": three, "noise": RawFrame(0, it, fr, hist)}


@pytest.fixture(scope="module")
def colourers():
    cache = {}

    def get(cl_device):
        from farm.compute.color import ClColourer

        key = cl_device[0].ref
        if key not in cache:
            cache[key] = ClColourer(*cl_device)
        return cache[key]

    return get


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("which,stored", [("one", True), ("one", False), ("three", True),
                                          ("three", False), ("noise", False)],
                         ids=["one-distance", "one-estimated", "three-distance", "three-estimated",
                              "noise-estimated"])
def test_kernel_matches_numpy(cl_device, colourers, frames, method, which, stored):
    raw = frames[which]
    if not stored:
        raw = RawFrame(raw.index, raw.iterations, raw.fraction, raw.histogram)
    stats = Statistics(1, 0).stats(0, lambda g: raw.histogram)
    style = Style(method=method, lut=lut("classic"), cycles=2.5, density=1.3, line_width=2.0)
    want = colour(raw, stats, style)
    got = colourers(cl_device)(raw, stats, style)
    diff = np.abs(got.astype(int) - want)
    assert diff.max() <= 1, f"{(diff > 1).sum()} channel values differ by more than 1"
    assert (diff.max(axis=2) == 0).mean() >= 0.999


@pytest.mark.parametrize("method", ["histogram", "shade"])
@pytest.mark.parametrize("stored", [True, False], ids=["distance", "estimated"])
def test_byte_planes_colour_as_the_frame_does(cl_device, colourers, frames, method, stored):
    """A frame handed over as its channels' byte planes (a compressed store's frame,
    Store.planes) is unshuffled on the device and coloured to the same bytes."""
    raw = frames["one"]
    if not stored:
        raw = RawFrame(raw.index, raw.iterations, raw.fraction, raw.histogram)
    planes = PlanesFrame(raw.index, raw.shape, shuffle(raw.iterations).ravel(),
                         shuffle(raw.fraction).ravel(),
                         None if raw.distance is None else shuffle(raw.distance.astype(np.complex64)).ravel())
    stats = Statistics(1, 0).stats(0, lambda g: raw.histogram)
    style = Style(method=method, lut=lut("classic"), cycles=2.5, density=1.3, line_width=2.0)
    colourer = colourers(cl_device)
    want = colourer(raw, stats, style)
    assert np.array_equal(colourer(planes, stats, style), want)
    assert np.array_equal(colourer(raw, stats, style), want)  # the lane's buffers, after planes


def test_the_sink_colours_a_compressed_store_from_its_byte_planes(cl_device, colourers, tmp_path):
    """The frame sink hands a colourer that takes planes each frame of a compressed
    store as its byte planes (Store.planes), and the frames come out as those of the same
    colourer given the unshuffled arrays."""
    from conftest import make_spec

    from farm.encode.sink import FrameSink
    from farm.plan import make_plan
    from farm.store import layout
    from farm.store.codec import ZSTD, pack
    from farm.store.writer import Finished, StoreWriter

    plan = make_plan(make_spec(size=(37, 22), frames=3, width=("3", "0.5"), tile=(64, 64), max_iter=300))
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=ZSTD)
    rng = np.random.default_rng(5)
    with StoreWriter(path, plan) as w:
        for f in range(3):
            it = rng.integers(0, 300, (22, 37)).astype(np.uint32)
            it[:, :9] = 0  # interior
            fr = rng.random((22, 37), dtype=np.float32)
            counts = np.bincount(it.ravel())
            bins = np.flatnonzero(counts)
            packed = pack(ZSTD, [it, fr], (22, 37), (22, 37))
            w.write([Finished(f, 0, packed.payloads, bins.astype(np.int64), counts[bins].astype(np.int64),
                              0.01, 1, packed.crc)])
    colourer = colourers(cl_device)
    seen = []

    class Kept:
        ordered = True

        def __init__(self):
            self.frames = {}

        def prepare(self):
            pass

        def write(self, f, rgb):
            self.frames[f] = rgb

        def close(self):
            return path

        def abort(self):
            pass

    def planes_taken(raw, stats, style):
        seen.append(type(raw).__name__)
        return colourer(raw, stats, style)

    planes_taken.takes_planes = True  # type: ignore[attr-defined]
    style = Style(method="shade", lut=lut("classic"), cycles=2.5)
    outputs = {}
    for name, fn in (("planes", planes_taken), ("arrays", lambda raw, stats, st: colourer(raw, stats, st))):
        out = Kept()
        sink = FrameSink(path, out, style, smoothing=1, colourer=fn)
        for f in range(3):
            sink.frame_complete(f)
        sink.finish()
        outputs[name] = out.frames
    assert seen == ["PlanesFrame"] * 3
    for f in range(3):
        assert np.array_equal(outputs["planes"][f], outputs["arrays"][f])


def test_encode_begins_its_gpu_colourer_as_it_starts(monkeypatch):
    """`farm encode` starts making the OpenCL colourer on a thread as the command starts
    (farm/encode/early.py); the sink then takes that one (one a process), made on a
    context from farm/compute/clstart.py. No thread where the sink colours with numpy."""
    from farm.compute import color
    from farm.encode import early

    monkeypatch.setenv("FARM_COLOR_ENGINE", "numpy")
    assert early.begin_colourer() is None
    monkeypatch.setenv("FARM_COLOR_ENGINE", "auto")
    monkeypatch.setattr(early, "gpu_possible", lambda: False)
    assert early.begin_colourer() is None  # no GPU device node: numpy, no OpenCL start
    monkeypatch.setenv("FARM_COLOR_ENGINE", "opencl")
    color._colourer.cache_clear()
    thread = early.begin_colourer()
    assert thread is not None
    thread.join(60)
    assert color._colourer.cache_info().currsize == 1  # made on the thread
    made = color.gpu_colourer(require=True, selector="auto")
    assert made is color.gpu_colourer(require=True, selector="auto") and made.takes_planes
    raw = RawFrame(0, np.array([[0, 5], [9, 3]], np.uint32), np.zeros((2, 2), np.float32),
                   np.array([1, 0, 0, 1, 0, 1, 0, 0, 0, 1], np.int64))
    stats = Statistics(1, 0).stats(0, lambda g: raw.histogram)
    style = Style(method="histogram", lut=lut("classic"), cycles=1.0)
    got, want = made(raw, stats, style).astype(int), colour(raw, stats, style).astype(int)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1  # the kernel's promise


@pytest.mark.parametrize("which", ["one", "noise"])
@pytest.mark.parametrize("method", ["shade", "histogram"])
def test_kernel_gives_the_videos_planes(cl_device, colourers, frames, method, which):
    """With ``i420`` the device converts its colours to the video's planes
    (kernels/color.cl to_i420): farm.color.yuv.from_rgb of the RGB it gives,
    odd sizes cropped to even as the video is, but for rounding (on NVIDIA's OpenCL a
    few differ by one, most likely from fused multiply-adds; on PoCL none)."""
    from farm.color import yuv

    raw = frames[which]
    raw = RawFrame(raw.index, raw.iterations, raw.fraction, raw.histogram)
    assert raw.shape[0] % 2 == 1 and raw.shape[1] % 2 == 1  # (odd both ways: the crop is tested)
    stats = Statistics(1, 0).stats(0, lambda g: raw.histogram)
    style = Style(method=method, lut=lut("classic"), cycles=2.5)
    colourer = colourers(cl_device)
    got = colourer(raw, stats, style, i420=True)
    want = yuv.from_rgb(colourer(raw, stats, style))
    assert (got.width, got.height) == (want.width, want.height)
    diff = np.abs(got.data.astype(int) - want.data)
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.99
