"""The wheel holds every package of the farm: a subpackage missing from pyproject.toml's
list installs without error and then fails at its first import (farm.film.locations did:
every `farm render` of a non-editable install ended in an ImportError)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_in_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "farm").rglob("__init__.py")}
    assert found - listed == set(), f"not in pyproject.toml's packages: {sorted(found - listed)}"
    assert "farm.kernels" in listed  # the .cl sources, from kernels/
