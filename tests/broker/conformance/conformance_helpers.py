"""Shared by the conformance tests: skipping what a broker does not offer."""

from __future__ import annotations

import pytest

from asyncq._broker import Broker, Capability


def requires(broker: Broker, capability: Capability) -> None:
    """Skip the test on a broker without ``capability``, saying which (never by layout)."""
    if capability not in broker.capabilities:
        pytest.skip(f"this broker does not offer {capability.value}")


def lacks(broker: Broker, capability: Capability) -> None:
    """Skip the test on a broker that offers ``capability`` (the test checks the refusal)."""
    if capability in broker.capabilities:
        pytest.skip(f"this broker offers {capability.value}")
