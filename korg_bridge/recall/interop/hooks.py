"""``korg-recall hooks install|uninstall|status``: the session-start brief, run by the agent itself.

A ``SessionStart`` hook runs ``korg-recall context --hook <agent>`` when a
session starts (and after ``/clear`` or a compaction), and the agent adds what
it prints to its context (``hookSpecificOutput.additionalContext``):

* **Claude Code**: ``settings.json`` -- the user's (``$CLAUDE_CONFIG_DIR``, else
  ``~/.claude``) or the project's (``.claude/settings.json`` at the git root) --
  ``{"hooks": {"SessionStart": [{"matcher": "startup|clear|compact", "hooks":
  [{"type": "command", "command": …, "timeout": 10}]}]}}``;
* **Codex**: ``hooks.json`` (``$CODEX_HOME`` or ``.codex/`` at the git root), the
  same shape; Codex runs a new hook only once it is trusted (``/hooks``).

On a machine where sync is set up, the same command also starts a background sync once the brief
is printed (:mod:`korg_bridge.recall.sync.background`): nothing here changes for it.

The file is the user's, so: everything else in it stays byte for byte
(:mod:`.json_splice` inserts one array element, or the one member that is
missing, in the file's own indentation); a copy of it is kept first (under
korg-recall's data folder, never beside it); the write is atomic and refused if
the file changed since it was read (:mod:`.guarded_write`); an unparseable file
is refused untouched; installing twice changes nothing. ``uninstall`` removes
exactly the entry it added: when the file is still as ``install`` left it, the
original bytes come back (or the file ``install`` created is deleted);
otherwise only korg-recall's entry -- and the containers ``install`` created, if
emptied -- is cut out; the folders ``install`` created for the file go too, if
they are empty. Nothing else of the agent's settings is ever changed (the
auto-memory switch included). A file JSON parsers disagree on -- a key twice in
one object, ``NaN`` or ``Infinity`` -- is refused untouched, as is a ``hooks``
or ``SessionStart`` of the wrong type (``null`` included).

What korg-recall keeps of this (the copies, ``hooks-installed.json``) lives in
its data folder, ``$XDG_DATA_HOME/korg-recall`` -- wherever the memory store is,
a PostgreSQL server included: hooks have nothing to do with the store.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import AmbiguousJson, ConfigError

if TYPE_CHECKING:
    from korg_bridge.recall.interop.guarded_write import Snapshot

__all__ = ["MATCHERS", "Target", "hook_command", "install", "status", "target_of", "uninstall"]

MATCHERS = {"claude": "startup|clear|compact", "codex": "startup|clear"}
"""When the brief is added: a new session, after /clear, after a compaction (Codex has no compact
source). Not on resume: the resumed transcript already holds the brief it started with."""
HOOK_TIMEOUT_S = 10
"""The agent's bound on the hook (seconds): a brief takes a fraction of one."""
MARKER = "context --hook"
SETTINGS_CAP = 1024 * 1024
STATE_NAME = "hooks-installed.json"
BACKUPS = "hook-backups"


@dataclass(frozen=True, slots=True)
class Target:
    """A settings file a hook goes into."""

    agent: str
    level: str
    path: Path


def target_of(env: Mapping[str, str], agent: str, level: str, root: str) -> Target:
    from korg_bridge.recall.paths import claude_home, codex_home

    if agent == "claude":
        path = (
            claude_home(env) / "settings.json"
            if level == "user"
            else Path(root) / ".claude" / "settings.json"
        )
    else:
        path = codex_home(env) / "hooks.json" if level == "user" else Path(root) / ".codex" / "hooks.json"
    return Target(agent, level, path)


def hook_command(agent: str, level: str) -> str:
    """The command the hook runs: this korg-recall by absolute path for the user's file, plain
    ``korg-recall`` (from PATH) for a project's file, which others share."""
    import shlex
    import shutil

    if level == "project":
        return f"korg-recall {MARKER} {agent}"
    found = shutil.which("korg-recall", path=os.path.dirname(sys.executable)) or shutil.which("korg-recall")
    if found:
        return f"{shlex.quote(os.path.abspath(found))} {MARKER} {agent}"
    return f"{shlex.quote(sys.executable)} -m korg_bridge.recall.cli.app {MARKER} {agent}"


