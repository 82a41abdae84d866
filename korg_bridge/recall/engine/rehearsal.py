"""A spare's rehearsal: before a call arrives, the spare runs a recall against a scratch history
and store of the engine's own, so the call finds the spare's memory already its own.

A child forked from the engine shares the engine's pages until it writes to one; then the kernel
copies that page. Running Python writes everywhere -- every object a call touches has its
reference count changed -- so a call's first run through the code copies some 2,000-5,000 pages
and finds the processor's caches cold: measured in forked children on 20k events and 10k
memories, a keyword recall took 8-10 ms longer, a hybrid one up to 25 ms longer, than the same
call run a second time in the same child. The spare has that time to spare while it waits, so it
runs one recall (:attr:`Rehearsal.steps`) against a tiny scratch environment in
``engine/rehearsal/``: a ledger of three events, an index, a store of three memories, made once
per engine, after its first three calls, by a helper it forks (:meth:`Rehearsal.prepare`).

Nothing of the rehearsal reaches a call: it runs with its own environment, folder, streams (all
output discarded), logging off and warnings caught; writes off (``KORG_RECALL_WRITES=off``: no use
counts), no background indexer, no Markdown mirror; every per-process mark it may set (the
model's "loaded" debug line, said once per process) is put back, and a step that leaves an exit
handler or a thread behind ends the spare (the engine forks another). A spare whose call is
already waiting, or that the engine tells to go, does not rehearse; anything failing in a
rehearsal only ends it. ``KORG_RECALL_ENGINE_REHEARSE=0`` switches it off. The scratch folder
holds nothing of the user's and is removed when the engine stops (and when the next one
prepares its own, should an engine be killed).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import shutil
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from korg_bridge.config import (
    ENV_HOME,
    ENV_RECALL_BACKGROUND,
    ENV_RECALL_ENGINE,
    ENV_RECALL_INDEX,
    ENV_RECALL_LEDGER,
    ENV_RECALL_MIRROR,
    ENV_RECALL_MODEL,
    ENV_RECALL_MODEL_DIR,
    ENV_RECALL_STORE,
    ENV_RECALL_WRITES,
    ENV_XDG_CACHE_HOME,
    ENV_XDG_DATA_HOME,
)
from korg_bridge.recall.paths import cache_dir

__all__ = ["FOLDER", "Rehearsal"]

FOLDER = "rehearsal"
"""The scratch folder, inside the engine's own folder."""
READY = "ready"
"""Written by the helper once the scratch history and store are made."""
QUERY = "deploy database port"
EVENTS = (
    ("make deploy", "deployed the api with blue green"),
    ("psql -p 5433 -c 'select 1'", "the staging database answered on port 5433"),
    ("pytest -q", "42 passed"),
)
MEMORIES = (
    ("The api deploys with blue green on Tuesdays.", "project"),
    ("The staging database listens on port 5433.", "user"),
    ("Run pytest before every push.", "feedback"),
)
KEPT_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", ENV_RECALL_MODEL, ENV_RECALL_MODEL_DIR)
"""What the scratch environment takes from the engine's: the locale, and the model it loaded."""


def _event(seq: int, command: str, output: str) -> dict[str, object]:
    return {
        "seq": seq,
        "source_agent": "agent:rehearsal",
        "tool_name": "Bash",
        "args": {"command": command},
        "result": {"output": output},
        "success": True,
    }


