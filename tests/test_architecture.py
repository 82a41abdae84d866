"""The folders are the architecture, and the architecture is checked, not only drawn.

``docs/architecture.md`` draws the package tree and states what each package may import. These
tests hold the drawing to the code: (a) every module of ``korg_bridge`` is in the tree (or named
by its path), and the tree names no module that is gone; (b) no import crosses a line the rules
below forbid -- imports inside functions and under ``TYPE_CHECKING`` included, since a deferred
import is still a dependency; (c) there is no import cycle at all.

Everything is read from the source with :mod:`ast`; nothing of the package is imported, so the
checks take well under a second and cannot be fooled by what an import happens to do at run time.

The rules are data (:data:`RULES`), each a sentence that also appears word for word in the
architecture doc. A rule marked ``pending`` is stated but not yet enforced: the code still crosses
it while other work removes the crossing; its test is skipped, listing the crossings left.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

PACKAGE = REPO / "korg_bridge"
DOC = REPO / "docs" / "architecture.md"
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


@dataclass(frozen=True)
class Rule:
    """One line no import may cross.

    ``sources`` and ``forbidden`` are dotted prefixes (``korg_bridge.bridge`` covers the package
    and every module under it). ``stdlib_only`` forbids everything outside the standard library.
    """

    says: str
    sources: tuple[str, ...]
    forbidden: tuple[str, ...] = ()
    stdlib_only: bool = False
    pending: bool = False
    allowed: tuple[str, ...] = ()
    """Prefixes inside ``forbidden`` that stay open (``config.py`` may import ``errors.py``)."""


def _kb(*names: str) -> tuple[str, ...]:
    return tuple(f"korg_bridge.{name}" for name in names)


LOWER = ("_fs", "ledger", "redact", "toolkit")

RULES = (
    Rule("`bridge/` imports no `mcp.server`.", _kb("bridge"), ("mcp.server",)),
    Rule(
        "`bridge/` imports nothing from `serving/`, `recall/`, `ledger/`, `_fs/` or `toolkit/`.",
        _kb("bridge"),
        _kb("serving", "recall", "ledger", "_fs", "toolkit"),
    ),
    Rule("`recall/` imports nothing from `bridge/` or `serving/`.", _kb("recall"), _kb("bridge", "serving")),
    Rule(
        "`recall/memory/backend/protocols.py` imports only the standard library.",
        _kb("recall.memory.backend.protocols"),
        stdlib_only=True,
    ),
    Rule(
        "`_fs/`, `ledger/`, `redact/` and `toolkit/` import nothing from `bridge/`, `serving/`, `recall/` or `cli.py`.",
        _kb(*LOWER),
        _kb("bridge", "serving", "recall", "cli"),
    ),
    Rule(
        "`_fs/` imports nothing from `ledger/`, `redact/` or `toolkit/`.",
        _kb("_fs"),
        _kb("ledger", "redact", "toolkit"),
    ),
    Rule("`serving/` imports nothing from `recall/`.", _kb("serving"), _kb("recall")),
    Rule(
        "`errors.py` and `_version.py` import nothing else of the package.",
        _kb("errors", "_version"),
        ("korg_bridge",),
    ),
    Rule(
        "`config.py` imports nothing of the package but `errors.py`.",
        _kb("config"),
        ("korg_bridge",),
        allowed=_kb("errors"),
    ),
    Rule("Nothing in `korg_bridge` imports `tests`.", ("korg_bridge",), ("tests",)),
    Rule(
        "`recall/history/` imports nothing from `recall/memory/`, `recall/interop/` or `recall/cli/`.",
        _kb("recall.history"),
        _kb("recall.memory", "recall.interop", "recall.cli"),
    ),
    Rule(
        "`recall/semantic/` imports nothing from `recall/memory/`, `recall/interop/` or `recall/cli/`.",
        _kb("recall.semantic"),
        _kb("recall.memory", "recall.interop", "recall.cli"),
    ),
    Rule("`recall/memory/` imports nothing from `recall/cli/`.", _kb("recall.memory"), _kb("recall.cli")),
    Rule(
        "`recall/history/` imports nothing from `recall/semantic/`.",
        _kb("recall.history"),
        _kb("recall.semantic"),
    ),
    Rule(
        "`recall/memory/` imports nothing from `recall/interop/`.",
        _kb("recall.memory"),
        _kb("recall.interop"),
    ),
    Rule(
        "`recall/interop/` imports nothing from `recall/cli/`.",
        _kb("recall.interop"),
        _kb("recall.cli"),
    ),
)
"""What each package may import (docs/architecture.md states each sentence)."""


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its own name, not ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@dataclass(frozen=True)
class Import:
    module: str
    line: int
    target: str
    """The imported name, made absolute; inside the package, the module it lands in."""


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if modules()[module].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _landing(name: str) -> str:
    """The module of the package ``name`` is in (``a.b.func`` -> ``a.b``), or ``name`` if foreign."""
    probe = name
    while probe and probe not in modules():
        probe = probe.rpartition(".")[0]
    return probe or name


def parse_imports(module: str, source: str) -> tuple[Import, ...]:
    """Every import in ``source`` (the text of ``module``) wherever it is written: top level, in a
    function, under ``TYPE_CHECKING``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            names = [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]
        else:
            continue
        found += [Import(module, node.lineno, _landing(name)) for name in names]
    return tuple(found)


@cache
def imports(module: str) -> tuple[Import, ...]:
    return parse_imports(module, modules()[module].read_text(encoding="utf-8"))


def graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    return {
        module: {imp.target for imp in imports(module) if imp.target in modules() and imp.target != module}
        for module in modules()
    }


def crossings(rule: Rule) -> Iterator[str]:
    for module in modules():
        if not within(module, rule.sources):
            continue
        for imp in imports(module):
            foreign = imp.target.split(".")[0] not in STDLIB
            if within(imp.target, rule.allowed):
                continue
            if within(imp.target, rule.forbidden) or (rule.stdlib_only and foreign):
                where = modules()[module].relative_to(REPO)
                yield f"{where}:{imp.line} imports {imp.target}: {rule.says}"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def cycle_path(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One closed walk through a component, to print: a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    node = start
    while True:
        following = sorted(edges[node] & members)
        nxt = (
            start
            if start in following and len(path) > 1
            else next((m for m in following if m not in seen), start)
        )
        path.append(nxt)
        if nxt == start or nxt in seen:
            return path
        seen.add(nxt)
        node = nxt


# --- the doc ---------------------------------------------------------------------------------------

TREE_START = "<!-- tree: checked by tests/test_architecture.py -->"
BRANCH = re.compile(r"[├└]── (\S+)")


def drawn_paths(text: str) -> set[str]:
    """The module paths the doc's tree draws, relative to the repository (``korg_bridge/bridge/argv.py``).

    The tree is the fenced block after :data:`TREE_START`: its first line the package's folder, then
    one entry a line, ``├── name`` or ``└── name``, four columns deeper than its folder's. A folder
    entry (``bridge/``) draws the package's ``__init__.py``.
    """
    block = text.split(TREE_START, 1)[1].split("```", 2)[1]
    lines = [line for line in block.splitlines() if line.strip()]
    root = lines[0].split()[0].rstrip("/")
    folders: list[str] = []
    found = {f"{root}/__init__.py"}
    for line in lines[1:]:
        match = BRANCH.search(line)
        if match is None:
            continue
        name = match.group(1)
        folders = folders[: match.start() // 4]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
            found.add("/".join([root, *folders, "__init__.py"]))
        else:
            found.add("/".join([root, *folders, name]))
    return found


def named_in_doc(text: str) -> set[str]:
    """The modules the doc names: drawn in the tree, or written out as a path or a dotted name."""
    named = set()
    drawn = drawn_paths(text)
    for module, path in modules().items():
        relative = path.relative_to(REPO).as_posix()
        if relative in drawn or relative in text or re.search(rf"\b{re.escape(module)}\b", text):
            named.add(module)
    return named


# --- the tests -------------------------------------------------------------------------------------


def test_every_module_is_in_the_architecture_doc() -> None:
    missing = sorted(
        str(modules()[m].relative_to(REPO)) for m in set(modules()) - named_in_doc(DOC.read_text())
    )
    assert not missing, f"modules docs/architecture.md does not name (add them to its tree): {missing}"


def test_the_architecture_doc_draws_no_module_that_is_gone() -> None:
    real = {path.relative_to(REPO).as_posix() for path in modules().values()}
    gone = sorted(drawn_paths(DOC.read_text()) - real)
    assert not gone, f"docs/architecture.md draws modules that do not exist: {gone}"


def test_every_rule_is_stated_in_the_architecture_doc() -> None:
    text = " ".join(DOC.read_text().split())
    unstated = [rule.says for rule in RULES if rule.says not in text]
    assert not unstated, f"rules the test holds but docs/architecture.md does not state: {unstated}"


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.says.strip("`.")[:60])
def test_no_import_crosses_a_forbidden_line(rule: Rule) -> None:
    crossed = list(crossings(rule))
    if rule.pending:
        if crossed:
            pytest.skip(f"pending: {len(crossed)} crossing(s) left, e.g. {crossed[0]}")
        return
    assert not crossed, "\n".join(crossed)


def test_there_is_no_import_cycle() -> None:
    edges = graph()
    found = [" -> ".join(cycle_path(component, edges)) for component in cycles(edges)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_walk_sees_deferred_imports_and_reports_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    [component] = cycles(edges)
    assert component == ["a", "b", "c"]
    assert cycle_path(component, edges) == ["a", "b", "c", "a"]
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from korg_bridge.serving import server\n"
        "def later() -> None:\n    from ..semantic import rank\n    import mcp.server.lowlevel\n"
    )
    found = [(imp.line, imp.target) for imp in parse_imports("korg_bridge.recall.history.index", source)]
    assert found == [
        (1, "typing.TYPE_CHECKING"),
        (3, "korg_bridge.serving.server"),
        (5, "korg_bridge.recall.semantic.rank"),
        (6, "mcp.server.lowlevel"),
    ]


def test_the_tree_parser_reads_folders_from_indentation() -> None:
    tree = "korg_bridge/\n├── cli.py      x\n├── bridge/     y\n│   └── argv.py z\n└── errors.py\n"
    assert drawn_paths(f"{TREE_START}\n\n```\n{tree}```\n") == {
        "korg_bridge/__init__.py",
        "korg_bridge/cli.py",
        "korg_bridge/bridge/__init__.py",
        "korg_bridge/bridge/argv.py",
        "korg_bridge/errors.py",
    }


def test_every_package_says_what_room_it_is() -> None:
    placeholders = []
    for path in modules().values():
        if path.name != "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if len(doc.split("\n", 1)[0].split()) < 4:
            placeholders.append(f"{path.relative_to(REPO)}: {doc!r}")
    assert not placeholders, f"packages whose docstring does not say what they are: {placeholders}"
