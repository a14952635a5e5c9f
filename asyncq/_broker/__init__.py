"""The broker: every Redis interaction of asyncq, one Lua script per task state change."""

from ._protocol import Broker, EnqueueCode, NewTask, Outcome, RawTask, is_broker
from ._redis import RedisBroker

__all__ = ["Broker", "EnqueueCode", "NewTask", "Outcome", "RawTask", "RedisBroker", "is_broker"]
