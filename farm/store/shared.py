"""Whether a worker's host sees the master's store: a token beside it.

Under MPI, rank 0 writes a random token into the small file ``.NAME.share`` beside the
store before the plan reaches the workers (:func:`offer`), and sends the workers the
store's path, the token and the store's length. A worker that reads the same token at
the same path (a file system shared with the master's host: NFS, Lustre, GPFS) writes
its tiles into the store itself (farm/store/inplace.py); one that does not (a node's
local disk, another file at the same path) sends them to the master over MPI, as every
worker did before. ``FARM_SHARED_STORE=0`` turns writing in place off: set for rank 0,
for every worker; set for a worker rank, for that rank alone. The master removes the
file when the render ends (:func:`withdraw`); one left by a killed render is harmless
(the next render writes a new token).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

KNOB = "FARM_SHARED_STORE"  # "0": never write in place; "auto" (default): where the token is seen


@dataclass(frozen=True)
class Offer:
    """What rank 0 tells the workers: the store, the token beside it, the store's length."""

    store: str
    token: str
    length: int


def token_path(store: str | os.PathLike[str]) -> Path:
    p = Path(store)
    return p.with_name(f".{p.name}.share")


def turned_off() -> str | None:
    """Why this process must not write in place (the knob set to 0), or None."""
    value = os.environ.get(KNOB, "auto").strip().lower()
    return f"{KNOB}={value}" if value in ("0", "no", "off", "false") else None


def offer(store: str | os.PathLike[str]) -> Offer | None:
    """Rank 0: a new token beside ``store`` (written and flushed), or None where the knob
    says no or the token cannot be written (then every worker sends its tiles)."""
    if turned_off():
        return None
    token = secrets.token_hex(16)
    path = token_path(store)
    try:
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(token)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        length = os.stat(store).st_size
    except OSError:
        return None
    return Offer(os.path.abspath(store), token, length)


def check(offer: Offer | None) -> str | None:
    """A worker: None if it may write into the offered store, else why not (one line)."""
    if offer is None:
        return "the master writes the tiles"
    off = turned_off()
    if off:
        return off
    try:
        seen = token_path(offer.store).read_text()
    except OSError as err:
        return f"{token_path(offer.store)} cannot be read here ({err.strerror or err})"
    if seen != offer.token:
        return f"{offer.store} here is not the master's (another token beside it)"
    return None


def withdraw(store: str | os.PathLike[str]) -> None:
    """Rank 0, at the render's end: remove the token."""
    with contextlib.suppress(OSError):
        token_path(store).unlink()
