"""Kernel rates remembered from ``farm bench``, for time estimates in ``farm validate``.

``farm bench`` stores its rows per device in ``$XDG_CACHE_HOME/zoomfarm/rates.json``
(default ``~/.cache/zoomfarm/rates.json``; ``FARM_RATES`` names another file). A plan's
time bound is its work bound (every pixel of every frame to its iteration limit) at
the measured rate of each frame's format: real frames, whose pixels mostly escape
early (and skip iterations in perturbation), take less.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from farm.runtime.cache import cache_dir


def rates_file() -> Path:
    if os.environ.get("FARM_RATES"):
        return Path(os.environ["FARM_RATES"])
    return cache_dir() / "rates.json"


def load() -> dict[str, Any]:
    """{device name: {"measured": unix time, "giters": {format: Giter/s}}}."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(rates_file().read_text())
        if isinstance(data, dict):
            return data
    return {}


def remember(device: str, giters: dict[str, float]) -> None:
    """Keep one device's measured rates (merged with earlier ones); quietly skipped
    where the cache cannot be written."""
    data = load()
    entry = data.setdefault(device, {"giters": {}})
    entry["giters"].update(giters)
    entry["measured"] = time.time()
    path = rates_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)


def time_bound(work_by_format: dict[str, int], device: str) -> float | None:
    """Seconds for this work at the device's remembered rates (None if a format was
    not measured on it)."""
    known = load().get(device, {}).get("giters", {})
    try:
        return sum(work / (known[fmt] * 1e9) for fmt, work in work_by_format.items() if work)
    except (KeyError, ZeroDivisionError):
        return None
