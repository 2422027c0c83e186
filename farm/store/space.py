"""Will the store fit? Free space on the store's file system against what it needs.

A store is created sparse and fills as tiles arrive, so a render that does not fit
would fail hours in. ``check`` refuses it up front (exit 2), counting what an existing
store (being resumed, or replaced with --restart) already occupies. When the disk
fills anyway (another program, quotas), the writer stops the render cleanly like an
interrupt (farm/schedule/master.py): finished tiles are kept.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from farm.errors import StoreError

# write errors that mean "no room": the render stops and can resume once there is
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def human(n: float) -> str:
    """Bytes for people: 1.5 GB, 820 MB (powers of 1000, as df -H)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def allocated(path: Path) -> int:
    """Bytes a file occupies on disk now (a sparse file: less than its size)."""
    try:
        return os.stat(path).st_blocks * 512
    except FileNotFoundError:
        return 0


def free(path: Path) -> int:
    """Free bytes (for an unprivileged user) on the file system that holds or would
    hold ``path``."""
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def check(path: Path, needed: int, field: str, replacing: bool = False) -> None:
    """Raise StoreError unless ``needed`` bytes fit: free space plus what the store at
    ``path`` already occupies (it is resumed in place, or replaced when ``replacing``)."""
    have = free(path) + allocated(path)
    if needed > have:
        what = "replacing" if replacing else "with"
        raise StoreError(
            f"{field}: {path} needs {human(needed)} when complete, and its file system has "
            f"{human(have)} ({what} the existing store); free space, choose another --store, "
            "render fewer frames or pixels, or pass --ignore-free-space to start anyway "
            "(a full disk stops the render like an interrupt; `farm resume` continues)")


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in DISK_FULL


def disk_full_reason(store: Path, err: OSError) -> str:
    return f"the disk holding {store} is full ({err.strerror}): free space first"
