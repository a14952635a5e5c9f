"""wire=asynq: the Broker over Go asynq's own Redis layout (issue 29).

Modules: ``_keys`` (every key, field and channel name of asynq's layout), ``_schema`` (the
protobuf messages, built at runtime; ``asynq.proto`` is the same schema for protoc),
``_codec`` (TaskMessage <-> asyncq's message), ``_scripts`` (loads ``lua/asynq_*.lua``),
``_broker`` (AsynqBroker: the transitions), ``_layout`` (the mismatch check both layouts run)
and ``_guarded`` (asyncq's own broker with that check), ``_unavailable`` (what is not offered
yet). Importing this package needs no protobuf; ``asynq_broker_class`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._broker import AsynqBroker

EXTRA = "asyncq[asynq]"


def asynq_broker_class() -> type[AsynqBroker]:
    """AsynqBroker; ImportError naming the extra when protobuf is not installed."""
    try:
        from ._broker import AsynqBroker
    except ImportError as exc:
        if exc.name is not None and exc.name.startswith("google"):
            raise ImportError(f"wire=asynq needs the protobuf package: pip install "
                              f"'{EXTRA}'") from exc
        raise
    return AsynqBroker
