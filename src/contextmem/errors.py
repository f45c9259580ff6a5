"""The one exception tree of contextmem.

Every error contextmem raises derives from :class:`ContextmemError`, and every message says what
was wrong (with the offending value, ``{value!r}``) and how to fix it::

    ContextmemError
    ├── ConfigError                 a setting is unknown, mistyped or out of range
    │   └── ToolArgumentError       a tool call's arguments break its schema (names them, with the Fix)
    ├── MessageFormatError          a message (OpenAI dict, Anthropic block, ...) is malformed
    │   ├── JsonlLineError          a line of a JSON Lines file is unreadable; names file:line[:column]
    │   └── MessageTooLargeError    a message is over max_message_bytes: refused at the door
    ├── HistoryError                a history breaks an invariant (orphan tool call/result, ...)
    │   └── ToolCallExpiredError    results for calls already closed because their lease ran out
    ├── UsageError                  called against its contract: mismatched arguments, a sync call in a loop
    ├── InternalError               an invariant of contextmem itself broke: a bug to report, not an input
    ├── BudgetExceededError         what must be kept cannot fit the budget, even after every cut
    ├── MissingExtraError           an optional part is used without its extra installed (ImportError)
    │   └── MissingPackageError     ... or without a package no extra of contextmem installs
    ├── TokenizerError              a tokenizer's data is missing or corrupt
    ├── StoreError                  a session store could not do what was asked
    │   ├── StoreLockedError        the database stayed busy past the store's patience
    │   ├── StoreUnavailableError   the database could not be reached, or went away, past the retries
    │   ├── StoreSchemaError        the schema is newer than this contextmem, or damaged
    │   ├── StoreURLError           open_store got a URL it cannot open (also ValueError)
    │   ├── SessionConflictError    another writer moved the session first; reload it and retry
    │   ├── SessionBusyError        another writer's tool calls stayed open too long to append after them
    │   ├── MemoryConflictError     a memory document changed elsewhere since the edit's base version
    │   └── MessageStateError       a seq is unknown, or archived where a live one is needed
    ├── PathEscapeError             a path leaves the workspace (.., absolute, symlink): refused
    ├── NotFoundError               a file the caller named does not exist (also FileNotFoundError)
    ├── ArchiveError                the archive could not be written durably (nothing was removed)
    ├── CompactionError             a compaction could not shrink the request: no loop, a clear stop
    └── LLMError                    a model call failed; translated at the provider edge
        ├── ContextOverflowError    the provider says the request is over the context window
        ├── RateLimitError          429 / quota: transient, retried with backoff
        ├── TransientLLMError       5xx, timeouts, connection resets: retried with backoff
        ├── AuthenticationError     bad or missing key: never retried
        ├── LLMTimeoutError         a call ran or queued past its deadline (also TimeoutError)
        ├── IncompleteReplyError    an empty reply, or a stream that ended unfinished: never stored
        └── BadRequestError         any other 4xx the caller must fix: never retried

Provider SDK exceptions are translated into this tree in exactly one place per provider. A message
never echoes a whole input: values are shown by :func:`brief` (about 80 characters), and a
:class:`MessageFormatError`'s problem is cut at :data:`MAX_PROBLEM_CHARS`.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Sequence

__all__ = [
    "BRIEF_CHARS",
    "MAX_PROBLEM_CHARS",
    "ArchiveError",
    "AuthenticationError",
    "BadRequestError",
    "BrokenExtraError",
    "BudgetExceededError",
    "CompactionError",
    "ConfigError",
    "ContextOverflowError",
    "ContextmemError",
    "HistoryError",
    "IncompleteReplyError",
    "InternalError",
    "JsonlLineError",
    "LLMError",
    "LLMTimeoutError",
    "MemoryConflictError",
    "MessageFormatError",
    "MessageStateError",
    "MessageTooLargeError",
    "MissingExtraError",
    "NotFoundError",
    "PathEscapeError",
    "RateLimitError",
    "SessionBusyError",
    "SessionConflictError",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    "StoreURLError",
    "StoreUnavailableError",
    "TokenizerError",
    "ToolArgumentError",
    "ToolCallExpiredError",
    "TransientLLMError",
    "UsageError",
    "brief",
    "one_line",
]

BRIEF_CHARS = 80
MAX_PROBLEM_CHARS = 600


class _Brief(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 1024:  # repr() of an int of more than 4,300 digits raises ValueError
            return f"<an int of {x.bit_length():,} bits>"
        return super().repr_int(x, level)


_brief = _Brief()
_brief.maxstring = _brief.maxother = _brief.maxlong = BRIEF_CHARS
_brief.maxlevel, _brief.maxdict, _brief.maxlist, _brief.maxtuple = 2, 4, 4, 4


def brief(value: object, limit: int = BRIEF_CHARS) -> str:
    """``repr(value)`` in about ``limit`` characters, for error messages: a huge string or container is cut
    without building its whole repr first (a 50 MB message is named in a line, and at once)."""
    text = _brief.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def one_line(text: str, limit: int = 300) -> str:
    """Text someone else wrote (a provider's error message) as one printable line of about ``limit``
    characters, to put in an error message: each run of whitespace (line breaks of every kind included)
    becomes one space, and control, bidi and lone surrogate characters, which a terminal would act on or
    could not print, are shown escaped (``\\x1b``)."""
    flat = " ".join(text[: limit * 4].split())
    flat = _UNPRINTABLE.sub(lambda found: ascii(found.group())[1:-1], flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class ContextmemError(Exception):
    """Base class of every error raised by contextmem."""


class ConfigError(ContextmemError, ValueError):
    """A setting is unknown, has the wrong type, or is out of range."""


class ToolArgumentError(ConfigError):
    """A tool was called with arguments its schema does not allow (the message names them and the Fix)."""


class MessageFormatError(ContextmemError, ValueError):
    """A message could not be read: ``field`` names the offending field path, ``fix`` the remedy."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        if len(problem) > MAX_PROBLEM_CHARS:  # a raiser that echoed an input whole: keep the line short
            problem = problem[: MAX_PROBLEM_CHARS - 1] + "…"
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}: {problem}. Fix: {fix}")


