"""The documentation stays honest: its links lead somewhere, the commands and options it
names are the command line's, the job keys it documents are the spec's (with the same
defaults), and the job files it shows parse.

No device, no render: the checks read README.md, BENCHMARKS.md and docs/*.md, and the
parsers of farm/cli.py and farm/spec.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from farm import spec as specmod
from farm.cli import build_parser
from farm.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
MD_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HTML_SRC = re.compile(r"""<img\s[^>]*src="([^"]+)\"""")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
KEY_CELL = re.compile(r"^\|\s*`([a-z_]+)\.([a-z_]+)`\s*\|", re.M)
OPTION = re.compile(r"--[a-z][a-z-]*")


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (where brackets are code)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, title in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = _slug(title)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    text = _prose(page.read_text(encoding="utf-8"))
    return MD_LINK.findall(text) + HTML_SRC.findall(text)


def _section(text: str, title: str) -> str:
    """The text under the heading ``title`` up to the next heading of its level or above."""
    match = re.search(rf"^(#+) {re.escape(title)}\s*$", text, re.M)
    assert match, f"no heading {title!r}"
    level = len(match.group(1))
    rest = text[match.end():]
    stop = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: stop.start()] if stop else rest


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _table_options(text: str) -> set[str]:
    """The options named in the first column of the tables in ``text``."""
    cells = re.findall(r"^\|([^|\n]*)\|", text, re.M)
    return {option for cell in cells for option in OPTION.findall(cell)}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


# --------------------------------------------------------------------------- links


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files_and_headings(page):
    assert page.exists()
    broken = []
    for link in _links(page):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link} (no file {target.relative_to(ROOT)})")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link} (no heading #{anchor} in {target.relative_to(ROOT)})")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_every_docs_page_is_in_the_index():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = {Path(link.partition("#")[0]).name for link in _links(ROOT / "docs" / "index.md")}
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if p.name != "index.md" and p.name not in linked]
    assert not missing, f"docs/index.md does not link {missing}"
    assert "README.md" in index


# --------------------------------------------------------------------------- commands


def test_readme_command_table_is_the_command_line():
    table = _section((ROOT / "README.md").read_text(encoding="utf-8"), "Commands")
    named = re.findall(r"^\|\s*`farm ([a-z]+)\b", table, re.M)
    assert named, "no `farm <command>` rows in the README's command table"
    real = set(_subcommands())
    assert set(named) <= real, f"not commands: {set(named) - real}"
    assert real <= set(named), f"commands missing from the README's table: {real - set(named)}"


def test_cli_reference_command_table_is_the_command_line():
    """docs/reference-cli.md's table at the top names every command (`farm find` was
    missing: issue 44.10)."""
    text = (ROOT / "docs" / "reference-cli.md").read_text(encoding="utf-8")
    table = text.split("\n## ", 1)[0]
    named = set(re.findall(r"^\|\s*\[?`farm ([a-z]+)\b", table, re.M))
    real = set(_subcommands())
    assert named == real, f"missing: {real - named}; not commands: {named - real}"


def test_cli_reference_documents_every_option_and_no_other():
    text = (ROOT / "docs" / "reference-cli.md").read_text(encoding="utf-8")
    colour = _table_options(_section(text, "Colour options"))
    problems = []
    for name, parser in _subcommands().items():
        section = _section(text, f"farm {name}")
        documented = _table_options(section)
        if "colour options" in section:
            documented |= colour
        real = _options(parser)
        if real - documented:
            problems.append(f"farm {name}: undocumented {sorted(real - documented)}")
        if documented - real:
            problems.append(f"farm {name}: no such option {sorted(documented - real)}")
    assert not problems, "; ".join(problems)


# --------------------------------------------------------------------------- job keys

_JOB = {"view": {"center": ["-0.75", "0.1"], "width": ["3", "1e-3"]},
        "image": {"size": [32, 18]}, "animation": {"frames": 2}}


def _documented_keys() -> dict[tuple[str, str], str]:
    """(section, key) -> the default cell of docs/reference-job.md's tables."""
    out = {}
    for line in (ROOT / "docs" / "reference-job.md").read_text(encoding="utf-8").splitlines():
        match = KEY_CELL.match(line)
        if match:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            assert len(cells) == 4, f"a key row has key | type | default | meaning: {line}"
            out[match.groups()] = cells[2]
    return out


