"""``python -m rnnir``: the same command line as the ``rnnir`` console script."""

from __future__ import annotations

import sys

from rnnir.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
