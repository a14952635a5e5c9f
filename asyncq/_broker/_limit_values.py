"""The values of rate and concurrency limits exchanged with a Broker (``LimitOps``): what a
limit is as the broker sees it, a claim, a hold and a usage report."""

from __future__ import annotations

# (defined in ``_values``, the seam's one value module)
from ._values import QUEUE_CAP as QUEUE_CAP
from ._values import LimitClaim as LimitClaim
from ._values import LimitHold as LimitHold
from ._values import LimitSpec as LimitSpec
from ._values import LimitUse as LimitUse
