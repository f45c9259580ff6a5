import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from contextmem.tokens.count_worker import use_count_worker
from tests.local_model import THREADS
from tests.pg import private_pg  # noqa: F401  (a fixture: a PostgreSQL of the test's own, to restart or cut)

pytest_plugins = ["tests.skip_gate"]  # in CI, a skip not on tests/skips_allowed.txt fails the run

os.environ.setdefault("CONTEXTMEM_LOCAL_THREADS", str(THREADS))  # the CLI processes the tests start

# Hypothesis profiles: "dev" (the default, `make test`) runs a property test on 100 examples, "ci"
# (HYPOTHESIS_PROFILE=ci, as .ci/run sets) on 1,000; the history invariants (tests/test_budget.py) run on
# 300 and 10,000 generated histories. A test that pins its own count with a number runs that count in
# every profile: those are the tests whose examples are slow, and each says so in a comment just above
# its @settings (tests/test_property_settings.py checks).
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
HISTORY_EXAMPLES = 10_000 if PROFILE == "ci" else 300

settings.register_profile(
    "ci", max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(PROFILE)

# A provider's environment (keys, gateways, organisations): cleared by `no_provider_env` so a developer's
# own variables never reach a test's servers, and a test sets exactly what it means.
PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "DEEPSEEK_API_KEY",
    "DASHSCOPE_API_KEY",
)


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in PROVIDER_ENV:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _count_worker_switched_off_after() -> Iterator[None]:
    """An HTTP MCP server started in this process switches the token-count worker on for the process
    (``contextmem.tokens.count_worker``); it is switched off after each test, so the next counts here."""
    yield
    use_count_worker(False)
