"""The decisions of ``hailq autoscale`` (rule 24) in the broker's database: a part of
``SqlBackend`` over ``self.dialect``. One row per tick of each autoscaler, kept an hour
(the maintenance service prunes them: ``hailq/backends/upkeep.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hailq.backends.base import AutoscaleListParams
from hailq.backends.dialect import Tx
from hailq.backends.store import Part
from hailq.models import AutoscalerInfo


class AutoscaleStore(Part):
    """``autoscale_record`` and ``autoscale_list`` of the Backend seam."""

    def autoscale_record(self, info: AutoscalerInfo) -> None:
        args = {"autoscaler": info.id, "queue": info.queue, "host": info.host,
                "pid": info.pid, "workers": info.workers, "desired": info.desired,
                "decision": info.decision, "reason": info.reason, "ceiling": info.ceiling,
                "minimum": info.minimum, "maximum": info.maximum,
                "throughput": info.throughput, "handler_time": info.handler_time}

        self.dialect.work(lambda tx: tx.exec("autoscale_record", {**args, "now": tx.now}),
                          durable=False)

    def autoscale_list(self, params: AutoscaleListParams) -> list[AutoscalerInfo]:
        """With ``limit``: the last decisions newest first; without: each autoscaler's
        last decision. Only decisions at ``since`` or later; a read."""
        queue, since, limit = params.queue, params.since, params.limit

        def look(tx: Tx) -> Sequence[Sequence[Any]]:
            if limit is None:
                return tx.run("autoscale_latest", {"queue": queue, "since": since})
            return tx.run("autoscale_list", {"queue": queue, "since": since,
                                             "limit": limit})

        return [_info(r) for r in self.dialect.read(look)]


def _info(row: Sequence[Any]) -> AutoscalerInfo:
    i, q, host, pid, workers, desired, decision, reason, at, ceiling, lo, hi, tput, ht = row
    return AutoscalerInfo(
        id=str(i), queue=str(q), host=str(host), pid=int(pid), workers=int(workers),
        desired=int(desired), decision=str(decision), reason=str(reason), at=float(at),
        ceiling=None if ceiling is None else int(ceiling), minimum=int(lo), maximum=int(hi),
        throughput=None if tput is None else float(tput),
        handler_time=None if ht is None else float(ht))
