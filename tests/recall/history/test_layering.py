"""History is a layer below the semantic one: it ranks by text itself and takes any other
ranking as a :class:`~korg_bridge.recall.history.query.hits.Ranker` from its caller."""

from __future__ import annotations

import ast

from tests.helpers.paths import REPO

HISTORY = REPO / "korg_bridge" / "recall" / "history"


def _imported_modules(tree: ast.Module, package: str) -> set[str]:
    """Every module an AST imports, at any depth (function-level and ``TYPE_CHECKING`` imports count)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base]).strip(".")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_recall_history_imports_nothing_from_recall_semantic() -> None:
    crossing = []
    for path in sorted(HISTORY.rglob("*.py")):
        relative = path.relative_to(REPO)
        package = ".".join(relative.with_suffix("").parts[:-1])
        for module in _imported_modules(ast.parse(path.read_text(encoding="utf-8")), package):
            if module == "korg_bridge.recall.semantic" or module.startswith("korg_bridge.recall.semantic."):
                crossing.append(f"{relative}: {module}")
    assert crossing == []
