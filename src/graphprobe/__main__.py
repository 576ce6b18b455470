"""``python -m graphprobe``: the ``graphprobe`` command line."""

import sys

from graphprobe.cli import main

sys.exit(main())
