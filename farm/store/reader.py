"""Read-only access to a store: its spec and plan, frames, histograms and progress.

Readers open the file with h5py in read mode; they may run while a render writes
(the writer never holds HDF5 open), e.g. ``farm status`` from a second shell.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from farm import spec as specmod
from farm.errors import StoreError
from farm.estimate import WorkEstimate, eta_seconds
from farm.plan import Plan, make_plan
from farm.raw import RawFrame
from farm.store import layout, lock


class Store:
    """A store opened for reading. Use as a context manager."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if not self.path.exists():
            raise StoreError(f"store: {path} does not exist")
        try:
            self.file = h5py.File(self.path, "r", locking="best-effort")
        except OSError as err:
            raise StoreError(f"store: {path} is not a readable HDF5 file ({err})") from None
        found = self.file.attrs.get("format")
        if found != layout.FORMAT:
            self.file.close()
            if isinstance(found, str) and found.startswith("zoomfarm-store/"):
                raise StoreError(f"store: {path} has layout {found}, this farm reads {layout.FORMAT}; "
                                 "render it again with --restart")
            raise StoreError(f"store: {path} is not a zoomfarm store (no format {layout.FORMAT!r})")
        self.spec_text = str(self.file.attrs["spec"])
        self.spec = specmod.parse_text(self.spec_text, source=f"{path}:spec")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()

    # ------------------------------------------------------------------ plan
    def plan(self) -> Plan:
        """The plan the store was created with: the stored per-frame iteration limits
        and formats win over what this version of the farm would choose now."""
        max_iter = [int(m) for m in self.file["frames/max_iter"][...]]
        fmt = [p.decode() for p in self.file["frames/precision"][...]]
        return make_plan(self.spec, stored=list(zip(max_iter, fmt, strict=True)))

    def reference(self) -> np.ndarray | None:
        """The stored reference orbit of perturbed frames ((L, 2) float64), or None."""
        if "reference/orbit" not in self.file:
            return None
        return self.file["reference/orbit"][...]

    # ------------------------------------------------------------------ data
    @property
    def frames(self) -> int:
        return int(self.file["iterations"].shape[0])

    def done(self) -> np.ndarray:
        return self.file["done"][...].astype(bool)

    def frame_done(self) -> np.ndarray:
        return self.file["frame_done"][...].astype(bool)

    def iterations(self, frame: int) -> np.ndarray:
        return self.file["iterations"][frame]

    def fraction(self, frame: int) -> np.ndarray:
        return self.file["fraction"][frame]

    def histogram(self, frame: int) -> np.ndarray:
        return self.file["histogram"][frame]

    def channel(self, name: str, frame: int) -> np.ndarray:
        """One per-pixel channel of a frame: (H, W) or (H, W, depth)."""
        return self.file[name][frame]

    def raw(self, frame: int) -> RawFrame:
        """Everything colouring needs of one frame (see :mod:`farm.raw`): arrays (H, W),
        or (H, W, N) with sample 0 (the pixel centre, the ``iterations`` dataset) first
        when the store has N > 1 samples per pixel; ``distance`` when it was rendered."""
        n = self.spec.image.samples
        has_distance = self.spec.render.distance

        def full(name: str) -> np.ndarray:
            centre = self.channel(name, frame)
            if n == 1:
                return centre
            return np.concatenate([centre[..., None], self.channel("samples/" + name, frame)],
                                  axis=2)

        return RawFrame(frame, full("iterations"), full("fraction"), self.histogram(frame),
                        full("distance") if has_distance else None)

    # ------------------------------------------------------------------ progress
    def status(self, now: float | None = None) -> dict[str, Any]:
        """Progress, rate, ETA and per-rank balance of the latest run (for ``farm status``).

        ``rendering`` names the process that renders the store now (its lock), or is
        None; only then is there an ETA (``run.eta_s``), from the predicted device time
        left (farm/estimate.py) at the run's rate."""
        now = time.time() if now is None else now
        done = self.done()
        frame_done = self.frame_done()
        f_count, t_count = done.shape
        finished = self.file["tiles/finished"][...]
        run = self.file["tiles/run"][...]
        rank = self.file["tiles/rank"][...]
        seconds = self.file["tiles/seconds"][...]
        runs = self.file["runs"][...]
        started = runs["started"]
        run_ids = np.flatnonzero(started > 0)
        out: dict[str, Any] = {
            "store": str(self.path),
            "frames": f_count,
            "tiles_per_frame": t_count,
            "tiles_done": int(done.sum()),
            "tiles_total": int(done.size),
            "frames_complete": int(frame_done.sum()),
            "frame_progress": [round(float(x), 4) for x in done.mean(axis=1)],
            "runs": int(len(run_ids)),
            "complete": bool(frame_done.all()),
            "rendering": lock.holder(self.path),  # who renders now, or None
        }
        if len(run_ids) == 0:
            return out
        last = int(run_ids[-1])
        mine = done & (run == last)
        out["run"] = {"index": last, "started": float(started[last]),
                      "workers": int(runs["workers"][last]), "tiles": int(mine.sum())}
        row = runs[last]
        out["run"]["timeline"] = {name: (int(row[name]) if name in ("workers", "video_frames")
                                         else round(float(row[name]), 6))
                                  for name in runs.dtype.names}
        if runs["ended"][last] > 0:
            wall = float(runs["ended"][last] - started[last])
            out["run"]["wall_s"] = round(wall, 3)
            out["run"]["master_busy_share"] = round(float(runs["master_busy"][last]) / wall, 4)
            out["run"]["writer_busy_share"] = round(float(runs["writer_busy"][last]) / wall, 4)
        if mine.any():
            t_end = float(finished[mine].max())
            elapsed = max(t_end - float(started[last]), 1e-9)
            rate = float(mine.sum()) / elapsed
            out["run"].update({
                "elapsed_s": round(elapsed, 3),
                "tiles_per_s": round(rate, 4),
                "last_tile_age_s": round(now - t_end, 1),
            })
            remaining = WorkEstimate(done, seconds).remaining_device_s() or 0.0
            out["remaining_device_s"] = round(remaining, 3)
            eta = eta_seconds(remaining, float(seconds[mine].sum()), elapsed)
            if out["rendering"] is not None and eta is not None:  # only a live render has an ETA
                out["run"]["eta_s"] = round(max(0.0, eta - (now - t_end)), 1)
            busy = {int(r): float(seconds[mine & (rank == r)].sum()) for r in np.unique(rank[mine])}
            mean = sum(busy.values()) / len(busy)
            out["run"]["busy_s"] = {str(r): round(b, 3) for r, b in sorted(busy.items())}
            out["run"]["busy_share"] = {str(r): round(b / elapsed, 4) for r, b in sorted(busy.items())}
            out["run"]["balance_max_over_mean"] = round(max(busy.values()) / mean, 4) if mean else None
        return out

