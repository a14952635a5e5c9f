"""Helpers of the metrics and tracing tests: Prometheus expositions as dicts, and a mux whose
task types end each in a known way."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

import asyncq

Key = tuple[str, tuple[tuple[str, str], ...]]


def samples(text: str) -> dict[Key, float]:
    """Every sample of an exposition: {(name, sorted labels): value}."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def key(name: str, **labels: str) -> Key:
    return name, tuple(sorted(labels.items()))


def outcome_mux(gate: asyncio.Event | None = None,
                started: asyncio.Event | None = None) -> asyncq.ServeMux:
    """"ok" succeeds, "bad" raises, "gone" revokes itself, "hold" sets ``started`` and waits
    for ``gate``."""
    mux = asyncq.ServeMux()

    @mux.handler("ok")
    async def ok(task: asyncq.Task) -> None:
        pass

    @mux.handler("bad")
    async def bad(task: asyncq.Task) -> None:
        raise ValueError("no")

    @mux.handler("gone")
    async def gone(task: asyncq.Task) -> None:
        raise asyncq.RevokeTask()

    @mux.handler("hold")
    async def hold(task: asyncq.Task) -> None:
        if started is not None:
            started.set()
        if gate is not None:
            await gate.wait()

    return mux
