"""``python -m laya``: see :mod:`laya.cli`."""

import sys

from laya.cli import main

sys.exit(main())