class MessageTooLargeError(MessageFormatError):
    """A message is larger than ``max_message_bytes`` (``size`` and ``limit``, in UTF-8 bytes): refused
    before anything is stored, so no pass over its text runs."""

    def __init__(self, field: str, size: int, limit: int, fix: str) -> None:
        self.size = size
        self.limit = limit
        super().__init__(field, f"is {size:,} bytes or more, over the limit of {limit:,}", fix)


class JsonlLineError(MessageFormatError):
    """A line of a JSON Lines file could not be read: not UTF-8, not JSON, too deep, not an object, or not a
    valid message. ``source`` and ``line`` (1-based) say where, ``column`` (1-based) too when known, else 0;
    ``field`` reads ``source:line[:column]``, followed by ``: path`` when a field inside the line is at fault.
    """

    def __init__(
        self, source: str, line: int, problem: str, fix: str, *, column: int = 0, path: str = ""
    ) -> None:
        self.source = source
        self.line = line
        self.column = column
        at = f"{source}:{line}:{column}" if column else f"{source}:{line}"
        super().__init__(f"{at}: {path}" if path else at, problem, fix)


class HistoryError(ContextmemError, ValueError):
    """A message history breaks an invariant (e.g. a tool result without its call)."""


class ToolCallExpiredError(HistoryError):
    """Results for tool calls that were already closed because their lease ran out (``seconds``)."""

    def __init__(self, namespace: str, session_id: str, calls: list[str], seconds: float) -> None:
        self.calls = calls
        super().__init__(
            f"session ({namespace!r}, {session_id!r}): tool calls {calls!r} were closed with an error result "
            f"after their lease of {seconds:g} s ran out; these results came too late and were not stored. "
            "Fix: raise tool_call_lease_seconds above your slowest tool's run time."
        )


