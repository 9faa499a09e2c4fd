"""``python -m rnnir.cli ...``: the same command as ``rnnir ...``."""

from __future__ import annotations

import sys

from rnnir.cli.app import main

if __name__ == "__main__":  # importing the module (a tool walking the package) runs nothing
    sys.exit(main())
