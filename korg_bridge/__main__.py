"""``python -m korg_bridge`` is ``korg-bridge``."""

import sys

from korg_bridge.cli import main

sys.exit(main())
