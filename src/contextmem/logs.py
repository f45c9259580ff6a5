"""The package's loggers, each with secrets redacted from what it records (the one place they are made).

A log line can carry a secret that no other sink would keep: an exception whose message repeats the
request that failed (``connect failed: postgres://app:S3cret@db``), a provider error that echoes a
header, a path argument. Every ``contextmem`` logger comes from :func:`get_logger`, which installs
:class:`RedactingFilter`; a filter on a logger runs only for the records made on that logger (not for
those propagated from its children), hence one filter per logger rather than one on ``contextmem``.

What the filter rewrites, before any handler sees the record: the message with its arguments
(``record.msg`` becomes the redacted, formatted message, on one line: a line break, control, bidi mark
or lone surrogate an argument carries, such as a session id, is written escaped, so no argument forges a
log line or drives a terminal; ``record.args`` is emptied), the traceback
text (``record.exc_text``, which :class:`logging.Formatter` prints instead of formatting ``exc_info``
again) and ``record.stack_info``. ``exc_info`` itself is kept, for handlers that read the exception's
type; a handler that formats ``exc_info`` on its own, ignoring ``exc_text``, is outside this guarantee.
"""

from __future__ import annotations

import logging
import re

from .redaction import redact_secrets

__all__ = ["RedactingFilter", "get_logger", "one_log_line"]

_FORMATTER = logging.Formatter()
# What may not stand in a log line: every line end str.splitlines knows, other controls (tab aside), bidi
# embeddings and isolates, lone surrogates.
_NOT_IN_A_LINE = re.compile(
    r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def one_log_line(text: str) -> str:
    """``text`` with each character :data:`_NOT_IN_A_LINE` written as its escape (``\\n``, ``\\x1b``)."""
    return _NOT_IN_A_LINE.sub(lambda found: ascii(found.group())[1:-1], text)


class RedactingFilter(logging.Filter):
    """Redacts a record's message, arguments, traceback text and stack text; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # bad arguments for the format: logging reports that itself; keep its text
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = one_log_line(redact_secrets(message)), None
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True


_FILTER = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with :class:`RedactingFilter` installed (once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(_FILTER)
    return logger
