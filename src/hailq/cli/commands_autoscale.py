"""``hailq autoscale TARGET --queue Q --min N --max M``: worker processes for one queue,
as many as help (SPEC rule 24). The loop is ``hailq.runtime.autoscaler``; the decision
``hailq.policy.autoscale``."""

from __future__ import annotations

import click

import hailq
from hailq.cli.context import Finite, current_app, log_options
from hailq.cli.worker import worker_url
from hailq.policy.autoscale import Limits
from hailq.runtime import logs
from hailq.runtime.autoscaler import Autoscaler, reprobe_ticks
from hailq.runtime.supervisor import MAX_PROCESSES, WorkerSpec
from hailq.settings import check_name


@click.command("autoscale")
@click.argument("target")
@click.option("--queue", "-q", required=True, metavar="Q", help="The queue to consume.")
@click.option("--min", "minimum", type=click.IntRange(0, MAX_PROCESSES), default=1,
              show_default=True, help="Worker processes kept however idle the queue.")
@click.option("--max", "maximum", type=click.IntRange(1, MAX_PROCESSES), required=True,
              help="Worker processes of this autoscaler at most, draining ones included.")
@click.option("--concurrency", "-c", type=click.IntRange(1, 1000), default=1,
              show_default=True, help="Handler threads in each worker process.")
@click.option("--interval", type=Finite(0.2, 3600), default=5.0, show_default=True,
              help="Seconds per measured window and decision; several handler times, so "
                   "a window counts enough completions to compare.")
@click.option("--reprobe", type=Finite(0, 86400), default=300.0, show_default=True,
              metavar="SECONDS", help="How long a measured saturation point holds before "
                                      "one more worker is tried above it again.")
@click.option("--latency-factor", type=Finite(1.01, 1000), default=2.0, show_default=True,
              help="Mean handler time this many times its smallest measured value counts "
                   "as a saturated downstream: one worker fewer.")
@click.option("--trace", type=click.Path(dir_okay=False, writable=True), default=None,
              metavar="FILE", help="Append each measured window and its decision to FILE "
                                   "as JSON lines (to replay or study a run).")
@click.option("--grace", type=Finite(0, 86400), default=30.0, show_default=True,
              help="Seconds a draining worker may finish its in-flight handlers.")
@click.option("--poll", type=Finite(0.01, 60), default=1.0, show_default=True,
              help="Longest single long-poll wait of a worker in seconds.")
@click.option("--time-limit", type=Finite(0.001, 7 * 86400), default=None, metavar="SECONDS",
              help="As for 'hailq worker': fail an attempt whose handler runs longer.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                               case_sensitive=False),
              default="INFO", show_default=True)
@click.option("--no-scheduler", "no_scheduler", is_flag=True,
              help="Do not send periodic messages from the workers.")
@log_options
def autoscale_command(target: str, queue: str, minimum: int, maximum: int, concurrency: int,
                      interval: float, reprobe: float, latency_factor: float,
                      trace: str | None, grace: float,
                      poll: float, time_limit: float | None, log_level: str,
                      no_scheduler: bool) -> int:
    """Run between --min and --max worker processes of TARGET for queue Q, as many as the
    backlog asks and more workers help.

    TARGET is as for 'hailq worker'; each process runs --concurrency handler threads.
    Every --interval seconds it measures completions per second, the mean handler time
    and the backlog, and decides: grow one process at a time, each step a probe that
    is kept only if throughput rose beyond noise; step back, and remember that point,
    when it did not or when handler time rose well above its minimum (a saturated
    downstream); hold at a queue's rate limit; drain back towards --min when the
    backlog wants fewer. A queue in deadline order wants the smallest pool that
    meets every target (its figures' deadline_pool) instead of the backlog's figure;
    a saturated downstream still stops it below. Scale-in sends SIGTERM: a worker
    finishes what it holds.
    Each decision is logged (INFO when it changes the pool) and stored: 'hailq stats'
    shows the last ones. SIGTERM or SIGINT drains every worker and exits 0. Workers
    drain by themselves when the autoscaler is killed. See docs/guides/autoscaling.md.
    """
    if minimum > maximum:
        raise click.BadParameter(f"--min {minimum} is above --max {maximum}",
                                 param_hint="--min")
    try:
        check_name(queue)
    except hailq.InvalidArgument as exc:
        raise click.BadParameter(str(exc), param_hint="--queue") from None
    app = current_app()
    url = worker_url(app.url)
    level = log_level.upper()
    logs.configure(level, json_lines=app.out.json)
    limits = Limits(minimum, maximum, concurrency, latency_factor=latency_factor,
                    reprobe_after=reprobe_ticks(reprobe, interval))
    spec = WorkerSpec(url=url, target=target, queues=(queue,), concurrency=concurrency,
                      grace=grace, poll=poll, log_level=level, json_logs=app.out.json,
                      time_limit=time_limit, scheduler=not no_scheduler)
    spec.handlers()  # import and check before connecting
    with hailq.connect(url) as broker:
        broker.queue(queue)
        return Autoscaler(broker, spec, queue, limits, interval=interval, trace=trace).run()


COMMANDS = [autoscale_command]
