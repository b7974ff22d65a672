"""The values a number may take, and how to say them: one notion for command-line options
(arguments.number) and stage parameters (stages.base.Param). No heavy imports: the CLI builds its
parser with it before any model is loaded."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """above/below: exclusive bounds, low/high: inclusive; None: no bound."""

    above: float | None = None
    below: float | None = None
    low: float | None = None
    high: float | None = None

    def span(self) -> str:
        """The allowed values in words, e.g. 'between 0 and 1' ('' when any value goes)."""
        if self.low is not None and self.high is not None:
            return f"between {self.low:g} and {self.high:g}"
        lo = f"above {self.above:g}" if self.above is not None else f"at least {self.low:g}" if self.low is not None else ""
        hi = f"below {self.below:g}" if self.below is not None else f"at most {self.high:g}" if self.high is not None else ""
        return " and ".join(t for t in (lo, hi) if t)

    def allows(self, value: float) -> bool:
        """A finite number within every bound."""
        if not math.isfinite(value):
            return False
        return not ((self.above is not None and value <= self.above) or (self.below is not None and value >= self.below)
                    or (self.low is not None and value < self.low) or (self.high is not None and value > self.high))
