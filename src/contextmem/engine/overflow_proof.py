"""What a provider's overflow proves, pure: a calibration floor, and the window it states (C2, C11).

The engine applies these in :meth:`~.core.ContextEngine.handle_overflow`; nothing here changes a session.
"""

from __future__ import annotations

from ..budget import Window
from ..tokens import Calibration
from ..tokens.counter import REPLY_PRIMING

__all__ = ["OVERFLOW_MARGIN", "raised_calibration", "stated_window"]

OVERFLOW_MARGIN = 1.125
"""An overflow holds the calibration this far above the ratio it proved: one overflow's cost against 1/8 of
the history. The first overflow comes with the turn that crossed the window, so the proven ratio is within a
turn of the true one, and the margin covers that turn and the regions the ratio does not scale."""


def raised_calibration(calibration: Calibration, window: Window, counted: int) -> Calibration | None:
    """The calibration after an overflow of a request we counted ``counted`` tokens (the live history as
    sent: ``build`` sends all of it), or ``None`` when it is already high enough.

    The provider counted more than ``window.context_window - window.max_tokens`` for it, so the ratio is at
    least that over ``counted``; the calibration is held at :data:`OVERFLOW_MARGIN` times that from now on
    (:meth:`Calibration.at_least`), and a provider under-reporting ``prompt_tokens`` cannot pull it back to
    the floor where the same overflow returns a few turns later."""
    if counted <= 0:
        return None
    proven = (window.context_window - window.max_tokens) / (counted + REPLY_PRIMING)
    if proven * OVERFLOW_MARGIN <= calibration.low:
        return None
    return calibration.at_least(proven * OVERFLOW_MARGIN)


def stated_window(error: BaseException, window: Window) -> int | None:
    """The window an overflow states (llama.cpp's ``n_ctx``, Anthropic's maximum: the error's ``limit``)
    when it is smaller than ``window``'s, else ``None`` (a limit not smaller says nothing new)."""
    limit = getattr(error, "limit", None)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit < window.context_window:
        return None
    return limit
