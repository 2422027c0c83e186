"""Where the farm keeps what it learns about this machine between commands: the folder
``$XDG_CACHE_HOME/zoomfarm`` (default ``~/.cache/zoomfarm``), with the devices' kernel
checks (devices.json), the rates ``farm bench`` measured (rates.json) and the OpenCL
compilers' messages (build.log)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The farm's cache folder (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "zoomfarm"
