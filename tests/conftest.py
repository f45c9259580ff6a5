import os

from hypothesis import HealthCheck, settings

# CI runs every property test on 1,000 examples and the history invariants (tests/test_budget.py)
# on >= 10,000 generated histories; a local run stays quick.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
HISTORY_EXAMPLES = 10_000 if PROFILE == "ci" else 300

settings.register_profile(
    "ci", max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(PROFILE)
