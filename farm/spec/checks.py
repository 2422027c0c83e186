"""Checks beyond a spec's validity: what a valid spec probably did not mean
(:func:`warnings`), and whether its outputs can be written (:func:`check_writable`,
:func:`check_directory`), before any work.
"""

from __future__ import annotations

import contextlib
import errno
import os
from decimal import Decimal
from pathlib import Path

from farm.errors import SpecError
from farm.spec.sections import JobSpec


def warnings(spec: JobSpec) -> list[str]:
    """What a valid spec probably did not mean, one line each (``farm validate`` and
    ``farm render`` print them and go on)."""
    out = []
    first, last = spec.view.width
    if spec.frames == 1 and Decimal(first) != Decimal(last):
        out.append(f"animation.frames = 1 renders view.width[0] = {first} only; view.width[1] = "
                   f"{last} is not used (frames >= 2 make a zoom; one width makes a still)")
    return out


def _probe_directory(directory: Path) -> str | None:
    """Why no file can be created in ``directory`` (one phrase), or None when one can.

    Creates and at once removes a hidden empty file: os.access says yes to root on a
    read-only mount or in /proc, where creating a file still fails."""
    probe = directory / f".farm-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as err:
        if err.errno == errno.ENOENT:  # the folder is there, yet takes no file: /proc, /sys
            return "files cannot be created"
        return err.strerror.lower() if err.strerror else str(err)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _why_not_writable(p: Path) -> str:
    """Why the existing file ``p`` cannot be written: its file system is mounted
    read-only (EROFS), or permission is denied."""
    try:
        read_only = bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return os.strerror(errno.EROFS).lower() if read_only else "permission denied"


def _existing_ancestor(p: Path, field: str, path: object) -> Path:
    """The nearest folder of ``p`` that exists (the ones below it would be created)."""
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise SpecError(field, f"cannot create {path}: {parent} is not a directory")
    return parent


def check_writable(path: str | os.PathLike[str], field: str) -> None:
    """Raise SpecError unless the file ``path`` could be created or overwritten (its
    missing folders too). Leaves nothing behind."""
    p = Path(path).absolute()
    if p.is_dir():
        raise SpecError(field, f"{path} is a directory, not a file")
    if p.exists() and not os.access(p, os.W_OK):
        raise SpecError(field, f"cannot write {path}: {_why_not_writable(p)}")
    folder = _existing_ancestor(p, field, path)
    problem = _probe_directory(folder)
    if problem:
        raise SpecError(field, f"cannot write {path}: {problem} in {folder}")


def check_directory(path: str | os.PathLike[str], field: str) -> None:
    """Raise SpecError unless files could be written into the folder ``path`` (created
    if missing). Leaves nothing behind."""
    p = Path(path).absolute()
    if p.exists() and not p.is_dir():
        raise SpecError(field, f"{path} is a file, not a directory")
    folder = p if p.is_dir() else _existing_ancestor(p, field, path)
    problem = _probe_directory(folder)
    if problem:
        raise SpecError(field, f"cannot write into {path}: {problem} in {folder}")
