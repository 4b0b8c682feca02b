"""``python -m xlasdk.cli``: the ``xlasdk`` command."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
