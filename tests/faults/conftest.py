"""Fixtures of the fault suite, on top of the ``url``, ``sqlite_url`` and ``pg_url`` of tests/.

- ``effects``: the effects store of the backend under test (a SQLite file next to
  the broker's, or a schema of its own in the PostgreSQL test database).
- ``figure``: records a measured figure; printed, and appended as a JSON line to
  ``$FAULTS_FIGURES`` when set (docs/reliability.md quotes these).
- ``throwaway_pg``: a PostgreSQL server of the suite's own (see ``pgserver.py``),
  for the tests that restart or stop the server; the shared server is never touched.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from .ledger import EffectStore
from .pgserver import PgServer, start_throwaway

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # fault_handlers imports ``ledger`` as the workers do

Figure = Callable[..., None]


@pytest.fixture
def effects(url: str, tmp_path: Path) -> Iterator[EffectStore]:
    store = effect_store_for(url, tmp_path)
    yield store
    store.drop()


def effect_store_for(url: str, tmp_path: Path) -> EffectStore:
    """A SQLite effects file in ``tmp_path``, or a schema of the application's own beside
    the broker's in the same PostgreSQL database (hailq installs only into a schema that
    is empty or its own, rule 30; the effect and the ack still commit together)."""
    if url.startswith("sqlite:"):
        store = EffectStore(f"sqlite:///{tmp_path / 'effects.db'}")
    else:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        schema = query.pop("schema", "hailq") + "_fx"
        rest = {k: v for k, v in query.items() if k not in ("pool_size", "poll_interval")}
        store = EffectStore(urlunsplit((parts.scheme, parts.netloc, parts.path,
                                        urlencode(rest), "")), schema)
    store.create()
    return store


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Figure:
    def record(**values: object) -> None:
        line = {"test": request.node.nodeid, "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                **values}
        print("FIGURE", json.dumps(line))
        path = os.environ.get("FAULTS_FIGURES")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(line) + "\n")

    return record


@pytest.fixture(scope="session")
def throwaway_pg() -> Iterator[PgServer]:
    # Not under pytest's tmp dir: that is private to root, and the server runs as postgres.
    server = start_throwaway(Path(tempfile.mkdtemp(prefix="hailq-faults-pg-")))
    yield server
    server.destroy()
