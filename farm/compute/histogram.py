"""A tile's histogram as the device leaves it: how much of its row is read back with
every tile (:data:`HIST_STAGED`), and the (bins, counts) made from what was read.

The first HIST_STAGED bins of the row are read back with every tile. A plan whose rows
are longer (a deep zoom's limit is up to 10^7 counts: 80 MB a tile) also runs
kernels/hist_top.cl behind each tile: the host scans the bins up to the tile's highest
count, and reads the bins past HIST_STAGED only when that count lies there
(:func:`tile_histogram`).

Every use of HIST_STAGED is in this module's functions (:func:`long_rows`,
:func:`staged_bins`), so that the renderer's modules all see one value (tests change
it here).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

HIST_STAGED = 1 << 20


def long_rows(bins: int) -> bool:
    """Whether a histogram row of ``bins`` is longer than what is read back with every
    tile (the device then finds each tile's highest count: kernels/hist_top.cl)."""
    return bins > HIST_STAGED


def staged_bins(bins: int) -> int:
    """How many of a row of ``bins`` are read back with every tile."""
    return min(bins, HIST_STAGED)


def tile_histogram(staged: np.ndarray | None, top: int | None,
                   rest: Callable[[int, int], np.ndarray] | None,
                   filler: int) -> tuple[np.ndarray, np.ndarray]:
    """(bins, counts), int64, of a tile (:func:`sparse_histogram`) from what was read
    back: ``staged`` the row's first bins (all of them when ``top`` is None); ``top``
    the highest bin holding a count (kernels/hist_top.cl); ``rest(a, b)`` reads bins
    a .. b-1 from the device."""
    if staged is None or top is None:
        return sparse_histogram(staged, filler)
    bins, counts = sparse_histogram(staged[:top + 1], filler)
    if top >= len(staged) and rest is not None:
        tail = rest(len(staged), top + 1)
        nz = np.flatnonzero(tail)
        bins = np.concatenate([bins, nz.astype(np.int64) + len(staged)])
        counts = np.concatenate([counts, tail[nz].astype(np.int64)])
    return bins, counts


def sparse_histogram(hist: np.ndarray | None, filler: int) -> tuple[np.ndarray, np.ndarray]:
    """(bins, counts), int64, of a tile: the non-zero entries of the region's histogram
    as the device left it (``hist``: a view of the staging memory, None when nothing was
    computed), plus ``filler`` pixels outside the region counted as count 0. One pass
    over ``hist`` and nothing as long as it: a deep frame's row has up to 10^7 bins."""
    bins = np.flatnonzero(hist) if hist is not None else np.zeros(0, np.intp)
    counts = hist[bins].astype(np.int64) if hist is not None else np.zeros(0, np.int64)
    bins = bins.astype(np.int64)
    if filler:
        if len(bins) and bins[0] == 0:
            counts[0] += filler
        else:
            bins, counts = np.concatenate([[0], bins]), np.concatenate([[filler], counts])
    return bins, counts
