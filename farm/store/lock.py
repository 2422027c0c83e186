"""One render per store: a lock held by the process that renders into it.

The lock is an exclusive POSIX record lock (``fcntl.lockf``) on a small file beside
the store, ``.NAME.lock``. The kernel drops it when the process ends, however it
ends (``kill -9`` too), so a crashed render never blocks the next one; NFS (v4, or v3
with lockd), Lustre (mounted with ``flock``) and GPFS honour such locks across nodes.
The file holds who took it (host, pid, start time, command) for the message a second
render prints and for ``farm status``. The holder removes the file when it is done,
while still holding the lock; a process that locked a file that has since been
removed or replaced takes the new one instead (checked by inode).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from farm.errors import StoreError


def lock_path(store: str | os.PathLike[str]) -> Path:
    p = Path(store)
    return p.with_name(f".{p.name}.lock")


def holder(store: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Who renders into ``store`` now ({host, pid, started, command}), or None when
    nobody does (no lock file, or its lock is free)."""
    path = lock_path(store)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # held: read who holds it
            with contextlib.suppress(ValueError, OSError):
                return dict(json.loads(os.pread(fd, 4096, 0) or b"{}"))
            return {}
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def describe(info: dict[str, Any]) -> str:
    """"pid 1234 on host-a since 10:32:01" (what is known of a holder)."""
    parts = []
    if "pid" in info:
        parts.append(f"pid {info['pid']}")
    if "host" in info:
        parts.append(f"on {info['host']}")
    if "started" in info:
        parts.append(time.strftime("since %Y-%m-%d %H:%M:%S", time.localtime(info["started"])))
    return " ".join(parts) or "another process"


class StoreLock:
    """``with StoreLock(store):`` holds the store for this process, or raises
    StoreError (exit 2) naming the process that holds it."""

    def __init__(self, store: str | os.PathLike[str]):
        self.store = Path(store)
        self.path = lock_path(store)
        self.fd = -1

    def __enter__(self) -> StoreLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(50):  # a reader (farm status) holds it shared for a moment
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                info = holder(self.store)
                if info is not None:
                    raise StoreError(f"output.store: {self.store} is being rendered by "
                                     f"{describe(info)}; wait for it to end or stop it "
                                     "(a killed render leaves no lock)") from None
                time.sleep(0.01)
                continue
            if self._still_at_path(fd):
                self.fd = fd
                self._write_info()
                return self
            os.close(fd)  # removed or replaced since we opened it: take the new one
        raise StoreError(f"output.store: could not lock {self.path}")

    def _still_at_path(self, fd: int) -> bool:
        try:
            return os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def _write_info(self) -> None:
        info = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
                "command": " ".join(sys.argv[:3])}
        data = json.dumps(info).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # still holding the lock: nobody can be inside
            os.close(self.fd)
            self.fd = -1
