"""Calibration of the estimate against what the provider reports (C2).

Our count is exact only for OpenAI encodings; Claude, Qwen, GLM… tokenise differently, and every
provider adds its own hidden framing. After each call we know both our estimate of the prompt and
the ``prompt_tokens`` the provider reported, so the ratio between them corrects later estimates for
that session and model.

Cache reads are part of the prompt the model saw: ``Usage.prompt_tokens`` counts them once, and the
adapters fold Anthropic's separately reported cache tokens into it, so caching neither inflates nor
hides the prompt size.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Calibration"]


@dataclass(frozen=True, slots=True)
class Calibration:
    """An exponential moving average of ``reported / estimated``, clamped to a sane range.

    Values, not mutation: ``observe`` returns a new Calibration, so the engine can store it per
    session and model and the pure core can take it as an argument.
    """

    ratio: float = 1.0
    samples: int = 0
    alpha: float = 0.3
    low: float = 0.5
    high: float = 2.0

    def observe(self, estimated: int, reported: int) -> Calibration:
        if estimated <= 0 or reported <= 0:
            return self
        seen = min(self.high, max(self.low, reported / estimated))
        ratio = seen if self.samples == 0 else (1 - self.alpha) * self.ratio + self.alpha * seen
        return Calibration(ratio, self.samples + 1, self.alpha, self.low, self.high)

    def at_least(self, floor: float) -> Calibration:
        """This calibration, never below ``floor`` from now on: the ratio is raised to it, and later
        observations are clamped to it (:meth:`observe` clamps to ``low``). For a floor an overflow proved:
        a provider that reports fewer prompt tokens than it counts against its window (some servers leave
        out their template, others report only a part) would otherwise pull the ratio back down, call after
        call, until the next overflow."""
        low = min(self.high, max(self.low, floor))
        return Calibration(max(self.ratio, low), self.samples, self.alpha, low, self.high)

    def apply(self, estimate: int) -> int:
        """The corrected estimate; never below the raw one by more than the clamp allows."""
        return estimate if self.samples == 0 else int(estimate * self.ratio + 0.999)
