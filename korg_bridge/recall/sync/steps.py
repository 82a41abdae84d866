"""``sync init``, ``sync`` and ``sync status``: the steps, in the order that makes a crash harmless.

One sync:

1. pull the remote (nothing here changes if it cannot be reached);
2. check ``FORMAT`` (a newer format, or a key that is not this remote's, stops here);
3. open the other machines' keyrings, verify every other machine's file from where it was last
   applied (a file altered, truncated or replayed stops here: nothing applied);
4. **one store transaction**: this machine's changes become records (:func:`.replicate.export_changes`),
   the others' records are applied (:func:`.replicate.apply_records`), exact repeats they bring
   are made one memory (:func:`.repeats.merge_repeats`, whose changes are exported at once) and the
   point reached in each machine's file is recorded -- all of it commits, or none of it;
5. after commit: finish the purges (VACUUM), destroy their data keys and move to the next
   epoch; the mirror, the operation log and Claude Code write-back follow as after any write;
6. push this machine's file and keyring (regenerated from the store, so a push cut short is
   simply done again by the next sync).

Killed at any point, the next sync neither loses an operation nor applies one twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import ConfigError
from korg_bridge.recall.memory import oplog
from korg_bridge.recall.memory.records import iso
from korg_bridge.recall.paths import MIRROR_NAME, expand, store_location
from korg_bridge.recall.sync.keys import Keys, load_keys, require_crypto, save_keys
from korg_bridge.recall.sync.projects import ProjectMap
from korg_bridge.recall.sync.remote import Remote, is_git_remote, open_remote
from korg_bridge.recall.sync.repeats import merge_repeats
from korg_bridge.recall.sync.replicate import Applied, apply_records, export_changes, watch_changes
from korg_bridge.recall.sync.state import (
    FORMAT_VERSION,
    SyncConfig,
    last_background_run,
    load_config,
    locked,
    save_config,
    sync_dir,
)
from korg_bridge.recall.sync.wire import (
    FORMAT_PATH,
    ROOT,
    Mark,
    Record,
    RemoteRefused,
    format_text,
    genesis,
    keyring_epoch,
    keyring_path,
    open_keyring,
    ops_path,
    seal_keyring,
    verify,
)

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
    from korg_bridge.recall.memory.committed import Touched
    from korg_bridge.recall.memory.scopes import Context

__all__ = ["configure", "init", "status", "sync"]


def _refuse_team_store(env: Mapping[str, str]) -> Path:
    """The SQLite store's path.

    Raises:
        ConfigError: the store is a team store (PostgreSQL).
    """
    where = store_location(env)
    if where.path is None:
        raise ConfigError(
            "sync is for a personal SQLite store; KORG_RECALL_STORE is a PostgreSQL team store, which every machine "
            "already shares, so there is nothing to sync."
        )
    return where.path


def _open_store(env: Mapping[str, str]) -> SqliteStore:
    """Raises:
    ConfigError: the store is a team store (PostgreSQL), or cannot be used."""
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore

    return SqliteStore(_refuse_team_store(env))


def _check_format(files: Mapping[str, bytes], keys: Keys, label: str) -> bool:
    """Whether ``FORMAT`` exists (False: nothing was ever synced there).

    Raises:
        ConfigError: a newer format, or a key that is not the remote's.
    """
    data = files.get(FORMAT_PATH)
    if data is None:
        return False
    try:
        info = json.loads(data)
        version, check = int(info["format"]), str(info["key_check"])
    except (ValueError, KeyError, TypeError):
        raise RemoteRefused(f"{FORMAT_PATH} on the sync remote {label} is not a sync format file.") from None
    if version > FORMAT_VERSION:
        raise ConfigError(
            f"the sync remote {label} was written by a newer korg-recall (format {version}; this one reads "
            f"{FORMAT_VERSION}). Upgrade korg-recall on this machine; nothing was changed."
        )
    if check != keys.check_value:
        raise ConfigError(
            f"this machine's sync key is not the key of the sync remote {label}; nothing was changed. Join with "
            "the key another machine prints (`korg-recall sync status --key`)."
        )
    return True


def _normalise_remote(remote: str, env: Mapping[str, str]) -> str:
    text = remote.strip()
    if not text:
        raise ConfigError("--remote is empty: pass a git URL or a folder.")
    return text if is_git_remote(text) and not Path(text).exists() else str(expand(text, env))


def init(env: Mapping[str, str], remote: str, join: str | None) -> dict[str, Any]:
    """Set this machine up to sync with ``remote``; the first machine gets the join key to print.

    Raises:
        ConfigError: already set up, a PG store, a remote already in use without ``--join``,
            a wrong join key.
        UsageError: a malformed join key.
        NetworkError: the remote cannot be reached.
        DependencyMissing: ``cryptography`` is missing.
    """
    _refuse_team_store(env)
    require_crypto()
    keys = Keys.from_join_key(join) if join else Keys.fresh()
    with _open_store(env) as store, store.write() as conn:
        watch_changes(conn)  # from here on every write is noted for the first sync
    folder = sync_dir(env)
    if (folder / "config.json").exists():
        config = load_config(env)
        raise ConfigError(
            f"sync is set up already on this machine (machine {config.machine}, remote {config.remote}). To start "
            f"over, move {folder} away first."
        )
    target = _normalise_remote(remote, env)
    git = is_git_remote(target)
    if not git:
        try:
            Path(target).mkdir(parents=False, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot use {target} as the sync folder: {exc.strerror or exc}.") from exc
    config = SyncConfig(machine=SyncConfig.new_machine_id(), remote=target)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle = open_remote(target, folder / "git", config.machine)
    files = handle.pull()
    if FORMAT_PATH in files and not join:
        raise ConfigError(
            f"the sync remote {handle.label} holds another machine's memories already. Pass --join KEY with the key "
            "that machine prints (`korg-recall sync status --key`)."
        )
    if not _check_format(files, keys, handle.label):
        handle.push({FORMAT_PATH: format_text(keys.check_value).encode("ascii")}, "korg-sync: format 1")
    save_keys(folder, keys)
    save_config(env, config)
    result: dict[str, Any] = {
        "machine": config.machine,
        "remote": target,
        "kind": "git" if git else "folder",
        "note": "run `korg-recall sync` to pull and push",
    }
    if not join:
        result["join_key"] = keys.join_key()
        result["note"] = (
            "keep the join key secret; on each other machine run `korg-recall sync init --remote REMOTE --join KEY`, "
            "then `korg-recall sync`"
        )
    return result


def _peer_files(files: Mapping[str, bytes], me: str, suffix: str, folder: str) -> dict[str, bytes]:
    prefix = f"{ROOT}/{folder}/"
    return {
        rel[len(prefix) : -len(suffix)]: data
        for rel, data in files.items()
        if rel.startswith(prefix) and rel.endswith(suffix) and rel[len(prefix) : -len(suffix)] != me
    }


def _merge_keyrings(files: Mapping[str, bytes], me: str, keys: Keys, purged: set[str]) -> None:
    """Raises:
    RemoteRefused: a keyring under an epoch this machine can open does not open (altered)."""
    for machine, data in _peer_files(files, me, ".keys", "keyring").items():
        found = keyring_epoch(data)
        if found is None:
            raise RemoteRefused(f"{keyring_path(machine)} is not a keyring; nothing was applied.")
        epoch, obj = found
        key = keys.key_for_epoch(epoch)
        if key is None:
            continue  # written before a purge this machine knows of: that machine catches up when it syncs
        deks = open_keyring(obj, key)
        if deks is None:
            raise RemoteRefused(
                f"{keyring_path(machine)} was altered (it does not open); nothing was applied."
            )
        for memory_id, dek in deks.items():
            if memory_id not in purged:
                keys.deks.setdefault(memory_id, dek)


def _verified(
    files: Mapping[str, bytes], me: str, keys: Keys, marks: Mapping[str, Mark]
) -> list[tuple[Record, str]]:
    peers = _peer_files(files, me, ".ops", "machines")
    gone = sorted(set(marks) - set(peers))
    if gone:
        raise RemoteRefused(
            f"{ops_path(gone[0])} was altered, truncated or replayed: it is missing, though it was applied here; "
            "nothing was applied."
        )
    records: list[tuple[Record, str]] = []
    auth = keys.auth_key
    for machine, data in sorted(peers.items()):
        records.extend(verify(ops_path(machine), machine, data, auth, marks.get(machine)))
    return records


def sync(env: Mapping[str, str], ctx: Context) -> dict[str, Any]:
    """Pull, apply, push (see the module docstring); what happened.

    Raises:
        ConfigError: not set up, a PG store, a wrong key, a newer remote format.
        RemoteRefused: a remote file failed its checks (nothing applied).
        NetworkError: the remote cannot be reached (nothing applied).
        DependencyMissing: ``cryptography`` or ``git`` is missing.
    """
    _refuse_team_store(env)
    require_crypto()
    config = load_config(env)
    folder = sync_dir(env)
    with locked(env), _open_store(env) as store:
        keys = load_keys(folder / "keys")
        handle = open_remote(config.remote, folder / "git", config.machine)
        files = handle.pull()
        has_format = _check_format(files, keys, handle.label)
        with store.reading() as tx:
            purged = {str(row[0]) for row in tx.execute("SELECT id FROM sync_purged").fetchall()}
            marks = {
                str(m): Mark(int(s), str(h), int(a), int(b))
                for m, s, h, a, b in tx.execute(
                    "SELECT machine, seq, hash, start, stop FROM sync_peers"
                ).fetchall()
            }
            scopes = [
                str(row[0])
                for row in tx.execute(
                    "SELECT DISTINCT scope FROM memory WHERE superseded_by IS NULL AND scope LIKE 'project:%'"
                ).fetchall()
            ]
        _forget_purged(keys, purged)
        _merge_keyrings(files, config.machine, keys, purged)
        records = _verified(files, config.machine, keys, marks)
        pmap = ProjectMap(config.projects, [*scopes, ctx.project])
        root = store.folder / MIRROR_NAME
        with store.write() as conn:
            watch_changes(conn)
            out = export_changes(
                conn, machine=config.machine, keys=keys, pmap=pmap, genesis=genesis(config.machine)
            )
            applied = apply_records(conn, records, keys=keys, pmap=pmap, mirror_root=root, now=iso(ctx.now))
            merged = merge_repeats(
                conn,
                applied.touched - set(applied.purged),
                machine=config.machine,
                actor=ctx.actor,
                now=iso(ctx.now),
            )
            if merged:  # the merge's changes go out in this sync, after everything it saw
                applied.touched.update(i for m in merged for i in (m.kept, m.retired))
                out.written += export_changes(
                    conn, machine=config.machine, keys=keys, pmap=pmap, genesis=genesis(config.machine)
                ).written
            conn.executemany(
                "INSERT INTO sync_peers (machine, seq, hash, start, stop) VALUES (?, ?, ?, ?, ?) ON CONFLICT (machine) "
                "DO UPDATE SET seq = excluded.seq, hash = excluded.hash, start = excluded.start, stop = excluded.stop",
                [(m, k.seq, k.hash, k.start, k.end) for m, k in applied.marks.items()],
            )
            if applied.count or out.written:
                oplog.record(
                    conn,
                    actor=ctx.actor,
                    op="sync",
                    status="synced",
                    args={
                        "machine": config.machine,
                        "sent": out.written,
                        "applied": applied.count,
                        "purged": applied.purged,
                        "merged": [m.to_dict() for m in merged],
                    },
                    now=ctx.now,
                )
            if out.new_keys:
                save_keys(folder, keys)  # before commit: no record goes out under a key not kept
            purged_now = {str(row[0]) for row in conn.execute("SELECT id FROM sync_purged").fetchall()}
            conflicts = int(
                conn.execute(
                    "SELECT count(*) FROM memory WHERE superseded_by IS NULL AND conflict = 1 AND state = 'live'"
                ).fetchone()[0]
            )
        if _forget_purged(keys, purged_now) or out.new_keys:
            save_keys(folder, keys)
        checks: dict[str, Any] = {}
        if purged_now - purged:
            checks.update(store.after_purge())
        if applied.touched or applied.purged:
            checks.update(_after_apply(store, ctx, applied))
        else:
            store.flush_log(ctx.env)
        pushed = _push(handle, store, config.machine, keys, files, has_format)
    result: dict[str, Any] = {
        "machine": config.machine,
        "remote": handle.label,
        "sent": out.written,
        "applied": applied.count,
        "purged": applied.purged,
        "conflicts": conflicts,
        "pushed": pushed,
        "epoch": keys.epoch,
    }
    if merged:
        result["merged"] = [m.to_dict() for m in merged]
    if applied.waiting:
        result["waiting"] = applied.waiting
    if checks:
        result["checks"] = checks
    return result


def _after_apply(store: SqliteStore, ctx: Context, applied: Applied) -> dict[str, Any]:
    """What follows any write (:func:`~korg_bridge.recall.memory.projections.after_commit`: the
    operation log, the mirror, Claude Code write-back when this machine has it on, then the
    listeners, told of a ``sync``). A first sync of thousands of memories writes the mirror as an
    import does: a batch now, the rest over the next calls, instead of holding the store for minutes."""
    import dataclasses

    from korg_bridge.recall.memory.committed import CommittedChange, Touched
    from korg_bridge.recall.memory.mirror import files as mirror
    from korg_bridge.recall.memory.projections import after_commit

    ids = sorted(applied.touched - set(applied.purged))
    big = len(ids) > mirror.WRITE_BATCH
    touched = [*_heads(store, ids), *(Touched(i, 0, "purged", "", "purged", "") for i in applied.purged)]
    change = CommittedChange.of(
        dataclasses.replace(ctx, mirror=False) if big else ctx,
        "sync",
        touched,
        mirror_problems=[
            f"{path}: left as it is (not written by korg-recall)" for path in applied.left_files
        ],
    )
    checks = after_commit(store, change)
    if big and ctx.mirror:
        problems = mirror.reconcile(store)
        waiting = mirror.waiting(store)
        checks["mirror"] = problems or (
            f"{waiting} memories' files are written over the next calls" if waiting else "up to date"
        )
    return checks


def _heads(store: SqliteStore, ids: list[str]) -> list[Touched]:
    """The version each synced memory is at now, for the projections and listeners."""
    from korg_bridge.recall.memory.committed import Touched

    found: list[Touched] = []
    with store.reading() as conn:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT id, version, state, scope FROM memory WHERE id IN ({marks}) AND superseded_by IS NULL",
                tuple(chunk),
            ).fetchall()
            found += [Touched(str(i), int(v), str(st), str(sc), "synced", "") for i, v, st, sc in rows]
    return found


def _forget_purged(keys: Keys, purged: set[str]) -> bool:
    """Destroy the data keys of purged memories and move to their epoch; whether anything changed."""
    before = (len(keys.deks), keys.epoch)
    for memory_id in purged:
        keys.deks.pop(memory_id, None)
    keys.advance_to(len(purged))
    return (len(keys.deks), keys.epoch) != before


def _push(
    handle: Remote, store: SqliteStore, machine: str, keys: Keys, files: Mapping[str, bytes], has_format: bool
) -> list[str]:
    out: dict[str, bytes] = {}
    if not has_format:
        out[FORMAT_PATH] = format_text(keys.check_value).encode("ascii")
    there = files.get(ops_path(machine))
    with store.reading() as tx:
        count = int(tx.execute("SELECT coalesce(max(seq), 0) FROM sync_out").fetchone()[0])
        last = tx.execute("SELECT line FROM sync_out WHERE seq = ?", (count,)).fetchone()
        # The remote's copy of this machine's file was read whole (the pull); it is rebuilt only when
        # it does not end with this machine's last record -- a sync with nothing new stays cheap.
        same = last is None or (there is not None and there.endswith(b"\n" + bytes(last[0]) + b"\n"))
        if count == 1 and there is not None and last is not None:
            same = there == bytes(last[0]) + b"\n"
        if count and not same:
            lines = [bytes(row[0]) for row in tx.execute("SELECT line FROM sync_out ORDER BY seq").fetchall()]
            out[ops_path(machine)] = b"".join(line + b"\n" for line in lines)
    current = files.get(keyring_path(machine))
    found = keyring_epoch(current) if current is not None else None
    same = (
        found is not None and found[0] == keys.epoch and open_keyring(found[1], keys.epoch_key) == keys.deks
    )
    if not same and (keys.deks or current is not None):
        out[keyring_path(machine)] = seal_keyring(machine, keys.epoch, keys.epoch_key, keys.deks).encode(
            "ascii"
        )
    if out:
        handle.push(out, f"korg-sync: {machine} at record {count}")
    return sorted(out)


def status(env: Mapping[str, str], *, show_key: bool) -> dict[str, Any]:
    """What is set up, how far each machine's file was applied; the join key with ``show_key``.

    Raises:
        ConfigError: not set up, or a PG store.
    """
    _refuse_team_store(env)
    require_crypto()
    config = load_config(env)
    keys = load_keys(sync_dir(env) / "keys")
    with _open_store(env) as store, store.reading() as tx:
        sent = int(tx.execute("SELECT count(*) FROM sync_out").fetchone()[0])
        peers = {
            str(m): int(s) for m, s in tx.execute("SELECT machine, seq FROM sync_peers ORDER BY machine")
        }
        conflicts = int(
            tx.execute(
                "SELECT count(*) FROM memory WHERE superseded_by IS NULL AND conflict = 1 AND state = 'live'"
            ).fetchone()[0]
        )
    result: dict[str, Any] = {
        "machine": config.machine,
        "remote": config.remote,
        "kind": "git" if is_git_remote(config.remote) else "folder",
        "format": config.format,
        "epoch": keys.epoch,
        "records_sent": sent,
        "peers": peers,
        "conflicts": conflicts,
        "on_session_start": config.on_session_start,
    }
    background = last_background_run(env)
    if background is not None:
        result["last_background_sync"] = background
    if show_key:
        result["join_key"] = keys.join_key()
    return result


def configure(env: Mapping[str, str], *, on_session_start: bool | None) -> dict[str, Any]:
    """Change the settings given (None: leave it), and show them all.

    Raises:
        ConfigError: not set up, or its config cannot be read or written.
        DependencyMissing: ``cryptography`` is missing (as for every sync command).
    """
    require_crypto()
    config = load_config(env)
    if on_session_start is not None and on_session_start != config.on_session_start:
        config.on_session_start = on_session_start
        save_config(env, config)
    return {
        "machine": config.machine,
        "remote": config.remote,
        "on_session_start": config.on_session_start,
        "projects": config.projects,
    }
