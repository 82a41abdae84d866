"""The docs are a map that stays true: a short README, a generated CLI reference, links that resolve.

The README is the front door (what it is, the two commands, registering, three examples, safety,
links) and the reference lives in ``docs/``; these tests keep it that way. ``docs/cli.md`` is
written by ``scripts/gen_cli_reference.py`` from the declarations the programs parse, so a flag
added without regenerating it fails here (and in ``.ci/run``). Links are checked as GitHub renders
them: a relative path must name a file of the repository, and an ``#anchor`` a heading of the
page it points at, slugged by GitHub's rules.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.paths import REPO

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_LIMIT = 15 * 1024
"""Bytes: past this the README is a reference manual again (the issue's limit)."""

FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"(`+).*?\1")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, inline code blanked (links there are examples)."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = []
    for char in text:
        if char in " -_" or unicodedata.category(char)[0] in "LN":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every ``#anchor`` GitHub gives the page: one per heading, repeats numbered ``-1``, ``-2``."""
    seen: Counter[str] = Counter()
    found = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
    return found


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """Each relative link of ``page`` whose file (inside ``root``) or anchor does not exist, as
    ``page:line: target``."""
    problems = []
    for number, line in enumerate(prose_lines(page.read_text(encoding="utf-8")), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: -- not ours to check
                continue
            path_part, _, fragment = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not resolved.is_relative_to(root) or not resolved.exists():
                problems.append(f"{where} (no such file)")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                problems.append(f"{where} (no such heading)")
    return problems


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_reference", REPO / "scripts" / "gen_cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_stays_under_15_kb() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; move reference material to docs/"


def test_the_readme_ends_with_a_documentation_list_linking_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    last = text.rsplit("\n## ", 1)[1]
    assert last.startswith("Documentation\n"), "the README's last section is its list of docs"
    linked = set(re.findall(r"\]\((docs/[^)#]+)\)", last))
    pages = {f"docs/{page.name}" for page in PAGES if page != README}
    assert not pages - linked, f"docs pages the README does not list: {sorted(pages - linked)}"


def test_the_checked_in_cli_reference_is_what_the_generator_writes() -> None:
    generator = load_generator()
    current = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == generator.render(), "docs/cli.md is stale: run python scripts/gen_cli_reference.py"


def test_the_generator_s_check_fails_on_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = load_generator()
    stale = tmp_path / "cli.md"
    stale.write_text("# an old reference\n", encoding="utf-8")
    monkeypatch.setattr(generator, "TARGET", stale)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


def test_the_cli_reference_names_every_korg_recall_command_and_flag() -> None:
    from korg_bridge.recall.cli.app import kit

    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for command in kit.commands:
        assert f"### `korg-recall {' '.join(command.command_id.split('.')[1:])}`" in page
        for prop in command.cli_schema().get("properties", {}):
            assert f"`--{prop.replace('_', '-')}`" in page, (command.command_id, prop)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_check_catches_a_missing_file_a_missing_heading_and_a_way_out(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Project\n## Two commands\n", encoding="utf-8")
    page = tmp_path / "docs" / "probe.md"
    links = "[ok](#probe) [gone](nowhere.md) [bad](../README.md#no-such) [fine](../README.md#two-commands)"
    page.write_text(f"# Probe\n\n{links} [out](../../x.md)\n\n`[code](nowhere.md)`\n", encoding="utf-8")
    assert broken_links(page, root=tmp_path) == [
        "docs/probe.md:3: nowhere.md (no such file)",
        "docs/probe.md:3: ../README.md#no-such (no such heading)",
        "docs/probe.md:3: ../../x.md (no such file)",
    ]


def test_github_slugs_drop_punctuation_and_number_repeats(tmp_path: Path) -> None:
    assert slug("How arguments become argv") == "how-arguments-become-argv"
    assert slug("Tokens, tenants and actors") == "tokens-tenants-and-actors"
    assert slug("The team store (PostgreSQL)") == "the-team-store-postgresql"
    assert slug("`korg-recall model pull`") == "korg-recall-model-pull"
    page = tmp_path / "p.md"
    page.write_text("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n", encoding="utf-8")
    assert anchors(page) == {"a", "notes", "notes-1"}
