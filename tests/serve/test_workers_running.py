"""The dashboard's workers page shows what each live worker's slots run now; both
backends."""

from __future__ import annotations

import hailq
from hailq.internal import ops

from .conftest import ADMIN, Server


def test_running_now_lists_each_busy_slot_of_live_workers(server: Server,
                                                          broker: hailq.Broker) -> None:
    broker.queue("claims")
    now = broker.now()
    busy = [hailq.RunningMessage("01JD0000000000000000004711", "claims", 2, 12.0)]
    ops(broker).save_worker(hailq.WorkerInfo("w-1", "host-a", 7, ["claims"], 4, 1, now - 60, now,
                                        "running", busy))  # since: seconds ago, when saved
    ops(broker).save_worker(hailq.WorkerInfo("w-2", "host-b", 8, ["claims"], 4, 1, now - 60, now,
                                        "stopped", [hailq.RunningMessage(
                                            "01JD0000000000000000009999", "claims", 1, 1.0)]))
    html = server.client(ADMIN).get("/workers").text
    table = html.split('id="running"')[1].split("</table>")[0]
    assert "01JD0000000000000000004711" in table and "/queues/claims/message?id=" in table
    assert "01JD0000000000000000009999" not in table  # a stopped worker runs nothing
    [found] = [w for w in broker.workers() if w.id == "w-1"]
    assert found.running[0].since <= broker.now() - 11  # about 12 s before the report
