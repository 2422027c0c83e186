"""Where the farm keeps what it learns about this machine between commands: the folder
``$XDG_CACHE_HOME/zoomfarm`` (default ``~/.cache/zoomfarm``), with the devices' kernel
checks (devices.json), the rates ``farm bench`` measured (rates.json) and the OpenCL
compilers' messages (build.log)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path


def cache_dir() -> Path:
    """The farm's cache folder (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "zoomfarm"


def build_log() -> Path:
    """Where the OpenCL compilers' messages go (they would print over the progress bars)."""
    return cache_dir() / "build.log"


def log_build(label: str, messages: Iterable[tuple[str, str]]) -> None:
    """Append one build's compiler output to :func:`build_log`: ``messages`` are (device
    name, text) pairs, ``label`` says what was built with which options. Best effort."""
    with contextlib.suppress(OSError):
        path = build_log()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8", errors="replace") as log:
            for device, text in messages:
                if text:
                    log.write(f"== {time.strftime('%Y-%m-%d %H:%M:%S')} {label} on {device}\n{text}\n")
