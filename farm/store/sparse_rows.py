"""Histogram rows read from what the writer wrote: a row's byte ranges that hold data
(the file system's SEEK_DATA and SEEK_HOLE), read with pread past the holes, up to the
row's last count that is not zero. A deep frame's row may be 10^7 bins (80 MB) of
which a few thousand were written (farm/store/writer.py writes a row from its first to
its last count that is not zero); the rest is holes that read as zeros. A compacted
store (farm/store/compact.py) keeps the histogram chunked instead, with only the chunks
that hold a count: :class:`PackedRows` reads a row from those.
"""

from __future__ import annotations

import errno
import os

import h5py
import numpy as np

from farm.color.stats import last_nonzero


def data_ranges(fd: int, start: int, end: int) -> list[tuple[int, int]] | None:
    """The byte ranges of ``start .. end`` that hold data, as the file system tells
    (``lseek`` with SEEK_DATA and SEEK_HOLE; whole blocks), in order: what is not in
    them is a hole, never written, and reads as zeros. None where the file system
    cannot tell (then any byte may be data)."""
    out: list[tuple[int, int]] = []
    pos = start
    try:
        while pos < end:
            try:
                a = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as err:
                if err.errno == errno.ENXIO:  # no data from pos to the end of the file
                    break
                raise
            if a >= end:
                break
            b = min(os.lseek(fd, a, os.SEEK_HOLE), end)
            out.append((a, b))
            pos = b
    except (OSError, AttributeError):  # (EINVAL: not supported; no SEEK_DATA on this OS)
        return None
    return out


def trimmed(row: np.ndarray) -> np.ndarray:
    """``row`` up to its last entry that is not zero (at least one entry)."""
    return row[:max(1, last_nonzero(row) + 1)]


def row_prefix(fd: int, start: int, n: int) -> np.ndarray:
    """The int64 row of ``n`` entries at byte ``start`` of the file, up to its last
    entry that is not zero (:func:`trimmed`), reading only the ranges that hold data.
    The writer writes a histogram row from its first to its last count that is not
    zero: a deep frame's row may be 10^7 bins (80 MB) of which a few thousand were
    written, and reading the holes as zeros cost the video's colouring more than the
    frame's pixels. Where the file system cannot tell holes from data, the whole row."""
    end = start + 8 * n
    ranges = data_ranges(fd, start, end)
    if ranges is None:
        ranges = [(start, end)]
    if not ranges:
        return np.zeros(1, np.int64)
    count = -(-(ranges[-1][1] - start) // 8)  # entries up to the last byte of data
    row = np.zeros(count, np.int64)
    for a, b in ranges:  # (whole entries: the row need not start on a block)
        i0, i1 = (a - start) // 8, min(count, -(-(b - start) // 8))
        data = os.pread(fd, 8 * (i1 - i0), start + 8 * i0)
        row[i0:i0 + len(data) // 8] = np.frombuffer(data, "<i8")
    return trimmed(row)


class PackedRows:
    """The rows of a compacted store's ``histogram`` (chunked by a run of bins of one
    row, unfiltered, only chunks that hold a count stored; farm/store/compact.py):
    where each row's chunks lie, from HDF5's chunk index, read once."""

    def __init__(self, dset: h5py.Dataset):
        self.bins, self.width = int(dset.shape[1]), int(dset.chunks[1])
        self.rows: dict[int, list[tuple[int, int, int]]] = {}  # row -> (first bin, offset, bytes)

        def note(info) -> None:
            row, first = (int(v) for v in info.chunk_offset)
            self.rows.setdefault(row, []).append((first, int(info.byte_offset), int(info.size)))

        if hasattr(dset.id, "chunk_iter"):
            dset.id.chunk_iter(note)
        else:
            for i in range(dset.id.get_num_chunks()):
                note(dset.id.get_chunk_info(i))
        for chunks in self.rows.values():
            chunks.sort()

    @classmethod
    def of(cls, dset: h5py.Dataset) -> PackedRows | None:
        """The rows of ``dset`` when it is a compacted store's histogram, else None."""
        chunked = dset.chunks is not None and dset.chunks[0] == 1
        if not chunked or dset.id.get_create_plist().get_nfilters() or dset.dtype != np.dtype("<i8"):
            return None
        return cls(dset)

    def chunks(self, row: int) -> list[tuple[int, int, int]]:
        """(first bin, byte offset, bytes) of each stored chunk of ``row``, in order."""
        return self.rows.get(row, [])

    def prefix(self, fd: int, row: int) -> np.ndarray:
        """Row ``row`` up to its last count that is not zero (:func:`trimmed`), read
        from its stored chunks in the open file ``fd``."""
        chunks = self.chunks(row)
        if not chunks:
            return np.zeros(1, np.int64)
        out = np.zeros(min(self.bins, chunks[-1][0] + self.width), np.int64)
        for first, offset, size in chunks:
            data = np.frombuffer(os.pread(fd, size, offset), "<i8")
            n = min(len(data), len(out) - first)
            out[first:first + n] = data[:n]
        return trimmed(out)
