"""``python -m korg_bridge.recall.engine ARGS``: ``korg-recall engine ARGS`` (how ``auto`` starts one)."""

from __future__ import annotations

import sys

from korg_bridge.recall.cli.app import main

raise SystemExit(main(["engine", *sys.argv[1:]]))
