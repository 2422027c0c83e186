"""Every option of every command: a bad value is one line on stderr and exit status 2,
before anything is read or written (issue 44, item 1)."""

from __future__ import annotations

import argparse
import math

import pytest
from conftest import run_farm

from farm.cli import build_parser

KFR = "Re: -0.75\r\nIm: 0.1\r\nZoom: 40\r\nIterations: 1000\r\n"
BAD = ["abc", "", "nan", "inf", "-inf", "1e999", "-1", "0", "0x0", "640x-360", "1.5"]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _valued_options():
    for name, sub in _subcommands().items():
        for action in sub._actions:
            if action.option_strings and action.nargs is None and action.type is not None:
                yield name, action


def test_every_numeric_option_has_bounds():
    """No option takes a bare int or float: each has a range, so that 0, NaN or a
    huge value is refused by the parser (one line, exit 2), not deep inside a render."""
    bare = [f"{name} {a.option_strings[-1]}" for name, a in _valued_options() if a.type in (int, float)]
    assert bare == []


@pytest.mark.parametrize("name,action", list(_valued_options()),
                         ids=lambda v: v if isinstance(v, str) else v.option_strings[-1])
def test_typed_options_refuse_what_is_not_a_finite_number_in_range(name, action):
    accepted = {}
    for text in BAD:
        try:
            accepted[text] = action.type(text)
        except argparse.ArgumentTypeError as err:
            assert "\n" not in str(err)
    for text, value in accepted.items():
        values = value if isinstance(value, tuple) else (value,)
        assert all(math.isfinite(v) and v >= 0 for v in values), (text, value)
        if isinstance(value, tuple):
            assert min(value) >= 1, (text, value)


@pytest.mark.parametrize("command", ["render", "import", "validate", "preview"])
@pytest.mark.parametrize("option", [("--size", "0x0"), ("--size", "640x0"), ("--size", "0x360"),
                                    ("--size", "640x-360"), ("--fps", "0"), ("--fps", "1000"),
                                    ("--frames", "0"), ("--seconds", "nan")])
def test_a_location_with_a_bad_option_is_one_line_exit_2(tmp_path, command, option):
    (tmp_path / "good.kfr").write_text(KFR)
    result = run_farm(command, "good.kfr", *option, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and option[0] in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.kfr"]  # nothing written