class UsageError(ContextmemError, ValueError):
    """contextmem was called in a way its contract does not allow: arguments that contradict each other, a
    part that was not opened, a synchronous facade called inside a running event loop."""


class InternalError(ContextmemError, AssertionError):
    """An invariant of contextmem itself broke: a bug in contextmem, never in the caller's input."""


class BudgetExceededError(ContextmemError):
    """The part of the request that may not be cut is larger than the budget."""

    def __init__(self, needed: int, budget: int, what: str) -> None:
        self.needed = needed
        self.budget = budget
        super().__init__(
            f"{what} needs {needed} tokens but the budget is {budget}. "
            "Fix: raise context_window / agent_max_context_tokens, lower max_tokens, "
            "or shorten the system prompt, tool definitions or the newest message."
        )


class MissingExtraError(ContextmemError, ImportError):
    """An optional component was used without installing its extra."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"{module!r} is not installed. Fix: pip install 'contextmem[{extra}]'",
        )


class BrokenExtraError(MissingExtraError):
    """An optional component is installed but does not load (a system library it links is missing)."""

    def __init__(self, module: str, reason: str, fix: str) -> None:
        ContextmemError.__init__(
            self, f"{module!r} is installed but does not load: {one_line(reason, 160)}. Fix: {fix}"
        )


class MissingPackageError(MissingExtraError):
    """An optional component needs a package that no extra of contextmem installs (the user picks it)."""

    def __init__(self, module: str, package: str) -> None:
        ContextmemError.__init__(self, f"{module!r} is not installed. Fix: pip install {package!r}")


class TokenizerError(ContextmemError):
    """A tokenizer's data could not be loaded or failed its integrity check."""


class StoreError(ContextmemError):
    """A session store could not complete an operation."""


class StoreLockedError(StoreError):
    """The database stayed locked by other writers for longer than the store waits (``waited`` seconds)."""

    def __init__(self, what: str, waited: float, *, fix: str | None = None) -> None:
        self.waited = waited
        fix = fix or (
            "look for a process holding a long write transaction on this database, "
            "or give the store a larger busy_timeout"
        )
        super().__init__(
            f"{what}: the database stayed locked by other writers for {waited:.0f} s. Fix: {fix}."
        )


class StoreUnavailableError(StoreError):
    """The database could not be reached, or the connection went away, and retrying for ``waited`` seconds
    did not help. ``cause`` is the last driver error (one line).

    ``may_have_landed``: the connection was lost while a write was committing, so it may or may not have
    been applied; the store could not tell (an unconditional append). Reload before writing it again.
    """

    def __init__(self, what: str, waited: float, cause: str, *, may_have_landed: bool = False) -> None:
        self.what = what
        self.waited = waited
        self.cause = cause
        self.may_have_landed = may_have_landed
        if may_have_landed:
            message = (
                f"{what}: the connection to the database was lost while committing ({cause}), so the write "
                "may have landed or not. Fix: reload the session before appending again: it shows whether "
                "the write is there."
            )
        else:
            message = (
                f"{what}: the database could not be reached or went away ({cause}); retried for "
                f"{waited:.0f} s. Fix: check that the database server runs and is reachable from this host "
                "(host, port, network), or raise store_retry_seconds to ride out longer outages."
            )
        super().__init__(message)


class StoreSchemaError(StoreError):
    """The database cannot be used by this version of contextmem."""


class StoreURLError(StoreError, ValueError):
    """``open_store`` was given a URL it cannot open."""


class MemoryConflictError(StoreError):
    """An edit of a shared memory document (``MEMORY.md``, a note) was made on a version another host has
    replaced since: nothing was written, the edit stays where it was (the working copy's file), and the
    shared document is untouched. Daily files never conflict: their entries merge."""


