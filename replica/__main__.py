"""``python -m replica``: the ``replica`` command (how the launcher starts node processes)."""

import sys

from replica.cli import main

sys.exit(main())