def _parse(data: dict, name: str = "job") -> specmod.JobSpec:
    return specmod.from_dict(data, name=name)


def test_reference_documents_every_job_key_and_no_other():
    documented = set(_documented_keys())
    real = {(section, key) for section, fields in specmod.SCHEMA.items() for key in fields}
    assert not documented - real, f"documented but not in farm/spec.py: {documented - real}"
    assert not real - documented, f"in farm/spec.py but not documented: {real - documented}"


@pytest.mark.parametrize("key", [(s, k) for s, fields in specmod.SCHEMA.items() for k in fields],
                         ids=lambda k: ".".join(k))
def test_documented_default_is_the_parsers(key):
    section, name = key
    cell = _documented_keys().get(key)
    if cell is None:
        pytest.skip("not documented (the test above fails)")
    parse, default = specmod.SCHEMA[section][name]
    if cell.startswith("required"):
        # "required", or "required unless ..." for a key other keys can give (view.width
        # from the keys, animation.frames from the duration or the keys)
        derived = cell != "required"
        assert default is (specmod.DERIVED if derived else specmod.REQUIRED), (
            f"{section}.{name} is documented as {cell}")
        data = {s: dict(v) for s, v in _JOB.items()}
        data[section].pop(name)
        with pytest.raises(SpecError, match="is required"):
            _parse(data)
        return
    if cell == "none":
        # a key that is not set unless given (a soundtrack, a duration, timeline keys)
        assert default is specmod.OPTIONAL or default == (), f"{section}.{name} has a default"
        if (section, name) not in specmod.RESOLVED:  # resolved keys leave the spec
            assert getattr(getattr(_parse(_JOB), section), name) in (None, ()), (
                f"{section}.{name}: documented none")
        return
    assert default is not specmod.REQUIRED, f"{section}.{name} is required, documented {cell}"
    literal = cell.strip("`").replace("<job>", "job")
    try:
        value = tomllib.loads(f"x = {literal}")["x"]
    except tomllib.TOMLDecodeError:
        value = literal  # a path such as renders/job.h5
    # the documented default, set explicitly, is accepted and means what the default means
    data = {s: dict(v) for s, v in _JOB.items()}
    data.setdefault(section, {})[name] = value
    explicit = getattr(_parse(data), section)
    data[section].pop(name)
    implicit = getattr(_parse(data), section)
    assert getattr(explicit, name) == getattr(implicit, name), (
        f"{section}.{name}: documented default {cell}, the parser's is {getattr(implicit, name)!r}")


def test_job_files_shown_in_the_docs_parse():
    """Every TOML block that is a whole job (it has [view] and [animation]) is accepted as
    written."""
    checked = 0
    for page in PAGES:
        for block in re.findall(r"^```toml\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M):
            if "[view]" not in block or "[animation]" not in block:
                continue
            spec = specmod.parse_text(block, source=f"{page.name}")
            assert dataclasses.asdict(spec)  # a complete JobSpec
            checked += 1
    assert checked >= 4


# --------------------------------------------------------------------------- the front door


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "the README is the front door; the manual lives in docs/"
    assert not re.search(r"\bissue \d+", text, re.I), "no issue numbers in the README"
    assert "FARM_TEST_" not in text, "test knobs belong in docs/developers.md"
    for command in ("apt-get install -y pocl-opencl-icd",
                    "python3 -m venv .venv && .venv/bin/pip install '.[local,test]'",
                    ".venv/bin/python -m pytest -q", ".venv/bin/farm render jobs/demo.toml"):
        assert command in text, f"the README lost {command!r}"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for part in ("apt-get install -y", "pocl-opencl-icd", "python3 -m venv .venv && .venv/bin/pip install",
                 "'.[local,test]'", ".venv/bin/python -m pytest -q"):
        assert part in ci, f"CI no longer runs the README's {part!r}"
