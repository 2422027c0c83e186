"""Samples and the distance estimate through the store: datasets, reader, CRC, resume.

A small zoom with ``samples = 4`` and ``distance = true`` is rendered by the farm
command once (the reference); then its datasets, Store.raw, the per-tile checksums, and
resumes after kills inside the store's write order are checked against it.
"""

from __future__ import annotations

import signal

import h5py
import hdf5plugin  # noqa: F401 (registers the zstd filter for h5py)
import numpy as np
import pytest
from conftest import job_text, run_farm, tiles_done

from farm.store.codec import payload_crc
from farm.store.reader import Store

SIZE, FRAMES, N = (48, 32), 3, 4
PIXEL_DATASETS = ("iterations", "fraction", "distance", "samples/iterations",
                  "samples/fraction", "samples/distance")
DATASETS = (*PIXEL_DATASETS, "histogram", "done", "frame_done", "tiles/crc")


@pytest.fixture(scope="module")
def zoom(tmp_path_factory):
    """(job path, reference store) of a 3-frame f64 zoom with 4 samples and distance."""
    root = tmp_path_factory.mktemp("samples")
    job = root / "zoom.toml"
    job.write_text(job_text(size=SIZE, frames=FRAMES, width=("3", "1e-3"), tile=(16, 16),
                            max_iter="auto", center=("-0.7436", "0.1318"), samples=N,
                            distance=True))
    ref = root / "reference.h5"
    result = run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    return job, ref


def assert_same(store, ref) -> None:
    with h5py.File(store) as a, h5py.File(ref) as b:
        for name in DATASETS:
            assert np.array_equal(a[name][...], b[name][...]), name


def test_datasets_have_their_shapes_and_histograms_count_every_sample(zoom):
    _, ref = zoom
    w, h = SIZE
    with h5py.File(ref) as f:
        assert f["distance"].shape == (FRAMES, h, w) and f["distance"].dtype == np.complex64
        for name, dtype in (("iterations", np.uint32), ("fraction", np.float32),
                            ("distance", np.complex64)):
            sample = f["samples/" + name]
            assert sample.shape == (FRAMES, h, w, N - 1) and sample.dtype == dtype
            assert sample.chunks == (1, 16, 16, N - 1)
        assert f["frame_done"][...].all()
        for frame in range(FRAMES):
            counts = np.concatenate([f["iterations"][frame].ravel(),
                                     f["samples/iterations"][frame].ravel()])
            hist = f["histogram"][frame]
            assert hist.sum() == w * h * N
            assert np.array_equal(hist, np.bincount(counts, minlength=len(hist)))


def test_tile_checksums_cover_every_channel(zoom):
    """tiles/crc of a compressed store: the crc32 of every channel's stored frame, in the
    plan's order (farm/store/codec.py)."""
    _, ref = zoom
    with h5py.File(ref) as f:
        crc = f["tiles/crc"][...]
        for frame, tile in ((0, 0), (2, 5)):
            y0, x0 = 16 * (tile // 3), 16 * (tile % 3)
            stored = []
            for k, name in enumerate(PIXEL_DATASETS):
                corner = (frame, y0, x0, *((0,) if f[name].ndim == 4 else ()))
                _, chunk = f[name].id.read_direct_chunk(corner)
                stored.append(chunk[:f["tiles/bytes"][frame, tile, k]])
            assert payload_crc(stored) == crc[frame, tile]
            assert payload_crc(stored[:-1]) != crc[frame, tile]


def test_raw_puts_sample_zero_first(zoom):
    _, ref = zoom
    with Store(ref) as s, h5py.File(ref) as f:
        raw = s.raw(1)
        assert raw.samples == N and raw.shape == (SIZE[1], SIZE[0])
        assert raw.iterations.shape == raw.fraction.shape == (SIZE[1], SIZE[0], N)
        assert raw.distance is not None and raw.distance.shape == (SIZE[1], SIZE[0], N)
        assert raw.distance.dtype == np.complex64
        assert np.array_equal(raw.iterations[..., 0], f["iterations"][1])
        assert np.array_equal(raw.fraction[..., 1:], f["samples/fraction"][1])
        assert np.array_equal(raw.distance[..., 0], f["distance"][1])
        assert np.array_equal(raw.histogram, f["histogram"][1])
        interior = raw.iterations == 0
        assert interior.any() and (raw.distance[interior] == 0).all()
        assert (raw.fraction[interior] == 0).all() and (np.abs(raw.distance[~interior]) > 0).all()


def test_raw_without_samples_or_distance(tmp_path, write_job):
    job = write_job(size=(24, 16), width=("3", "3"))
    store = tmp_path / "plain.h5"
    assert run_farm("render", str(job), "--store", str(store), "--no-video", "--quiet").returncode == 0
    with Store(store) as s:
        raw = s.raw(0)
        assert raw.samples == 1 and raw.iterations.shape == (16, 24) and raw.distance is None
    with h5py.File(store) as f:
        assert "distance" not in f and "samples" not in f


@pytest.mark.parametrize("point,count", [("between-datasets", 6), ("before-flags", 10)])
def test_killed_and_resumed_store_equals_the_reference(tmp_path, zoom, point, count):
    job, ref = zoom
    store = tmp_path / "s.h5"
    # tiles trickle in (20 ms apart), so the writer passes the crash point again after
    # `count` flags are down: a busy machine could otherwise batch the last 8 tiles into
    # the batch that crosses the count, and the render would end unkilled
    killed = run_farm("render", str(job), "--store", str(store), "--no-video", "--quiet",
                      env={"FARM_TEST_CRASH_AT": f"{point}:{count}", "FARM_TEST_TILE_DELAY": "0.02"})
    assert killed.returncode == -signal.SIGKILL
    assert 0 < tiles_done(store) < FRAMES * 6
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same(store, ref)


def test_verify_finds_a_damaged_sample_and_renders_it_again(tmp_path, zoom):
    job, ref = zoom
    store = tmp_path / "s.h5"
    store.write_bytes(ref.read_bytes())
    with h5py.File(store) as f:
        offset = f["samples/distance"].id.get_chunk_info_by_coord((1, 16, 0, 0)).byte_offset
    with open(store, "r+b") as fh:  # frame 1, tile 3: one byte of one sample's estimate
        fh.seek(offset + 1000)
        byte = fh.read(1)
        fh.seek(offset + 1000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    verified = run_farm("resume", str(store), "--no-video", "--verify")
    assert verified.returncode == 0, verified.stderr
    assert "checksum" in verified.stderr
    assert_same(store, ref)
