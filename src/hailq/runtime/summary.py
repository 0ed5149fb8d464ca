"""What a worker did, for its last log line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Tally:
    """What a worker did, for its last log line. Counted by outcome as recorded."""

    done: int = 0  # handler returned: acked (or settled by the handler itself)
    failed: int = 0  # nacked after a failure, with attempts left
    retried: int = 0  # the handler raised Retry, with attempts left
    dead: int = 0  # dead-lettered: DeadLetter, or a failure on the last attempt
    given_back: int = 0  # returned untried at shutdown
    time_limited: int = 0  # of the failed and dead: past the time limit
    cancelled: int = 0  # stopped because an operator cancelled their message (rule 40)

    def summary(self) -> str:
        text = (f"{self.done} done, {self.failed} failed, {self.retried} retried, "
                f"{self.dead} dead-lettered, {self.given_back} given back")
        if self.time_limited:
            text += f" ({self.time_limited} past the time limit)"
        if self.cancelled:
            text += f"; {self.cancelled} cancelled by an operator"
        return text


def duration(seconds: float) -> str:
    """``12.3 s``, ``4 min 5 s`` or ``1 h 2 min 3 s``."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min {rest} s" if hours else f"{minutes} min {rest} s"