class SessionConflictError(StoreError):
    """A conditional write found the session moved: it expected the session to end at ``expected`` but
    another writer had moved it to ``actual``, or (``archived``, ascending) messages it expected live had
    left the context meanwhile (archived by a compactor, possibly on another host).

    Nothing was written. The engine reloads the session and validates again (see ``ContextEngine.add``).
    """

    def __init__(
        self, namespace: str, session_id: str, expected: int, actual: int, *, archived: Sequence[int] = ()
    ) -> None:
        self.expected = expected
        self.actual = actual
        self.archived = tuple(archived)
        where = f"session ({namespace!r}, {session_id!r}) moved"
        if self.archived:
            more = f" (and {len(self.archived) - 1} more)" if len(self.archived) > 1 else ""
            what = f"seq {self.archived[0]}{more} was archived, next seq {actual}"
        else:
            what = f"expected next seq {expected}, found {actual}"
        super().__init__(
            f"{where}: {what}; nothing was written. "
            "Fix: reload the session (ContextEngine does) and append again."
        )


class SessionBusyError(StoreError):
    """Another writer's tool calls stayed without results for ``waited`` seconds; nothing was written.

    Appending after them would have stored an orphan tool call, so :meth:`ContextEngine.add` waited (with
    backoff) for their results and gave up. The engine stays reloaded and usable: call ``add`` again.
    """

    def __init__(self, namespace: str, session_id: str, calls: list[str], waited: float) -> None:
        self.calls = calls
        self.waited = waited
        super().__init__(
            f"session ({namespace!r}, {session_id!r}): tool calls {calls!r} of another writer still have no "
            f"results after {waited:.1f} s, and appending now would separate them from their results; "
            "nothing was written. Fix: retry once that writer has appended its tool results (if it is gone, "
            "append results for those calls, e.g. an error result), or give each agent its own session."
        )


class MessageStateError(StoreError, LookupError):
    """A seq does not exist in the session, or is archived where a live message is required."""


class PathEscapeError(ContextmemError, PermissionError):
    """A path names something outside the namespace's workspace (``..``, absolute, escaping symlink)."""


class NotFoundError(ContextmemError, FileNotFoundError):
    """A file the caller named (a memory path, an offloaded tool result) does not exist."""


class ArchiveError(ContextmemError, OSError):
    """Writing the archive failed (disk full, read-only, permissions). The messages it was meant to
    hold were not removed from the session: nothing is lost, the context just did not shrink."""


class CompactionError(ContextmemError):
    """Every rung of the reduction ladder was tried and the request still does not fit."""


class LLMError(ContextmemError):
    """A model call failed. ``provider`` names who failed; ``status`` is the HTTP status if any."""

    retry_after: float | None = None  # seconds the provider asked us to wait, when it said

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        self.provider = provider
        self.status = status
        super().__init__(message)


class ContextOverflowError(LLMError):
    """The provider rejected the request as longer than its context window.

    ``limit`` is the window the provider stated, when it said one.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        limit: int | None = None,
    ) -> None:
        self.limit = limit
        super().__init__(message, provider=provider, status=status)


class RateLimitError(LLMError):
    """Rate limited or out of quota for now (HTTP 429): retried with backoff."""


class TransientLLMError(LLMError):
    """A server error, timeout or dropped connection: retried with backoff."""


class AuthenticationError(LLMError):
    """The API key is missing, wrong or lacks permission: never retried."""


class LLMTimeoutError(LLMError, TimeoutError):
    """A model call ran, or waited at the endpoint's queue, past its deadline; it was cancelled."""


class IncompleteReplyError(LLMError):
    """The model answered nothing usable: an empty reply (no text, no tool call), or a stream that ended
    without saying it was finished (a dropped connection, or a server that gave up — llama.cpp's server
    answers an over-long prompt with an empty stream). Nothing is stored as the model's message."""


class BadRequestError(LLMError):
    """The provider rejected the request for a reason the caller must fix: never retried."""
