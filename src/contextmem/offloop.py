"""The one rule for work over large text: past :data:`OFF_LOOP_BYTES`, it runs in a worker thread.

contextmem is async and its event loop may be shared: an MCP server answers every tenant on one loop, so
one pass over megabytes of one tenant's text on the loop (a token count — BPE over one long word is far
from linear —, redacting it for a summary, an archive or offload write) stalls every other tenant's call
for as long. Before, a stored session with three 1 MB one-word tool results stalled the server's loop
0.85 s on each ``context_stats`` (its load counted them on the loop), and three 9 MB ones 11.8 s. Small
work stays on the loop: a thread hop costs more than it saves there.

Every such step goes through :func:`off_loop`, weighed by :func:`texts_bytes`: reading and counting what
``ContextEngine.add`` takes (:func:`contextmem.engine.door.read_input`), counting a session's stored
messages when it is loaded (``LiveSession.load``), archiving and the extractive summaries of what leaves
(``PlanApplier``), writing an offloaded tool result, the summariser's passes over the messages it
folds (:meth:`contextmem.summarize.Summarizer.summarize`: redaction, ledger, draft, revision), and
parsing the rows a PostgreSQL store read (the SQLite store reads and parses in its own thread).

Better than moving work off the loop is not doing it again: a store hands back the session it loaded last
while its stored version is unchanged (:mod:`contextmem.store.state_cache`), so ``context_stats`` of an
unchanged session of three 9 MB results reads one version number, not 27 MB of rows; with the same
message objects, their counts are found in the counter's cache.

Limit: a worker thread frees the loop of the CPU work, not of the GIL; a single C call that holds the GIL
for long (a regular expression over megabytes) still delays the loop by as long, in wall time. So long
work hands its C calls a piece at a time: token counting gives the Rust core about 64K characters per call
and lets waiting threads run in between (:data:`contextmem.tokens.tiktoken_backend.CORE_PIECE_CHARS`;
9 MB of log lines was one 0.8 s call). One word of megabytes has no place to cut: it is still one call.
And the pieces still hold the GIL in turn and take a core: in an MCP server over HTTP, texts of over a
megabyte are counted in a worker process at a lower priority (:mod:`contextmem.tokens.count_worker`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

from .message_checks import text_bytes
from .messages import Message

__all__ = ["OFF_LOOP_BYTES", "off_loop", "texts_bytes"]

OFF_LOOP_BYTES = 64 * 1024
"""Work over more text than this (UTF-8 bytes, or characters where only they are known) leaves the loop."""

T = TypeVar("T")
P = ParamSpec("P")


async def off_loop(size: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)``, in a worker thread when ``size`` (the text it goes over) is over
    :data:`OFF_LOOP_BYTES`, else here.

    ``work`` must not touch the event loop's objects (futures, the store's connections); what it shares
    with the loop (a :class:`~contextmem.tokens.MessageCounter`'s cache, an archive's line counts) is used
    under the session's lock, or by dict operations that are atomic."""
    if size > OFF_LOOP_BYTES:
        return await asyncio.to_thread(work, *args, **kwargs)
    return work(*args, **kwargs)


def texts_bytes(messages: Iterable[Message], stop: int = OFF_LOOP_BYTES) -> int:
    """UTF-8 bytes of the text in ``messages``, counted until they pass ``stop``: what
    :func:`off_loop` weighs a pass over stored messages by (:func:`~.message_checks.text_bytes`)."""
    total = 0
    for m in messages:
        total += text_bytes(m, stop - total)
        if total > stop:
            break
    return total