def _group(agent: str, command: str) -> dict[str, Any]:
    return {
        "matcher": MATCHERS[agent],
        "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}],
    }


def _ours(hook: Any) -> bool:
    command = hook.get("command") if isinstance(hook, dict) else None
    return isinstance(command, str) and "korg" in command and MARKER in command


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise AmbiguousJson(f"the key {json.dumps(key)} appears twice in one object")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise AmbiguousJson(f"it holds {name}, which is not JSON")


def _load(snapshot: Snapshot) -> tuple[str | None, dict[str, Any] | None]:
    """The file's text and object (None, None: no file).

    Raises:
        ConfigError: not UTF-8 JSON, JSON read differently by different parsers (a duplicate key,
            ``NaN``), not an object, or ``hooks``/``SessionStart`` of the wrong type.
    """
    if snapshot.data is None:
        return None, None
    where = snapshot.path
    try:
        text = snapshot.data.decode("utf-8")
        value = (
            json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant) if text.strip() else {}
        )
    except AmbiguousJson as exc:
        raise ConfigError(f"{where}: {exc}; fix it by hand first. Nothing was changed.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 text; fix it by hand first. Nothing was changed.") from None
    except RecursionError:
        raise ConfigError(f"{where} nests too deeply to edit safely. Nothing was changed.") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"cannot parse {where} (line {exc.lineno} column {exc.colno}: {exc.msg}); fix it by hand first. "
            "Nothing was changed."
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where} does not hold a JSON object; fix it by hand first. Nothing was changed.")
    hooks = value.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(
            f'{where}: "hooks" is {_kind(hooks)}, not an object; fix it by hand first. Nothing was changed.'
        )
    if not isinstance(hooks.get("SessionStart", []), list):
        raise ConfigError(
            f'{where}: "hooks.SessionStart" is not a list; fix it by hand first. Nothing was changed.'
        )
    return (text if text.strip() else None), value


def _found(value: dict[str, Any] | None) -> list[tuple[int, int]]:
    """``(group, hook)`` positions of korg-recall's hooks under ``hooks.SessionStart``."""
    groups = ((value or {}).get("hooks") or {}).get("SessionStart") or []
    return [
        (g, h)
        for g, group in enumerate(groups)
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for h, hook in enumerate(group["hooks"])
        if _ours(hook)
    ]


