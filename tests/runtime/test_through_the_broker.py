"""The worker runtime and the command line reach storage only through ``Broker``.

``Broker`` is the one door into storage (see STYLE.md): code that reaches past it to
``broker.backend`` ties itself to the seam's methods and skips whatever the broker does
around them. A line-level check is enough to keep it that way.
"""

from __future__ import annotations

import re
from pathlib import Path

import hailq

PACKAGE = Path(hailq.__file__).parent
# The backend as an attribute of anything (broker.backend, self.broker.backend), and any
# import of the backends package.
PAST_THE_BROKER = re.compile(r"\.backend\b|hailq\.backends\b")


def test_runtime_and_cli_never_reach_past_the_broker() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for folder in ("runtime", "cli")
             for path in sorted((PACKAGE / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if PAST_THE_BROKER.search(line)]
    assert found == [], "use the Broker's methods instead:\n" + "\n".join(found)


def test_the_check_would_see_a_reach_past_the_broker() -> None:
    for line in ("now = broker.backend.clock_now()", "self.broker.backend.worker_save(w)",
                 "from hailq.backends.base import Backend", "import hailq.backends.sqlite"):
        assert PAST_THE_BROKER.search(line), line
    for line in ("self._broker.wait(queues, poll)", "now = broker.now()",
                 "# a URL whose backend is not installed"):
        assert not PAST_THE_BROKER.search(line), line