class Rehearsal:
    """The scratch environment of one engine, and the steps its spares rehearse."""

    def __init__(self, where: Path, env: Mapping[str, str], *, hybrid: bool) -> None:
        self.root = where / FOLDER
        self.project = self.root / "project"
        self.hybrid = hybrid
        cache = str(cache_dir(env).parent)  # where a pulled model is found: the engine's
        self.env = {name: env[name] for name in KEPT_VARIABLES if name in env}
        self.env.update(
            {
                ENV_HOME: str(self.root / "home"),
                ENV_XDG_DATA_HOME: str(self.root / "data"),
                ENV_XDG_CACHE_HOME: cache,
                ENV_RECALL_INDEX: str(self.root / "index.sqlite"),
                ENV_RECALL_STORE: str(self.root / "data" / "memory.sqlite"),
                ENV_RECALL_LEDGER: str(self.root / "ledgers"),
                ENV_RECALL_BACKGROUND: "0",
                ENV_RECALL_ENGINE: "off",
                ENV_RECALL_MIRROR: "off",  # no Markdown folder of memories in a cache folder
            }
        )

    @property
    def steps(self) -> list[list[str]]:
        """What a spare rehearses: one recall, by meaning too when the engine has a model. It runs
        through most of what every call runs (the store, the index, ranking, output);
        more steps measured no better, as a call arriving mid-step waits for it (A/B in one engine,
        calls alternating rehearsed and not: hybrid recall 10-17 ms faster, ``remember`` 7-10,
        keyword recall 1-6; with four steps each gained less)."""
        return [["recall", "--query", QUERY, "--mode", "hybrid" if self.hybrid else "keyword"]]

    def prepare(self, main: Callable[[list[str]], int], engine_fds: Sequence[int]) -> int | None:
        """Make the scratch folder and fork the helper that fills it (the engine reaps it as any
        child; ``engine_fds``, the engine's lock and pipes, are closed in it); its pid, or None when
        the folder cannot be made (then spares do not rehearse)."""
        try:
            self.discard()
            self.root.mkdir(mode=0o700)
            (self.project / ".git").mkdir(parents=True)
            (self.root / "ledgers").mkdir()
            lines = [json.dumps(_event(n + 1, *pair)) + "\n" for n, pair in enumerate(EVENTS)]
            (self.root / "ledgers" / "main.jsonl").write_text("".join(lines), encoding="utf-8")
        except OSError:
            return None
        pid = os.fork()
        if pid:
            return pid
        try:  # the helper: never returns into the engine
            for fd in engine_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            os.setpgid(0, 0)
            done = True
            for content, kind in MEMORIES:
                done = (
                    self._step(main, ["remember", "--content", content, "--type", kind], writes=True) and done
                )
            done = self._step(main, ["index"], writes=True) and done
            if done:
                (self.root / READY).write_text("", encoding="utf-8")
        finally:
            os._exit(0)

    def discard(self) -> None:
        """Remove the scratch folder (ours: made in the engine's own folder, never a link)."""
        if self.root.is_symlink():
            return
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.root)

    @property
    def ready(self) -> bool:
        """Whether the helper has made the scratch history and store."""
        return (self.root / READY).is_file()

    def rehearse(self, main: Callable[[list[str]], int], handoff: socket.socket) -> None:
        """In a spare: the steps, until a call (or the engine's word to go) is waiting."""
        for argv in self.steps:
            if select.select([handoff], [], [], 0)[0]:
                return
            if not self._step(main, argv, writes=False):
                return

    def _step(self, main: Callable[[list[str]], int], argv: Sequence[str], *, writes: bool) -> bool:
        """Run one command as a call would, in the scratch environment, and put back everything it
        could have changed in this process; whether it ran and succeeded."""
        from korg_bridge.recall.semantic import modes

        try:
            saved_cwd = os.getcwd()
        except OSError:  # the engine's folder is gone: nowhere to come back to
            return False
        saved_env = dict(os.environ)
        saved_streams = (sys.stdin, sys.stdout, sys.stderr)
        saved_loaded = dict(modes._LOADED_BY)
        callbacks = atexit._ncallbacks()
        threads = set(threading.enumerate())
        null = open(os.devnull, "r+", encoding="utf-8")  # noqa: SIM115 -- closed below, after the streams are back
        ok = False
        try:
            os.environ.clear()
            os.environ.update(self.env)
            os.environ[ENV_RECALL_WRITES] = "auto" if writes else "off"
            os.chdir(self.project)
            sys.stdin, sys.stdout, sys.stderr = (null, null, null)
            logging.disable(logging.CRITICAL)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ok = main(list(argv)) == 0
        except BaseException:  # a rehearsal that fails only ends the rehearsal
            ok = False
        finally:
            logging.disable(logging.NOTSET)
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            null.close()
            os.environ.clear()
            os.environ.update(saved_env)
            with contextlib.suppress(OSError):
                os.chdir(saved_cwd)
            modes._LOADED_BY.clear()
            modes._LOADED_BY.update(saved_loaded)
        if atexit._ncallbacks() != callbacks or any(
            not t.daemon for t in set(threading.enumerate()) - threads
        ):
            # Something the call would inherit (an exit handler, a thread): this spare cannot serve.
            os._exit(0)
        return ok
