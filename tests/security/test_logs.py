"""Log records are one line each: an argument (a session id, a path, a provider's text) cannot forge a
log line or drive a terminal, and its secrets are redacted (src/contextmem/logs.py)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given

from contextmem.logs import RedactingFilter, get_logger
from tests.security.doors import LINE_BREAKS, hostile_text, terminal_unsafe

LOGGER = get_logger("contextmem.test_logs")


@pytest.mark.parametrize("separator", LINE_BREAKS)
def test_a_session_id_with_a_line_break_forges_no_log_line(
    separator: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="contextmem")
    LOGGER.info("compacted session %s of %r", f"chat{separator}2026-11-29 ERROR forged", "default")
    [record] = caplog.records
    assert len(record.getMessage().splitlines()) == 1, record.getMessage()
    assert "ERROR forged" in record.getMessage()


@given(hostile_text())
def test_any_argument_leaves_the_message_one_printable_line(text: str) -> None:
    record = logging.LogRecord("contextmem.x", logging.INFO, __file__, 1, "id %s done", (text,), None)
    RedactingFilter().filter(record)
    message = record.getMessage()
    assert len(message.splitlines()) == 1 and not terminal_unsafe(message), repr(message)
