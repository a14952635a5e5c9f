"""``python -m asyncq`` is the ``asyncq`` command."""

import sys

from ._cli import main

sys.exit(main())
