"""The autoscaler's decision (SPEC rule 24): a pure function, state in, decision out.

``hailq autoscale`` measures one window per tick (completions, mean handler time, the
backlog) and asks ``decide`` how many worker processes to run next. The backlog says
how many it *wants* (``policy.scaling.desired_workers``: Little's law, the backlog
against the service levels, the rate limit). Whether more workers *help* is found by
hill climbing, as a thread pool that probes its own size does:

- Grow one process at a time, each step a probe: the next settled window at n+1 is
  compared with the window at n before it. The probe is kept only if completions per
  second rose beyond noise: by at least ``gain`` of what one more worker adds when
  throughput scales linearly (``rate_n / n``), and by more than ``noise`` standard
  errors of the two counts (Poisson). Otherwise the pool steps back to n and n is the
  measured *saturation point* (a downstream that serves no more, the drowned results
  database of the hailstorm): no probe above it for ``reprobe_after`` ticks, and it
  stays the known point (capping ``desired_workers``) until a probe above it is kept.
- Handler time is the second signal, as in a latency-based (Vegas-like) limit: a mean
  handler time ``latency_factor`` times its smallest value lately (a minimum kept for
  ``reprobe_after`` ticks, then measured anew) means the workers queue for something
  downstream; the pool steps back one and records the point.
- A rate-limited queue (rule 33) is not a saturated one: throughput flat at the limit
  asks for no more workers (and records no saturation point), and never more than
  ``rate x handler time / concurrency`` processes are wanted.
- Fewer workers are run once the backlog wants fewer for ``calm_ticks`` ticks in a row;
  an empty queue returns to ``minimum``.
- A queue in deadline order (rule 41) wants ``Observation.target`` instead: the smallest
  pool that meets every target (``policy/pool.py``, read from the queue's figures), or,
  where no pool can, the largest useful one, ``target_reason`` saying why. The same
  probes, saturation point and rate limit cap it: past a saturated downstream more
  workers would not make the targets either.

Every decision carries a reason in words, logged and stored by the loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from hailq.errors import InvalidArgument
from hailq.policy.scaling import Demand, desired_workers

Action = Literal["grow", "shrink", "hold"]
FEW = 10  # completions in a probe's two windows below which throughput says nothing


@dataclass(frozen=True)
class Limits:
    """The autoscaler's options, checked once."""

    minimum: int
    maximum: int
    concurrency: int = 1  # handler threads per worker process
    gain: float = 0.5  # share of a linear step's gain a probe must show
    noise: float = 1.0  # standard errors the gain must exceed
    latency_factor: float = 2.0  # handler time this many times its minimum: saturated
    reprobe_after: int = 30  # ticks a saturation point holds before probing above it
    calm_ticks: int = 2  # ticks the backlog must want fewer before scaling in

    def __post_init__(self) -> None:
        for name in ("minimum", "maximum", "concurrency", "reprobe_after", "calm_ticks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be a whole number of at least 0, "
                                      f"got {value!r}")
        if self.maximum < 1 or self.minimum > self.maximum:
            raise InvalidArgument(f"need 0 <= min <= max and max >= 1, got min "
                                  f"{self.minimum} and max {self.maximum}")
        if self.concurrency < 1:
            raise InvalidArgument(f"concurrency must be at least 1, got {self.concurrency}")
        if not self.latency_factor > 1.0:
            raise InvalidArgument(f"latency_factor must be more than 1, got "
                                  f"{self.latency_factor!r}")
        if self.gain < 0.0 or self.noise < 0.0:
            raise InvalidArgument("gain and noise must be at least 0")


@dataclass(frozen=True)
class Observation:
    """One window of one queue, as the loop measured it."""

    workers: int  # worker processes of this autoscaler running now
    settled: bool  # the same processes ran through the whole window (none starting)
    elapsed: float  # seconds the window lasted
    completed: int  # messages finished in the window (acked or failed)
    sent: int  # messages sent to the queue in the window
    handler_time: float | None  # mean handler seconds in the window (None: none ended)
    ready: int  # receivable now
    in_flight: int  # leased now
    oldest_ready_age: float | None = None
    rate: float | None = None  # the queue's rate limit, messages per second
    slo: tuple[float, ...] = ()
    max_in_flight: int | None = None
    paused: bool = False  # an operator paused the queue (rule 32): no one receives
    # Deadline order (rule 41): the smallest pool that meets every target, before any
    # saturation point (None: priority order, the backlog's figure instead), and why
    # no pool meets them where none can (then ``target`` is the largest useful pool).
    target: int | None = None
    target_reason: str | None = None

    @property
    def throughput(self) -> float | None:
        return self.completed / self.elapsed if self.elapsed > 0 else None


