"""Compressed and uncompressed stores hold the same data bit for bit, and a store of the
previous format (8, uncompressed) still reads and resumes.

Data equality is checked through h5py with hdf5plugin's zstd filter (what any HDF5
user reads), so these tests also show that a compressed store stays a standard HDF5
file.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401 (registers the zstd filter for h5py)
import numpy as np
import pytest
from conftest import assert_same_datasets, job_text, run_farm

DATA = Path(__file__).parent / "data"
DATASETS = ("iterations", "fraction", "histogram", "done", "frame_done", "frames/max_iter")


def _job(tmp_path: Path, name: str, compression: str, extra: str = "") -> Path:
    job = tmp_path / f"{name}.toml"
    job.write_text(job_text(size=(48, 32), frames=6, width=("3", "1e-5"), tile=(16, 16), max_iter=600,
                            center=("-0.7436", "0.1318"), extra=f"""
                            [output]
                            store = "{tmp_path / (name + '.h5')}"
                            video = "{tmp_path / (name + '.mp4')}"
                            compression = "{compression}"
                            """ + extra))
    return job


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same zoom rendered into a compressed and an uncompressed store."""
    root = tmp_path_factory.mktemp("pair")
    out = {}
    for compression in ("zstd", "none"):
        job = _job(root, compression, compression)
        done = run_farm("render", str(job), "--no-video", "--quiet")
        assert done.returncode == 0, done.stderr
        out[compression] = root / f"{compression}.h5"
    return out


def test_compressed_and_raw_stores_hold_the_same_data(pair):
    assert_same_datasets(pair["zstd"], pair["none"], DATASETS)
    with h5py.File(pair["zstd"]) as z, h5py.File(pair["none"]) as r:
        assert z.attrs["format"] == r.attrs["format"] == "zoomfarm-store/9"
        assert "tiles/bytes" in z and "tiles/bytes" not in r
        assert z["iterations"].id.get_create_plist().get_nfilters() == 2  # shuffle, zstd
        assert r["iterations"].id.get_create_plist().get_nfilters() == 0


def test_a_compressed_store_verifies_and_recolours(pair, tmp_path):
    store = tmp_path / "s.h5"
    shutil.copy(pair["zstd"], store)
    verified = run_farm("resume", str(store), "--no-video", "--verify")
    assert verified.returncode == 0 and "checksum" not in verified.stderr, verified.stderr
    frames = run_farm("frames", str(store), "--out", str(tmp_path / "png"), "--frames", "4:6")
    assert frames.returncode == 0, frames.stderr
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["frame_00004.png", "frame_00005.png"]


def test_a_damaged_compressed_tile_is_found_and_rendered_again(pair, tmp_path):
    store = tmp_path / "s.h5"
    shutil.copy(pair["zstd"], store)
    with h5py.File(store) as f:  # the third tile of frame 4, its iterations' frame
        info = f["iterations"].id.get_chunk_info_by_coord((4, 0, 32))
        length = int(f["tiles/bytes"][4, 2, 0])
    with open(store, "r+b") as fh:
        fh.seek(info.byte_offset + length // 2)
        fh.write(b"\xde\xad\xbe\xef")
    verified = run_farm("resume", str(store), "--no-video", "--verify")
    assert verified.returncode == 0, verified.stderr
    assert "1 stored tile(s) failed their checksum" in verified.stderr
    assert_same_datasets(store, pair["zstd"], DATASETS)


def test_a_store_of_the_previous_format_resumes(pair, tmp_path):
    """tests/data/store-v8-partial.h5.gz was written by the farm before compression
    (format 8), killed after 20 of 36 tiles; this version reads it, resumes it in its
    own format and ends with the data of a fresh render."""
    store = tmp_path / "v8.h5"
    with gzip.open(DATA / "store-v8-partial.h5.gz") as src, open(store, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with h5py.File(store) as f:
        assert f.attrs["format"] == "zoomfarm-store/8" and f["done"][...].sum() == 20
    status = run_farm("status", str(store), "--json")
    assert status.returncode == 0 and '"tiles_done": 20' in status.stdout, status.stderr
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    with h5py.File(store) as f:
        assert f.attrs["format"] == "zoomfarm-store/8" and f["done"][...].all()
    assert_same_datasets(store, pair["zstd"], DATASETS)
    frames = run_farm("frames", str(store), "--out", str(tmp_path / "png"), "--frames", "5:6")
    assert frames.returncode == 0, frames.stderr


def _packed_both_ways(cl_device, plan, frame, tile):
    """A tile packed from the device's shuffle and from the host's (the same bytes)."""
    from farm.compute.render import TileRenderer
    from farm.store.codec import ZSTD, pack, pack_planes

    info, dev = cl_device
    grid = plan.grid
    plain = TileRenderer(dev, info, plan)
    res = plain.render(plan.frames[frame], grid.tile(tile))
    host = pack(ZSTD, list(res.arrays.values()), (grid.tile(tile).height, grid.tile(tile).width),
                (grid.tile_h, grid.tile_w))
    shuffling = TileRenderer(dev, info, plan, shuffle=True)
    got = shuffling.collect(shuffling.launch(plan.frames[frame], grid.tile(tile)))
    try:
        assert got.shuffled
        device = pack_planes(ZSTD, got.blocks)
        bins, counts = got.histogram()
    finally:
        got.release()
    assert np.array_equal(bins, res.hist_bins) and np.array_equal(counts, res.hist_counts)
    return host, device


@pytest.mark.parametrize("samples,distance", [(1, False), (4, True)])
def test_the_device_shuffles_as_the_host_does(cl_device, samples, distance):
    """kernels/shuffle.cl against farm/store/codec.shuffle, bitwise: an interior tile and
    an edge tile (padded to the chunk) of a 37 x 23 frame in 16 x 16 tiles, with one
    sample, and with four and the distance estimate (channels of depth 3, 8-byte values)."""
    from conftest import make_spec

    from farm.plan import make_plan

    plan = make_plan(make_spec(size=(37, 23), tile=(16, 16), width=("3", "3"), max_iter=300,
                               samples=samples, distance=distance))
    for tile in (0, plan.grid.count - 1):
        host, device = _packed_both_ways(cl_device, plan, 0, tile)
        assert [bytes(p) for p in host.payloads] == [bytes(p) for p in device.payloads]
        assert host.crc == device.crc
