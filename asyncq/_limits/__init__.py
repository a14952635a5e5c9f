"""Rate and concurrency limits that hold across every worker (state in Redis, per queue).

``_spec`` (what a limit is) <- ``_registry`` (limits of a mux's handlers) <- ``_gate`` (the
worker claims them between lease and start), ``_manual`` (``Limiter``, taken by hand) and
``_runtime`` (a queue's cap and values replacing declared limits, set at run time).
"""

from .._broker import LimitUse
from .._errors import LimitKeyError
from ._gate import LimitGate, gate_for
from ._manual import Limiter, limit_ops_of
from ._registry import HandlerLimits
from ._runtime import clear_limit_value, queue_cap, set_limit_value, set_queue_cap
from ._spec import ConcurrencyLimit, Limit, RateLimit, check_limits, parse_rate

__all__ = ["ConcurrencyLimit", "HandlerLimits", "Limit", "LimitGate", "LimitKeyError",
           "LimitUse", "Limiter", "RateLimit", "check_limits", "clear_limit_value", "gate_for",
           "limit_ops_of", "parse_rate", "queue_cap", "set_limit_value", "set_queue_cap"]
