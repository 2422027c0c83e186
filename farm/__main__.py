"""``python -m farm``: the same as the ``farm`` command."""

import sys

from farm.cli import main

sys.exit(main())
