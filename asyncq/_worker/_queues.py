"""The queues a worker serves: the names it was configured with and, for each pattern among
them (``tenant:*``), the registered queues it matches, found so far.

Without a pattern the set is fixed: the configured names. With one, ``_discovery`` adds the
queues it finds (the registry read every ``queue_scan_interval``, and each queue announced as
new when created) and removes those dropped from the registry. ``names`` is one list
object, changed in place, that the worker's components (forwarder, janitor, recoverer...)
hold, so they follow without being told; the subscriber and the fetch order are told.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable, Mapping

from .._validate import is_queue_pattern, match_queue_patterns, served_queue_name


class ServedQueues:
    """The configured names (``exact``), the patterns, and the queues each pattern serves;
    ``accept``: whether the broker's layout takes a name a pattern matched (a registry edited
    by hand may hold names it refuses: served by no pattern)."""

    def __init__(self, configured: Mapping[str, int],
                 accept: Callable[[str], bool] | None = None) -> None:
        self._configured = list(configured)
        self._accept = accept
        self.exact: list[str] = [served_queue_name(q) for q in configured
                                 if not is_queue_pattern(q)]
        """The queue names configured as such (always served, registered by the worker)."""
        self.patterns: list[str] = [q for q in configured if is_queue_pattern(q)]
        self.matched: dict[str, list[str]] = {p: [] for p in self.patterns}
        """For each pattern, the queues it serves, sorted (lists changed in place)."""
        self.names: list[str] = list(self.exact)
        """Every queue served now: the configured names, then the matched ones (one list,
        changed in place)."""
        self.wanted: set[str] = set(self.names)
        """``names`` as a set (changed in place): what the subscriber's wake-ups are for."""
        self._unmatched: set[str] = set()
        """Names seen that no pattern serves (the patterns never change): not tried again."""

    @property
    def dynamic(self) -> bool:
        """True when some pattern makes the set change (False: fixed, nothing to discover)."""
        return bool(self.patterns)

    def add(self, queues: Iterable[str]) -> list[str]:
        """Serve those of ``queues`` a pattern matches and not served yet; returns them."""
        added: list[str] = []
        fresh = {q for q in queues if q not in self.wanted and q not in self._unmatched
                 and (self._accept is None or self._accept(q))}
        for pattern, found in match_queue_patterns(self._configured, fresh).items():
            for queue in found:
                insort(self.matched[pattern], queue)
                added.append(queue)
        self._unmatched |= fresh.difference(added, self.exact)
        if added:
            self._sync()
        return added

    def remove(self, queues: Iterable[str]) -> list[str]:
        """Stop serving those of ``queues`` a pattern matched (a configured name stays);
        returns them."""
        gone = set(queues)
        removed: list[str] = []
        for found in self.matched.values():
            drop = [q for q in found if q in gone]
            for queue in drop:
                found.remove(queue)
            removed += drop
        if removed:
            self._sync()
        return removed

    def matched_names(self) -> set[str]:
        """Every queue served through a pattern."""
        return {q for found in self.matched.values() for q in found}

    def _sync(self) -> None:
        matched = sorted(self.matched_names())
        self.names[:] = self.exact + matched
        self.wanted.clear()
        self.wanted.update(self.names)