@dataclass(frozen=True)
class State:
    """What the autoscaler remembers between ticks (start with ``State()``)."""

    probe_from: int | None = None  # a probe from this many workers is being measured
    baseline: tuple[int, float] | None = None  # (completed, seconds) at probe_from
    min_handler: float | None = None  # the smallest mean handler time measured lately
    min_age: int = 0  # ticks since it was measured
    ceiling: int | None = None  # the measured saturation point, until a probe beats it
    ceiling_age: int = 0  # ticks since it was measured (probes above it after reprobe_after)
    calm: int = 0  # ticks in a row the backlog wanted fewer workers


@dataclass(frozen=True)
class Decision:
    """How many worker processes to run from now, and why."""

    workers: int
    action: Action
    reason: str
    desired: int  # what the backlog asks, within min, max, the rate limit and the ceiling
    state: State

    @property
    def ceiling(self) -> int | None:
        return self.state.ceiling


def decide(state: State, obs: Observation, limits: Limits) -> Decision:
    """The next size of the pool for one observed window (see the module's docstring)."""
    n = obs.workers
    handler = obs.handler_time
    # The smallest handler time lately: kept for reprobe_after ticks, then re-measured,
    # so a lasting change of the work itself is not read as saturation for ever.
    lowest, min_age = state.min_handler, state.min_age + 1
    if handler is not None and handler > 0 and (
            lowest is None or handler <= lowest or min_age > limits.reprobe_after):
        lowest, min_age = handler, 0
    # A saturation point stays known (and reported) until a probe above it is kept, but
    # after reprobe_after ticks it no longer stops that probe: a downstream may recover.
    ceiling = state.ceiling
    age = state.ceiling_age + 1 if ceiling is not None else 0
    blocking = ceiling if ceiling is not None and age <= limits.reprobe_after else None
    state = replace(state, min_handler=lowest, min_age=min_age, ceiling_age=age)

    rate_cap = _rate_cap(obs, handler if handler is not None else lowest, limits)
    wanted = obs.target if obs.target is not None else desired_workers(Demand(
        ready=obs.ready, in_flight=obs.in_flight, oldest_ready_age=obs.oldest_ready_age,
        arrival_rate=obs.sent / obs.elapsed if obs.elapsed > 0 else None,
        handler_time=handler if handler is not None else lowest, workers=n,
        concurrency=limits.concurrency, slo=obs.slo, max_in_flight=obs.max_in_flight,
        rate=obs.rate))
    cap = min([limits.maximum, *(c for c in (blocking, rate_cap) if c is not None)])
    desired = max(limits.minimum, min(wanted, max(cap, limits.minimum)))

    def out(workers: int, action: Action, reason: str, new: State = state) -> Decision:
        return Decision(workers, action, reason, desired, new)

    if n < limits.minimum:
        return out(limits.minimum, "grow", f"{n} running, below --min {limits.minimum}",
                   _no_probe(state))
    if n > limits.maximum:
        return out(limits.maximum, "shrink", f"{n} running, above --max {limits.maximum}",
                   _no_probe(state))
    if obs.paused:  # nothing is received: nothing to measure, no reason to grow
        return out(n, "hold", "queue paused", _no_probe(replace(state, calm=0)))
    if not obs.settled:
        return out(n, "hold", "waiting for workers to start or stop before measuring")
    tput = obs.throughput or 0.0

    # A probe under way: keep it only if throughput rose beyond noise.
    if state.probe_from is not None and state.baseline is not None \
            and n == state.probe_from + 1:
        base_n, (base_done, base_secs) = state.probe_from, state.baseline
        before = base_done / base_secs
        need = max(limits.gain * before / max(base_n, 1),
                   limits.noise * math.sqrt(base_done / base_secs ** 2
                                            + obs.completed / obs.elapsed ** 2))
        state = _no_probe(state)
        if base_done + obs.completed < FEW:
            kept = (f"kept {n}: too few completions to compare ({base_done} and "
                    f"{obs.completed}; a longer --interval measures more)")
            return _grow_or_hold(out, state, obs, limits, n, wanted, desired, cap, tput, kept)
        if tput - before > need:
            kept = f"probe kept: {before:.3g}/s at {base_n} -> {tput:.3g}/s at {n}"
            if state.ceiling is not None and n > state.ceiling:  # the point has moved up
                state = replace(state, ceiling=None, ceiling_age=0)
            return _grow_or_hold(out, state, obs, limits, n, wanted, desired, cap, tput, kept)
        if _at_rate_limit(obs, tput) and tput > before:
            # Flat because it reached the limit, not because something downstream is full.
            return out(n, "hold", f"probe kept: {before:.3g}/s at {base_n} -> {tput:.3g}/s "
                       f"at {n}, the queue's rate limit of {obs.rate:g}/s", state)
        point = max(base_n, limits.minimum)
        return out(point, "shrink", f"saturated at {base_n}: {tput:.3g}/s at {n} did not "
                   f"rise beyond {before:.3g}/s + {need:.2g}/s; no probe above {base_n} "
                   f"for {limits.reprobe_after} ticks",
                   replace(state, ceiling=point, ceiling_age=0))
    state = _no_probe(state)

    # Handler time well above its minimum: the workers queue for something downstream.
    if handler is not None and lowest is not None and n > max(limits.minimum, 1) \
            and handler > limits.latency_factor * lowest and not _at_rate_limit(obs, tput):
        point = n - 1
        return out(point, "shrink", f"saturated: mean handler time {handler:.3g} s is "
                   f"{handler / lowest:.1f}x its minimum {lowest:.3g} s", replace(
                       state, ceiling=point, ceiling_age=0))

    # Fewer would do: scale in once the backlog has wanted fewer for a while.
    if desired < n:
        calm = state.calm + 1
        if calm >= limits.calm_ticks:
            why = "queue empty" if obs.ready == 0 and obs.in_flight == 0 else \
                f"backlog {obs.ready} with {obs.in_flight} in flight needs {desired}"
            if obs.target is not None and not (obs.ready == 0 and obs.in_flight == 0):
                why = _wants(obs, desired)
            if rate_cap is not None and desired == rate_cap and wanted > rate_cap:
                why = f"the rate limit of {obs.rate:g}/s keeps {rate_cap} busy"
            return out(desired, "shrink", f"{why}: {n} -> {desired}", replace(state, calm=0))
        return out(n, "hold", f"fewer would do ({desired}); waiting "
                   f"{limits.calm_ticks - calm} more tick(s) to be sure",
                   replace(state, calm=calm))
    return _grow_or_hold(out, replace(state, calm=0), obs, limits, n, wanted, desired, cap,
                         tput, "")


