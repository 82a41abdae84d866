"""One exception tree: every exception class is defined in ``korg_bridge/errors.py``."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import korg_bridge
from korg_bridge import errors
from tests.helpers.paths import REPO

PACKAGE = REPO / "korg_bridge"


def _is_exception(module: str, name: str) -> bool:
    """Whether ``module.name`` is an exception class; a module that cannot be imported here (an
    optional extra missing) is judged by the name alone."""
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return name.endswith(("Error", "Exception", "Warning"))
    return isinstance(value, type) and issubclass(value, BaseException)


class _Imports(ast.NodeVisitor):
    """Where each name of a module comes from: ``{local name: (module, attribute or None)}``."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.names: dict[str, tuple[str, str | None]] = {}

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.names[(alias.asname or alias.name).split(".")[0]] = (alias.name, None)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            base = ".".join([*self.package.split(".")[: len(self.package.split(".")) - node.level + 1], base])
        for alias in node.names:
            self.names[alias.asname or alias.name] = (base.strip("."), alias.name)


def exception_classes(root: Path) -> list[str]:
    """``path:line ClassName`` of each exception class defined under ``root`` outside ``errors.py``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent)
        if relative.as_posix() == "korg_bridge/errors.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports = _Imports(".".join(relative.with_suffix("").parts))
        imports.visit(tree)
        local: set[str] = set()
        classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        for node in sorted(classes, key=lambda node: node.lineno):
            if any(_base_is_exception(base, imports.names, local) for base in node.bases):
                local.add(node.name)
                found.append(f"{relative}:{node.lineno} {node.name}")
    return found


def _base_is_exception(base: ast.expr, names: dict[str, tuple[str, str | None]], local: set[str]) -> bool:
    if isinstance(base, ast.Name):
        if base.id in local:
            return True
        if base.id in names:
            module, attribute = names[base.id]
            return attribute is not None and _is_exception(module, attribute)
        value = getattr(builtins, base.id, None)
        return isinstance(value, type) and issubclass(value, BaseException)
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id in names:
        module, attribute = names[base.value.id]
        return _is_exception(module if attribute is None else f"{module}.{attribute}", base.attr)
    return False


def test_no_module_outside_errors_defines_an_exception_class() -> None:
    assert exception_classes(PACKAGE) == []


def test_the_check_finds_an_exception_class_defined_elsewhere(tmp_path: Path) -> None:
    folder = tmp_path / "korg_bridge"
    folder.mkdir()
    (folder / "errors.py").write_text("class Fine(Exception):\n    pass\n")
    (folder / "stray.py").write_text(
        "import sqlite3\nfrom korg_bridge.errors import KorgError\n\n"
        "class Mine(KorgError): ...\nclass Theirs(sqlite3.Error): ...\nclass Derived(Mine): ...\n"
        "class Plain(ValueError): ...\nclass NotOne(dict): ...\n"
        "def inner() -> None:\n    class Hidden(Exception): ...\n"
    )
    assert exception_classes(folder) == [
        "korg_bridge/stray.py:4 Mine",
        "korg_bridge/stray.py:5 Theirs",
        "korg_bridge/stray.py:6 Derived",
        "korg_bridge/stray.py:7 Plain",
        "korg_bridge/stray.py:10 Hidden",
    ]


def test_every_exception_in_errors_is_a_korg_error_or_an_internal_signal() -> None:
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    ]
    assert classes, "errors.py defines no exception class"
    for cls in classes:
        assert issubclass(cls, korg_bridge.KorgError) != issubclass(cls, errors.InternalSignal), cls


def test_the_hierarchy_drawing_names_every_exception_class() -> None:
    drawing = errors.__doc__ or ""
    for name, value in vars(errors).items():
        if (
            isinstance(value, type)
            and issubclass(value, BaseException)
            and value.__module__ == errors.__name__
        ):
            assert f" {name} " in drawing or f" {name}\n" in drawing, name
