"""The examples in examples/ run as the tests' own code: that folder is importable."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from stacks.conftest import mysql_place  # noqa: E402, F401 - the MariaDB database fixture
