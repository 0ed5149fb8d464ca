"""An app with a handler, a subscriber and a schedule, for ``hailq declare`` in a test."""

from __future__ import annotations

import hailq
from hailq.runtime import App

app = App()


@app.handler("claims", lease=45)
def check(message: hailq.Message) -> None: ...


@app.subscriber("claims-events", "audit", filter={"kind": ["hail", "storm"]},
                max_attempts=4)
def audit(message: hailq.Message) -> None: ...


app.periodic(every=3600, queue="claims", body={"sweep": True}, name="hourly-sweep")
