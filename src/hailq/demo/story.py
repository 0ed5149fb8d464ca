"""The hailstorm in numbers: the claims, who sends them, and the scaled clock. Pure, no I/O.

Story time is the seed's: a check takes 3 s, the lease is 5 minutes. ``scale``
divides every duration (100: a check takes 30 ms, the lease 3 s), so the
20,000 claims take about 12 s on 50 checkers instead of 20 minutes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

TOPIC = "hailstorm"  # the portal publishes every claim here
CHECKS = "image-checks"  # the checkers' subscription
STATISTICS = "statistics"  # the statistics program's subscription
BATCH = 500  # claims per send transaction

CHECK_SECONDS = 3.0  # one image check, story time
LEASE_SECONDS = 300.0  # the broker waits 5 minutes for an ack, story time
RETRY_SECONDS = 10.0  # first retry of a failed check, story time (then doubling)
MAX_ATTEMPTS = 5
VIP_PRIORITY = 9
MANY_PHOTOS_SHARE = 0.005  # claims with many large photos
MANY_PHOTOS_FACTOR = (4.0, 10.0)  # ...take this many times longer
SPREAD = 0.33  # the others vary by up to a third either way
ODD_CHECKERS = 2  # of the checkers, one crashes mid-claim and one is slower than its lease


@dataclass(frozen=True)
class Plan:
    """What to run: how many claims and checkers, and how fast the clock goes."""

    claims: int = 20_000
    checkers: int = 50
    scale: float = 100.0
    seed: int = 8311

    def __post_init__(self) -> None:
        if self.checkers <= ODD_CHECKERS:
            raise ValueError(f"the demo needs at least {ODD_CHECKERS + 1} checkers "
                             f"(one crashes, one is slow), got {self.checkers}")

    @property
    def worker_slots(self) -> int:
        """Checkers that are slots of the worker: all but the crashing and the slow one."""
        return self.checkers - ODD_CHECKERS

    @property
    def check_seconds(self) -> float:
        """The mean duration of one check, scaled."""
        return CHECK_SECONDS / self.scale

    @property
    def lease(self) -> float:
        return LEASE_SECONDS / self.scale

    @property
    def retry_base(self) -> float:
        return RETRY_SECONDS / self.scale

    @property
    def vip_claims(self) -> int:
        """500 of 20,000 claims (2.5%) come from VIP customers."""
        return max(self.claims // 40, 1)

    @property
    def contracts(self) -> int:
        """Contracts with several claims that must be checked in order (3 claims each)."""
        return max(self.claims // 1000, 2)

    def to_args(self) -> list[str]:
        """The plan as command-line arguments for the helper processes (see ``from_args``)."""
        return [str(self.claims), str(self.checkers), repr(self.scale), str(self.seed)]

    @classmethod
    def from_args(cls, args: list[str]) -> Plan:
        return cls(int(args[0]), int(args[1]), float(args[2]), int(args[3]))


@dataclass(frozen=True)
class Claim:
    """One damage claim as the portal sends it."""

    number: int
    vip: bool
    contract: str | None
    photos: int
    check_seconds: float
    corrupt: bool = False

    @property
    def priority(self) -> int:
        return VIP_PRIORITY if self.vip else 0

    def body(self) -> dict[str, Any]:
        """The message body. ``check_ms`` stands in for the work the photos cause."""
        return {"claim": self.number, "vip": self.vip, "contract": self.contract,
                "photos": self.photos, "check_ms": round(self.check_seconds * 1000, 3),
                "corrupt": self.corrupt}


def make_claims(plan: Plan) -> list[Claim]:
    """The burst, in send order; the same plan always gives the same claims.

    The check times average exactly ``plan.check_seconds``, so the ideal
    makespan is ``claims * check_seconds / checkers``. One claim (early in the
    burst) has a corrupt photo; ``contracts`` contracts have three claims each.
    """
    rng = random.Random(plan.seed)
    n = plan.claims
    numbers = list(range(100_001, 100_001 + n))
    vip = set(rng.sample(range(n), plan.vip_claims))
    keyed = rng.sample(range(n), min(plan.contracts * 3, n))
    # Which claims share a contract is random too; three claims per contract.
    contract_of = {index: f"contract-{i // 3 + 1:05d}" for i, index in enumerate(keyed)}
    corrupt = n // 20  # early in the burst, so it dies while the others flow
    factors: list[float] = []
    photos: list[int] = []
    for _ in range(n):
        if rng.random() < MANY_PHOTOS_SHARE:
            factors.append(rng.uniform(*MANY_PHOTOS_FACTOR))
            photos.append(rng.randint(40, 120))
        else:
            factors.append(rng.uniform(1 - SPREAD, 1 + SPREAD))
            photos.append(rng.randint(2, 12))
    mean = sum(factors) / n
    return [Claim(number=numbers[i], vip=i in vip, contract=contract_of.get(i),
                  photos=photos[i], check_seconds=plan.check_seconds * factors[i] / mean,
                  corrupt=i == corrupt)
            for i in range(n)]


def ideal_makespan(total_work: float, checkers: int) -> float:
    """The shortest possible run: all check time spread evenly over the checkers."""
    if checkers < 1:
        raise ValueError("checkers must be at least 1")
    return total_work / checkers
