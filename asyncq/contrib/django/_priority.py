"""Django task priorities as asyncq queues: a few bands per queue, like Celery's priority steps.

The framework's priority is an int in [-100, 100] (default 0), higher first. asyncq runs each
queue in order, so priority is coarse: the backend's ``PRIORITIES`` name bands by threshold
(default ``{"high": 1, "low": -1}``), a call goes to ``<queue>:<band>`` of the most extreme
band its priority reaches (a positive threshold is reached from above: priority >= t; a
negative one from below: priority <= t), and priority 0 always stays on ``<queue>`` itself. The
worker serves a queue's bands highest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from asyncq._validate import validate_queue_name

from ._compat import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY

DEFAULT_PRIORITIES: Mapping[str, int] = {"high": 1, "low": -1}
"""What ``PRIORITIES`` is when the OPTIONS do not say: above 0 runs before the default
priority, below 0 after it."""

BAND_SEPARATOR = ":"
"""Between a queue's name and its band's: ``emails:high``."""

WEIGHT_STEP = 3
"""``asyncq_worker --priority-order weighted``: each band is tried first this many times as
often as the band below it (low 1, default 3, high 9 with the default bands)."""


@dataclass(frozen=True)
class Bands:
    """The priority bands of a backend: (threshold, name) from the highest band to the lowest,
    the queue itself being the band (0, "")."""

    steps: tuple[tuple[int, str], ...] = ((0, ""),)

    @property
    def enabled(self) -> bool:
        """Whether priority changes anything (the backend's ``supports_priority``)."""
        return len(self.steps) > 1

    def band_of(self, priority: int) -> str:
        """The band name a priority falls in ("" for the queue itself)."""
        if priority > 0:
            return next((name for t, name in self.steps if 0 < t <= priority), "")
        if priority < 0:
            return next((name for t, name in reversed(self.steps) if priority <= t < 0), "")
        return ""

    def queue_for(self, queue: str, priority: int) -> str:
        """The asyncq queue a call with this priority to the Django queue ``queue`` goes to."""
        return band_queue(queue, self.band_of(priority))

    def queues_of(self, queue: str) -> list[str]:
        """The asyncq queues behind the Django queue ``queue``, highest band first."""
        return [band_queue(queue, name) for _, name in self.steps]

    def served(self, queues: Mapping[str, int], *, strict: bool) -> dict[str, int]:
        """What a worker serving the Django ``queues`` (name -> weight) serves in asyncq.

        Strict: weights that put every higher band before every lower one, the Django
        queues' weights ordering them within a band. Weighted: each queue's weight times
        ``WEIGHT_STEP`` per band above its lowest."""
        top = max(queues.values(), default=1)
        served: dict[str, int] = {}
        for rank, (_, name) in enumerate(reversed(self.steps)):  # (lowest band first)
            for queue, weight in queues.items():
                served[band_queue(queue, name)] = (
                    rank * top + weight if strict else weight * WEIGHT_STEP ** rank)
        return dict(sorted(served.items(), key=lambda item: -item[1]))


def band_queue(queue: str, band: str) -> str:
    """``queue`` for the band ``band`` ("": the queue itself)."""
    return f"{queue}{BAND_SEPARATOR}{band}" if band else queue


def parse_priorities(value: object, queues: set[str]) -> Bands:
    """``PRIORITIES`` (band name -> threshold) checked: ValueError says what is wrong."""
    if not isinstance(value, Mapping):
        raise ValueError(f"PRIORITIES must map band names to priority thresholds, e.g. "
                         f"{dict(DEFAULT_PRIORITIES)}, got {value!r}")
    steps = [(0, "")]
    for name, threshold in value.items():
        if not isinstance(name, str) or not name or BAND_SEPARATOR in name:
            raise ValueError(f"PRIORITIES: band name {name!r} must be a non-empty string "
                             f"without {BAND_SEPARATOR!r}")
        validate_queue_name(name)
        if (isinstance(threshold, bool) or not isinstance(threshold, int) or threshold == 0
                or not TASK_MIN_PRIORITY <= threshold <= TASK_MAX_PRIORITY):
            raise ValueError(f"PRIORITIES[{name!r}] must be a whole number between "
                             f"{TASK_MIN_PRIORITY} and {TASK_MAX_PRIORITY} other than 0 (0 "
                             f"is the queue itself), got {threshold!r}")
        if any(t == threshold for t, _ in steps):
            raise ValueError(f"PRIORITIES: two bands start at {threshold}")
        steps.append((threshold, name))
    bands = Bands(tuple(sorted(steps, reverse=True)))
    for queue in queues:
        for name in bands.queues_of(queue):
            validate_queue_name(name)
            if name != queue and name in queues:
                raise ValueError(f"PRIORITIES: queue {queue!r} has a band {name!r}, which is "
                                 f"also one of the QUEUES; rename one of them")
    return bands
