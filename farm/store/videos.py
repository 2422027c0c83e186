"""The store's record of the videos its renders made: one root attribute, ``videos``.

JSON ``{absolute path: {...}}`` (what each entry holds is farm/encode/record.py's
business), stored as a fixed-length string of :data:`RECORD_BYTES` so that a later
record overwrites the first in place. It is the only HDF5 metadata a store gains after
its creation, written only with nobody writing the store (the render's writer closed,
the store's lock held).
"""

from __future__ import annotations

import json
import os
from typing import Any

import h5py
import numpy as np

ATTR = "videos"
RECORD_BYTES = 4096  # the record's fixed length (the oldest entries go to make room)


def read(store: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The record (empty when there is none or it cannot be read)."""
    try:
        with h5py.File(store, "r", locking="best-effort") as f:  # as farm/store/reader.py
            raw = f.attrs.get(ATTR)
        return dict(json.loads(bytes(raw).rstrip(b"\0 ").decode())) if raw is not None else {}
    except (OSError, ValueError):
        return {}


def write(store: str | os.PathLike[str], entries: dict[str, dict[str, Any]]) -> bool:
    """Replace the record with ``entries`` (dropping the first ones until it fits);
    False when the store cannot be opened for writing (it keeps its old record)."""
    entries = dict(entries)
    text = json.dumps(entries).encode()
    while len(text) > RECORD_BYTES and entries:
        entries.pop(next(iter(entries)))
        text = json.dumps(entries).encode()
    value = np.array(text.ljust(RECORD_BYTES), dtype=f"S{RECORD_BYTES}")
    try:
        # no HDF5 file lock: a reader (farm status) may have the file open; writers are
        # kept apart by the store's own lock (farm/store/lock.py)
        with h5py.File(store, "r+", locking=False) as f:
            if ATTR in f.attrs and f.attrs.get_id(ATTR).dtype == value.dtype:
                f.attrs.modify(ATTR, value)  # in place: the same type and size
            else:
                f.attrs.create(ATTR, value)
    except OSError:
        return False
    return True
