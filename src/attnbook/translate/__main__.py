"""``python -m attnbook.translate``: the same program as ``attnbook-translate``."""

import sys

from .cli import main

if __name__ == "__main__":  # importing the module (as pkgutil.walk_packages does) runs nothing
    sys.exit(main())
