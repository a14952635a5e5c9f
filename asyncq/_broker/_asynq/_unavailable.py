"""The refusal of what wire=asynq does not offer: a BrokerError (refused) naming the operation,
so a caller sees at once why (the broker's ``capabilities`` say so beforehand)."""

from __future__ import annotations

from ..._errors import BrokerError


def unavailable(what: str) -> BrokerError:
    return BrokerError(f"{what} is not yet available with wire=asynq (Go asynq's layout)",
                       refused=True)
