"""A store's progress report (``farm status``, the run's summary): tiles and frames
done, the runs and their timelines, the latest run's rate, per-rank balance, and the
ETA of a live render from the predicted device time left (farm/store/estimate.py).
Read through a :class:`farm.store.reader.Store` (``Store.status``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from farm.store import lock
from farm.store.estimate import WorkEstimate, plan_shape, reading


def _frame_progress(store, done: np.ndarray) -> np.ndarray:
    """Share of each video frame's tiles that are stored (expmap: of its units')."""
    if not store.expmap:
        return done.mean(axis=1)
    layout = store.layout
    have = np.concatenate([[0], np.cumsum(done.sum(axis=1), dtype=np.int64)])
    lo, hi = np.array(layout.needs, dtype=np.int64).reshape(-1, 2).T
    return (have[hi] - have[lo]) / ((hi - lo) * done.shape[1])


def status(store, now: float | None = None) -> dict[str, Any]:
    """Progress, rate, ETA and per-rank balance of the latest run (for ``farm status``).

    ``rendering`` names the process that renders the store now (its lock), or is
    None; only then is there an ETA (``run.eta_s``) and the share of the predicted
    work done (``run.work_done``), from the predicted device time left
    (farm/store/estimate.py) at the run's pace, as the progress bar shows them."""
    now = time.time() if now is None else now
    done = store.done()
    unit_done = store.unit_done()
    f_count, t_count = done.shape
    finished = store.file["tiles/finished"][...]
    run = store.file["tiles/run"][...]
    rank = store.file["tiles/rank"][...]
    seconds = store.file["tiles/seconds"][...]
    runs = store.file["runs"][...]
    started = runs["started"]
    run_ids = np.flatnonzero(started > 0)
    out: dict[str, Any] = {
        "store": str(store.path),
        "method": store.method,
        "frames": store.frames,
        "tiles_per_frame": t_count,  # expmap: per unit
        "tiles_done": int(done.sum()),
        "tiles_total": int(done.size),
        "frames_complete": int(store.frame_done().sum()),  # expmap: video frames ready
        "frame_progress": [round(float(x), 4) for x in _frame_progress(store, done)],
        "runs": int(len(run_ids)),
        "complete": bool(unit_done.all()),
        "rendering": lock.holder(store.path),  # who renders now, or None
    }
    if store.expmap:
        out.update(units=f_count, units_complete=int(unit_done.sum()),
                   unit_progress=[round(float(x), 4) for x in done.mean(axis=1)])
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
        estimate = WorkEstimate(done, seconds, plan_shape(store.plan()))
        remaining = estimate.remaining_device_s() or 0.0
        out["remaining_device_s"] = round(remaining, 3)
        # as the progress bar reads it (farm/store/estimate.py reading): the tiles in
        # flight since the latest one count down, as far as their predicted cost
        work = reading(remaining, estimate.done_device_s(), float(seconds[mine].sum()), elapsed,
                       now - t_end, estimate.next_device_s(out["run"]["workers"]))
        if out["rendering"] is not None and work is not None:  # only a live render has an ETA
            out["run"]["eta_s"] = round(work.left_s, 1)
            out["run"]["work_done"] = round(work.done, 4)
        busy = {int(r): float(seconds[mine & (rank == r)].sum()) for r in np.unique(rank[mine])}
        mean = sum(busy.values()) / len(busy)
        out["run"]["busy_s"] = {str(r): round(b, 3) for r, b in sorted(busy.items())}
        out["run"]["busy_share"] = {str(r): round(b / elapsed, 4) for r, b in sorted(busy.items())}
        out["run"]["balance_max_over_mean"] = round(max(busy.values()) / mean, 4) if mean else None
    return out