def _grow_or_hold(out: Callable[..., Decision], state: State, obs: Observation,
                  limits: Limits, n: int, wanted: int, desired: int, cap: int, tput: float,
                  prefix: str) -> Decision:
    """Probe one step up where the backlog wants more and nothing says it would not help."""
    sep = "; " if prefix else ""
    if obs.ready and _at_rate_limit(obs, tput):
        return out(n, "hold", f"{prefix}{sep}rate-limited: {tput:.3g}/s at the queue's "
                   f"limit of {obs.rate:g}/s; more workers would only wait", state)
    if wanted <= n:
        steady = f"steady: {tput:.3g}/s, backlog {obs.ready}"
        if obs.target is not None:
            steady = f"{steady}; {_wants(obs, wanted)}"
        return out(n, "hold", prefix or steady, state)
    if n >= cap or desired <= n:
        if state.ceiling is not None and n >= state.ceiling \
                and state.ceiling_age <= limits.reprobe_after:
            why = (f"at the saturation point {state.ceiling}; probing above it again in "
                   f"{limits.reprobe_after - state.ceiling_age + 1} tick(s)")
        elif n >= limits.maximum:
            why = f"at --max {limits.maximum}"
        else:
            why = f"the rate limit of {obs.rate:g}/s keeps {cap} busy"
        return out(n, "hold", f"{prefix}{sep}{_wants(obs, wanted)}, {why}", state)
    if n == 0:
        return out(1, "grow", f"{prefix}{sep}backlog {obs.ready}: starting one", state)
    return out(n + 1, "grow", f"{prefix}{sep}probing {n + 1}: {_wants(obs, wanted)}, "
               f"{tput:.3g}/s at {n}",
               replace(state, probe_from=n, baseline=(obs.completed, obs.elapsed)))


def _wants(obs: Observation, wanted: int) -> str:
    """What the queue asks for, in words: the backlog's figure, or in deadline order the
    pool that meets every target (or the largest useful one, and why none can)."""
    if obs.target is None:
        return f"backlog {obs.ready} wants {wanted}"
    if obs.target_reason is None:
        return f"{wanted} meet every deadline target (backlog {obs.ready})"
    return (f"no pool meets every deadline target ({obs.target_reason}); the largest "
            f"useful is {wanted} (backlog {obs.ready})")


def _no_probe(state: State) -> State:
    return replace(state, probe_from=None, baseline=None)


def _at_rate_limit(obs: Observation, tput: float) -> bool:
    """Throughput at (within 10 % of) the queue's rate limit: more workers would wait."""
    return obs.rate is not None and tput >= 0.9 * obs.rate


def _rate_cap(obs: Observation, handler: float | None, limits: Limits) -> int | None:
    """Processes a rate limit keeps busy: rate x handler time / concurrency (at least 1)."""
    if obs.rate is None or handler is None:
        return None
    return max(math.ceil(obs.rate * handler / limits.concurrency - 1e-9), 1)