def _kind(value: Any) -> str:
    """How a JSON value reads in a message: ``null``, ``a list`` …"""
    if value is None:
        return "null"
    return {list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _data(env: Mapping[str, str]) -> Path:
    """korg-recall's data folder (``$XDG_DATA_HOME/korg-recall``), wherever the store is."""
    from korg_bridge.recall.paths import data_dir

    return data_dir(env)


def _state(env: Mapping[str, str]) -> dict[str, Any]:
    from korg_bridge.recall.interop.guarded_write import read_capped

    try:
        loaded = json.loads(read_capped(_data(env) / STATE_NAME, SETTINGS_CAP) or b"{}")
    except (ConfigError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet (deepest first): what a write would create."""
    missing: list[Path] = []
    while not os.path.lexists(folder) and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def _created(folders: list[Path]) -> list[list[Any]]:
    """``[path, device, inode]`` of each folder just created, so uninstall removes only those."""
    made: list[list[Any]] = []
    for folder in folders:
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        made.append([str(folder), info.st_dev, info.st_ino])
    return made


def _remove_created(entry: Mapping[str, Any]) -> list[str]:
    """Remove the folders ``install`` created (deepest first) that are still those folders and empty."""
    removed: list[str] = []
    for item in entry.get("created_folders") or []:
        try:
            path, dev, ino = str(item[0]), int(item[1]), int(item[2])
            info = os.lstat(path)
            if (info.st_dev, info.st_ino) != (dev, ino):
                break  # not the folder install made
            os.rmdir(path)  # only when empty
        except (OSError, TypeError, ValueError, IndexError):
            break
        removed.append(path)
    return removed


def _save_state(env: Mapping[str, str], state: dict[str, Any]) -> None:
    from korg_bridge.recall.interop.guarded_write import replace, take

    path = _data(env) / STATE_NAME
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    snapshot = take(path, SETTINGS_CAP)
    replace(
        snapshot,
        (json.dumps(state, indent=2, sort_keys=True) + "\n").encode(),
        lock=_data(env) / "hooks.lock",
    )


def _backup(env: Mapping[str, str], target: Target, data: bytes, why: str) -> str:
    """Keep a copy of ``data`` under korg-recall's data folder (never replacing one); its path."""
    from datetime import UTC, datetime

    from korg_bridge._fs.durable import create_new

    folder = _data(env) / BACKUPS
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = create_new(folder / f"{target.agent}-{target.level}-{target.path.name}.{why}-{stamp}", data)
    except OSError as exc:
        raise ConfigError(
            f"cannot keep a copy of {target.path} in {folder}: {exc.strerror or exc}. Nothing was changed."
        ) from exc
    return str(path)


def _with_group(
    text: str | None, value: dict[str, Any] | None, group: dict[str, Any]
) -> tuple[str, dict[str, Any], str]:
    """The new text, the object it must parse to, and what was added (file, hooks, event, group)."""
    import copy

    from korg_bridge.recall.interop import json_splice

    expected = copy.deepcopy(value) if value is not None else {}
    hooks = expected.setdefault("hooks", {})
    hooks.setdefault("SessionStart", []).append(group)
    if text is None:
        return json.dumps(expected, indent=2, ensure_ascii=False) + "\n", expected, "file"
    root = json_splice.parse(text)
    node = root.member("hooks")
    if node is None:
        return json_splice.insert_member(text, root, "hooks", {"SessionStart": [group]}), expected, "hooks"
    event = node.member("SessionStart")
    if event is None:
        return json_splice.insert_member(text, node, "SessionStart", [group]), expected, "event"
    return json_splice.append_element(text, event, group), expected, "group"


def install(env: Mapping[str, str], target: Target, command: str) -> dict[str, Any]:
    """Add the SessionStart hook to ``target``'s file (once).

    Raises:
        ConfigError: the file cannot be parsed, read or written (nothing changed).
        Changed: the file changed while it was being written (nothing changed).
    """
    import hashlib
    from datetime import UTC, datetime

    from korg_bridge.recall.interop.guarded_write import replace, take

    snapshot = take(target.path, SETTINGS_CAP)
    text, value = _load(snapshot)
    result: dict[str, Any] = {"agent": target.agent, "level": target.level, "file": str(snapshot.path)}
    if _found(value):
        return {**result, "status": "already installed", "command": _commands(value)[0]}
    new_text, expected, added = _with_group(text, value, _group(target.agent, command))
    reformatted = False
    try:
        same = json.loads(new_text) == expected
    except ValueError:
        same = False
    if not same:  # the splice could not keep the file's text: write it out whole, still lossless as JSON
        new_text, reformatted = json.dumps(expected, indent=2, ensure_ascii=False) + "\n", True
    backup = _backup(env, target, snapshot.data, "before-install") if snapshot.data is not None else None
    data = new_text.encode("utf-8")
    missing = _missing_folders(snapshot.path.parent)
    replace(snapshot, data, lock=_data(env) / "hooks.lock")
    state = _state(env)
    state[str(snapshot.path)] = {
        "agent": target.agent, "level": target.level, "added": added, "backup": backup,
        "written_sha256": hashlib.sha256(data).hexdigest(), "installed_at": datetime.now(UTC).isoformat(),
        "created_folders": _created(missing),
    }  # fmt: skip
    _save_state(env, state)
    result.update(status="installed", command=command, backup=backup, reformatted=reformatted)
    result["note"] = _note(target)
    return result


def _note(target: Target) -> str:
    if target.agent == "codex":
        return (
            "Codex runs a new hook only once you trust it: open /hooks in Codex and trust korg-recall's "
            "SessionStart hook."
        )
    if target.level == "project":
        return "this file is shared: the hook runs `korg-recall` from PATH for everyone who uses it."
    return "new Claude Code sessions start with the brief; `korg-recall hooks uninstall` removes it."


def _commands(value: dict[str, Any] | None) -> list[str]:
    groups = ((value or {}).get("hooks") or {}).get("SessionStart") or []
    return [str(groups[g]["hooks"][h]["command"]) for g, h in _found(value)]


def _without_ours(text: str, value: dict[str, Any], added: str | None) -> tuple[str, dict[str, Any]]:
    """The text and object with korg-recall's hooks cut out (and the containers it created, if emptied)."""
    import copy

    from korg_bridge.recall.interop import json_splice

    expected = copy.deepcopy(value)
    for g, h in reversed(_found(value)):
        event = json_splice.parse(text).member("hooks").member("SessionStart")  # type: ignore[union-attr]
        assert event is not None
        group = event.items[g]
        inner = group.member("hooks")
        assert inner is not None
        groups = expected["hooks"]["SessionStart"]
        if len(groups[g]["hooks"]) == 1:  # the group holds only our hook: the group goes
            text = json_splice.remove_span(text, event, g)
            del groups[g]
        else:
            text = json_splice.remove_span(text, inner, h)
            del groups[g]["hooks"][h]
    root = json_splice.parse(text)
    hooks = root.member("hooks")
    names = [name for name, _, _ in root.members]
    if hooks is not None and added in ("event", "hooks") and not expected["hooks"].get("SessionStart"):
        index = [name for name, _, _ in hooks.members].index("SessionStart")
        text = json_splice.remove_span(text, hooks, index)
        del expected["hooks"]["SessionStart"]
        root = json_splice.parse(text)
    if added == "hooks" and not expected["hooks"]:
        text = json_splice.remove_span(text, root, names.index("hooks"))
        del expected["hooks"]
    return text, expected


def uninstall(env: Mapping[str, str], target: Target) -> dict[str, Any]:
    """Remove exactly what :func:`install` added to ``target``'s file.

    Raises:
        ConfigError: the file cannot be parsed, read or written (nothing changed).
        Changed: the file changed while it was being written (nothing changed).
    """
    import hashlib

    from korg_bridge.recall.interop.guarded_write import read_capped, remove, replace, take

    snapshot = take(target.path, SETTINGS_CAP)
    text, value = _load(snapshot)
    result: dict[str, Any] = {"agent": target.agent, "level": target.level, "file": str(snapshot.path)}
    state = _state(env)
    entry = state.get(str(snapshot.path)) or {}
    if not _found(value) or snapshot.data is None or text is None or value is None:
        if entry:
            state.pop(str(snapshot.path), None)
            _save_state(env, state)
            if snapshot.data is None:
                _remove_created(entry)
        return {**result, "status": "not installed"}
    lock = _data(env) / "hooks.lock"
    untouched = hashlib.sha256(snapshot.data).hexdigest() == entry.get("written_sha256")
    backup = _backup(env, target, snapshot.data, "before-uninstall")
    original = (
        read_capped(Path(entry["backup"]), SETTINGS_CAP)
        if untouched and isinstance(entry.get("backup"), str)
        else None
    )
    removed: list[str] = []
    if untouched and entry.get("added") == "file":
        remove(snapshot, lock=lock)
        status = "removed the file install created"
        removed = _remove_created(entry)
    elif original is not None:
        replace(snapshot, original, lock=lock)
        status = "restored the file as it was before install"
    else:
        new_text, expected = _without_ours(text, value, entry.get("added"))
        try:
            same = json.loads(new_text) == expected
        except ValueError:
            same = False
        if not same:
            new_text = json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
        replace(snapshot, new_text.encode("utf-8"), lock=lock)
        status = "removed korg-recall's hook (the file changed since install: the rest is kept)"
    state.pop(str(snapshot.path), None)
    _save_state(env, state)
    out = {**result, "status": status, "backup": backup}
    if removed:
        out["removed_folders"] = removed
    return out


def status(env: Mapping[str, str], root: str) -> dict[str, Any]:
    """Which of the four settings files hold korg-recall's hook."""
    from korg_bridge.recall.interop.guarded_write import take

    out: list[dict[str, Any]] = []
    for agent in ("claude", "codex"):
        for level in ("user", "project"):
            target = target_of(env, agent, level, root)
            entry: dict[str, Any] = {"agent": agent, "level": level, "file": str(target.path)}
            try:
                snapshot = take(target.path, SETTINGS_CAP)
                _, value = _load(snapshot)
            except ConfigError as exc:
                out.append({**entry, "installed": False, "error": exc.message})
                continue
            commands = _commands(value)
            entry.update(exists=snapshot.data is not None, installed=bool(commands))
            if commands:
                entry["command"] = commands[0]
            out.append(entry)
    return {"project": root, "hooks": out}
