"""``python -m replica.cli``: the same as the ``replica`` command."""

import sys

from . import main

sys.exit(main())
