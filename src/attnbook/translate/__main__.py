"""``python -m attnbook.translate``: the same program as ``attnbook-translate``."""

import sys

from .cli import main

sys.exit(main())
