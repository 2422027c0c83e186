"""A run's row of the store's ``runs`` table, completed after its writer has closed.

The writer records a run's row while it renders (farm/store/writer.py, ``end_run``). A
render's video may end after that, beside the store's compaction (farm/run/session.py):
its figures (when it ended, colouring and encoding seconds, frames) then go into the
row of the compacted store. Only the caller, who holds the store's lock, writes it; a
reader (``farm status``) may have the file open, so HDF5's file lock is not taken, as
farm/store/videos.py does for the video record.
"""

from __future__ import annotations

import os

import h5py


def update(path: str | os.PathLike[str], run: int, fields: dict[str, float]) -> None:
    """Set ``fields`` (names of farm/store/layout.py's RUN_DTYPE) in row ``run``."""
    with h5py.File(path, "r+", locking=False) as f:
        row = f["runs"][run]
        for name, value in fields.items():
            row[name] = value
        f["runs"][run] = row
