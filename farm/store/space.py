"""Will the store fit? Free space on the store's file system against what it needs.

A store is created sparse and fills as tiles arrive, so a render that does not fit
would fail hours in. ``check`` refuses it up front (exit 2), counting what an existing
store (being resumed, or replaced with --restart) already occupies. When the disk
fills anyway (another program, quotas), the writer stops the render cleanly like an
interrupt (farm/schedule/master.py): finished tiles are kept.

A store is one file, and file systems cap a file's size (ext4: 16 TiB with 4 KiB
blocks; FAT32: 4 GiB). ``check`` refuses a store above that cap always, also with
``--ignore-free-space`` (creating it would fail at once). The cap comes from the file
system's type (``/proc/mounts``) and block size (:data:`MAX_FILE`), else from
``pathconf(PC_FILESIZEBITS)``; unknown (NFS, Lustre, ...): no cap.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from farm.errors import StoreError
from farm.runtime.byte_sizes import human

# write errors that mean "no room": the render stops and can resume once there is
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


GiB, TiB = 1 << 30, 1 << 40
# the largest file of a file system type, by block size (bytes -> bytes; 0: any size;
# a block size not listed takes the largest value)
MAX_FILE = {
    "ext2": {1024: 16 * GiB, 2048: 256 * GiB, 4096: 2 * TiB},
    "ext3": {1024: 16 * GiB, 2048: 256 * GiB, 4096: 2 * TiB},
    "ext4": {1024: 16 * GiB, 2048: 256 * GiB, 4096: 16 * TiB, 65536: 256 * TiB},
    "vfat": {0: (4 << 30) - 1}, "msdos": {0: (4 << 30) - 1},  # FAT32: a 32-bit size
    "xfs": {0: 8 << 60}, "btrfs": {0: 16 << 60},
}


def mount_of(path: Path, mounts: str | None = None) -> tuple[str, str] | None:
    """(mount point, file system type) holding ``path`` (which need not exist yet),
    from ``/proc/mounts`` text (``mounts``, read when None); None when unknown."""
    folder = path.absolute().parent.resolve()  # links followed as far as they exist
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    best: tuple[str, str] | None = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = folder == Path(point) or Path(point) in folder.parents
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, parts[2])
    return best


def largest_file(path: Path) -> tuple[str, int] | None:
    """(file system type, the largest file it holds in bytes) where ``path`` would be
    written; None when there is no known cap."""
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    found = mount_of(path)
    kind = found[1] if found else "?"
    table = MAX_FILE.get(kind)
    if table is not None:
        if 0 in table:
            return kind, table[0]
        block = os.statvfs(folder).f_bsize
        return kind, table.get(block, max(table.values()))
    try:
        bits = os.pathconf(folder, "PC_FILESIZEBITS")
    except (OSError, ValueError):
        return None
    return (kind, (1 << (bits - 1)) - 1) if 0 < bits < 64 else None


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


def check(path: Path, needed: int, field: str, replacing: bool = False,
          free_space: bool = True, apparent: int | None = None, freeing: Path | None = None) -> None:
    """Raise StoreError unless a store of ``needed`` bytes on disk fits: its length
    (``apparent``, default ``needed``: a compressed store's sparse slots make it longer
    than what it takes) below the file system's largest file, and (``free_space``)
    ``needed`` within its free space plus what the store at ``path`` already occupies
    (it is resumed in place, or replaced when ``replacing``) plus what ``freeing`` (the
    replaced store, set aside and being removed) still occupies."""
    cap = largest_file(path)
    length = needed if apparent is None else apparent
    if cap is not None and length > cap[1]:
        raise StoreError(
            f"{field}: {path} is {human(length)} long when complete, and the largest file its "
            f"file system ({cap[0]}) holds is {human(cap[1])}; choose a --store on another file "
            "system (xfs, btrfs), or render fewer frames or pixels")
    if not free_space:
        return
    have = free(path) + allocated(path) + (allocated(freeing) if freeing is not None else 0)
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
