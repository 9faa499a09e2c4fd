"""``python -m rnnir.cli ...``: the same command as ``rnnir ...``."""

from __future__ import annotations

import sys

from rnnir.cli.app import main

sys.exit(main())
