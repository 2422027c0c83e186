"""The device histogram (64-bit atomics, local sub-histograms) equals bincount."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_spec

from farm.compute import programs
from farm.compute.launch import LaunchConfig
from farm.compute.render import TileRenderer
from farm.plan import make_plan


@pytest.mark.parametrize("max_iter", [50, 3000])
def test_tile_histogram_equals_bincount(cl_device, max_iter):
    # 64 local bins: counts above go through the global 64-bit atomics
    info, dev = cl_device
    plan = make_plan(make_spec(size=(64, 48), center=("-0.7435669", "0.1314023"),
                               width=("0.002", "0.002"), max_iter=max_iter, tile=(64, 48)))
    renderer = TileRenderer(dev, info, plan, LaunchConfig(local_bins=64))
    res = renderer.render(plan.frames[0], plan.grid.tile(0))
    want = np.bincount(res.iterations.ravel(), minlength=max_iter + 1)
    got = np.zeros(max_iter + 1, np.int64)
    got[res.hist_bins] = res.hist_counts
    assert np.array_equal(got, want)
    assert res.hist_counts.dtype == np.int64 and got.sum() == 64 * 48
    assert "-DLOCAL_BINS=64" in renderer.options
    if max_iter == 3000:
        assert (res.iterations >= 64).sum() > 100  # the global-atomics path was used


@pytest.mark.parametrize("staged", [64, 1000, 2000, 5000])
def test_long_rows_are_read_up_to_the_tiles_highest_count(cl_device, monkeypatch, staged):
    """Rows longer than HIST_STAGED (a deep zoom's 10^7 counts) are read back in part:
    the device finds the tile's highest count (kernels/hist_top.cl) and the rest is
    read only past the staged bins. Here 3001 bins with 64, 1000, 2000 or 5000 staged
    (the tile's counts end between 1000 and 2000): every count equals bincount,
    through finish() and through collect() as the packer takes it."""
    from farm.compute import histogram as render_mod

    monkeypatch.setattr(render_mod, "HIST_STAGED", staged)
    info, dev = cl_device
    plan = make_plan(make_spec(size=(64, 48), center=("-0.7435669", "0.1314023"),
                               width=("0.002", "0.002"), max_iter=3000, tile=(64, 48)))
    renderer = TileRenderer(dev, info, plan, LaunchConfig(local_bins=64))
    assert (renderer._hist_top is not None) == (plan.bins > staged)
    res = renderer.render(plan.frames[0], plan.grid.tile(0))
    assert 1000 < res.iterations.max() < 2000
    want = np.bincount(res.iterations.ravel())
    for bins, counts in [(res.hist_bins, res.hist_counts),
                         renderer.collect(renderer.launch(plan.frames[0], plan.grid.tile(0))).histogram()]:
        got = np.zeros(len(want), np.int64)
        got[bins] = counts
        assert np.array_equal(got, want) and np.all(counts > 0)


def test_64bit_atomics_are_used_where_available(cl_device):
    info, dev = cl_device
    opts = programs.device_options(dev, 1024)
    assert ("-DHIST64" in opts) == info.int64_atomics


def test_a_failed_launch_frees_its_slot(cl_device):
    """Launches that raise (here: a perturbed frame without its reference orbit) must
    not use up the renderer's buffer ring: good launches still work afterwards."""
    info, dev = cl_device
    plan = make_plan(make_spec(size=(32, 16), width=("1e-20", "1e-20"), max_iter=50, tile=(16, 16),
                               precision="perturb"))
    renderer = TileRenderer(dev, info, plan, slots=2)
    for _ in range(5):
        with pytest.raises(RuntimeError, match="reference orbit"):
            renderer.launch(plan.frames[0], plan.grid.tile(0))
    assert not any(s.busy for s in renderer._slots)
