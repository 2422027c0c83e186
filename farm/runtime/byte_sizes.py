"""Byte counts written for people (13.7 PB, 1.5 GB, 820 MB): what the store's size
checks and the reference orbits' cost tell before a render starts."""

from __future__ import annotations


def human(n: float) -> str:
    """Bytes for people: 13.7 PB, 1.5 GB, 820 MB (powers of 1000, as df -H)."""
    for unit, scale in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6),
                        ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
