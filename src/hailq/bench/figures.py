"""``hailq bench --only figures``: what counting every consumer's figures costs (rule 36).

One consumer process drains the same backlog through the API (``receive`` then
``ack_many``), once with the broker's figures on (every claim's wait and every ack's
handler time counted in memory, written once a second) and once with
``hailq.connect(url, figures=False)``, in alternating order within each run so that a
neighbour's load falls on both alike. The ratio is with ÷ without: 1.0 costs nothing.
"""

from __future__ import annotations

from hailq.bench.paired import paired_drains
from hailq.bench.runner import Figure, reset_hailq


def bench_figures(url: str, runs: int, n: int) -> list[Figure]:
    """A drain of ``n`` messages with and without figures, per batch size (1 and 10)."""
    return paired_drains(reset_hailq(url), url, runs, n, "figures (vs without)",
                         figures=lambda on: on)
