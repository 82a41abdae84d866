"""``python -m korg_bridge`` is ``korg-bridge``."""

import sys

from .cli import main

sys.exit(main())
