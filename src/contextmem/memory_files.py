"""Writing the memory files: locked, fsynced appends through the gate, and the daily summary job.

The engine's compactions land in the daily file through here with the core dependencies alone; the
memory index (:mod:`contextmem.memory`, the ``memory`` extra) reads them.

Invariants:

* **Whole or nothing.** An entry is appended whole or not at all, and concurrent writers — threads or
  processes — never interleave or lose one: :meth:`Confined.append` takes an exclusive ``flock`` on the
  file, writes the complete entry with ``O_APPEND``, ``fsync``\\ s it (and a new file's directory), and cuts
  a failed write back off.
* **Confined.** Every memory file is opened through ``workspace.files`` by its relative path: a symlinked
  ``MEMORY.md`` or ``memory/`` (even one swapped in while we write) or a hard-linked file is refused with
  :class:`~contextmem.errors.PathEscapeError`, never written through. Files are created 0600, dirs 0700.
* **No secrets.** Memory files are a derived sink (compaction summaries, a model's ``memory_write``):
  every entry passes through :func:`~contextmem.redaction.redact_secrets` before it is written.
* **A note is a list item, and reads back exactly.** :func:`append_note` (``memory_write``) writes
  ``- `` and :func:`note_text` of the note, every later line indented two spaces as its continuation (a
  line is any of :data:`~contextmem.textlines.LINE_ENDS`; an empty line stays empty, one of spaces is
  indented too), so a multi-line note stays one item and none of its lines starts at column 0 for any
  reader. Nothing else changes: the line ends are kept as given, and :func:`read_note_item` gives back
  :func:`note_text` of the note, character for character. In ``MEMORY.md`` it joins the list the file
  ends with (else starts one after a blank line); in the daily file it is an entry of its own, under
  its ``## HH:MM`` heading. A note joining that minute's list made the index re-embed the list's chunk
  (up to 1,200 characters) for every note: an agent saving 50 facts in a minute paid ~8 times their
  embedding; now each note is embedded once, alone, and hosts merge shared daily files note by note.
* **An entry forges no entry.** The body of an :func:`append_daily` entry (a compaction's digest or
  summary, the 23:55 summary: text derived from what people and tools wrote) is markdown and keeps its
  lines, but a line that only :meth:`str.splitlines` ends (U+2028, ``\\x85``, ``\\v``...) is indented
  as the continuation of the line it interrupts, and a line that would read as an entry's ``## HH:MM``
  heading is escaped (``\\## 23:59``): no reader finds a heading or a list item the body did not write
  as one.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import re
from collections.abc import Awaitable, Callable
from datetime import date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from time import time_ns

from .errors import ConfigError, brief
from .logs import get_logger
from .memory_docs import SharedDocuments
from .redaction import redact_secrets
from .safefs import append_or_cut_back
from .textlines import LINE_ENDS, MARKDOWN_LINE_ENDS, indent_after, lines, lines_with_ends
from .workspace import CORE_FILE, DAILY_DIR, Workspace, daily_relative, dialog_relative

__all__ = [
    "DailySummaryJob",
    "append_daily",
    "append_note",
    "note_item",
    "note_text",
    "read_note_item",
    "write_core",
]

Summarizer = Callable[[str], "str | Awaitable[str | None] | None"]

logger = get_logger("contextmem.memory")
STATE_FILE = f"{DAILY_DIR}/.daily-summary.json"
MAX_STATE_BYTES = 64 * 1024
TAIL_BYTES = 64 * 1024  # of a memory file, read to see which list and section a note joins
# (about the longest note: MAX_WRITE_CHARS characters of up to 4 bytes)
_LIST_ITEM = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])(?: |\t|$)")
_BULLET = re.compile(r"[-*+][ \t]+")
INDENT = "  "  # of a list item's continuation lines: the width of "- "
# Where a markdown line of an entry's body would start an entry's heading, "## HH:MM" (up to 3 spaces
# first: still a heading to CommonMark): the backslash goes there.
_ENTRY_HEADING = re.compile(r"(?:^|(?<=[\r\n]))( {0,3})(?=##[ \t]+\d{1,2}:\d\d)")
_NOT_MARKDOWN_ENDS = tuple(end for end in LINE_ENDS if end not in MARKDOWN_LINE_ENDS)


def _entry(text: str, heading: str | None) -> bytes:
    """The entry as written: secrets redacted, a ``## heading`` first when given, the body laid out so it
    forges no heading or line (the module's invariants), one final newline."""
    body = redact_secrets(text.strip("\n"))
    if not body.strip():
        raise ConfigError("a memory entry is empty. Fix: pass the text to remember")
    body = indent_after(_ENTRY_HEADING.sub(r"\1\\", body), INDENT, _NOT_MARKDOWN_ENDS)
    entry = f"{redact_secrets(f'## {heading}')}\n\n{body}\n" if heading else f"{body}\n"
    return entry.encode("utf-8")


def _append(
    workspace: Workspace,
    shared: SharedDocuments | None,
    relative: str,
    make: Callable[[str], str],
    *,
    once: bytes | None = None,
) -> None:
    """Append ``make(tail)`` (``tail``: the last :data:`TAIL_BYTES` of the file, decoded) to ``relative``:
    the file under its lock, or — with ``shared`` — the shared document under its row lock (the working
    copy takes it on its next sync). Either way concurrent appends all land, whole. With ``shared`` and
    ``once``, nothing is appended when the document already holds ``once`` (checked under the lock)."""
    if shared is not None:

        def add(current: bytes) -> bytes:
            if once is not None and once in current:
                return b""
            return make(current[-TAIL_BYTES:].decode("utf-8", "replace")).encode("utf-8")

        shared.append(relative, add, time_ns())
        return
    with workspace.files.locked_append(relative, readable=True) as (fd, _):
        start = os.fstat(fd).st_size
        tail = os.pread(fd, min(start, TAIL_BYTES), start - min(start, TAIL_BYTES)).decode("utf-8", "replace")
        append_or_cut_back(fd, make(tail).encode("utf-8"), start)


def append_daily(
    workspace: Workspace,
    text: str,
    when: datetime | None = None,
    *,
    title: str = "",
    shared: SharedDocuments | None = None,
    once: str | None = None,
) -> Path:
    """Append an entry headed ``## HH:MM [title]`` to ``memory/YYYY-MM-DD.md`` of ``when`` (local time).
    The heading is one line: a line end in ``title`` (it holds a session id) is written as a space.
    With ``shared`` the entry goes to the shared document (see :func:`_append`); with ``once`` too (a
    line the entry ends with), not when the document already holds that line."""
    moment = when or datetime.now()
    heading = f"{moment:%H:%M} {' '.join(lines(title))}".strip()
    relative = daily_relative(moment.date())
    entry = _entry(f"{text}\n\n{once}" if once else text, heading).decode("utf-8")
    mark = once.encode("utf-8") if once else None
    _append(workspace, shared, relative, lambda tail: ("\n" if tail else "") + entry, once=mark)
    return workspace.dir / relative


def write_core(workspace: Workspace, text: str, *, shared: SharedDocuments | None = None) -> Path:
    """Append a paragraph to ``MEMORY.md``, the core memory that never decays."""
    entry = _entry(text, None).decode("utf-8")
    _append(workspace, shared, CORE_FILE, lambda tail: ("\n" if tail else "") + entry)
    return workspace.core_file


def note_text(text: str) -> str:
    """What a note saves of ``text``: ``text`` without its outer whitespace (what :meth:`str.strip`
    takes, line ends included) and without a list marker it starts with (``-``, ``*`` or ``+`` and the
    blanks after it, so the item's bullet is not doubled); every other character as given."""
    note = text.strip()
    bullet = _BULLET.match(note)
    return note[bullet.end() :].strip() if bullet else note


def note_item(text: str) -> str:
    """``text`` as one markdown list item: ``- `` and :func:`note_text` of it, every later line indented
    two spaces (an empty line stays empty), one final newline. :func:`read_note_item` reads it back."""
    note = note_text(text)
    if not note:
        raise ConfigError("a memory note is empty. Fix: pass the text to remember")
    return f"- {indent_after(note, INDENT)}\n"


def read_note_item(text: str) -> str:
    """The note of the list item ``text`` starts with, as :func:`note_item` wrote it (the rest of its file
    may follow): ``read_note_item(note_item(t)) == note_text(t)``. The item ends before the first line
    that is neither empty nor indented; the empty lines before that line are not the note's."""
    items = lines_with_ends(text)
    if not items or not items[0][0].startswith("- "):
        raise ConfigError(f"{brief(text)} does not start with a list item. Fix: pass the text from its '- '")
    kept = [(items[0][0][2:], items[0][1])]
    for line, end in items[1:]:
        if line and not line.startswith(INDENT):
            break
        kept.append((line[len(INDENT) :], end))
    while len(kept) > 1 and not kept[-1][0]:
        kept.pop()
    return "".join(line + end for line, end in kept[:-1]) + kept[-1][0]


def _ends_in_list(tail: str) -> bool:
    """Whether the last block of ``tail`` is a list: its last non-blank line belongs to a list item."""
    for line in reversed(lines(tail)):
        if _LIST_ITEM.match(line):
            return True
        if line.strip() and not line[0].isspace():  # a paragraph or heading line: not in a list
            return False
    return False


def _gap(tail: str, blank: bool) -> str:
    """What goes between ``tail`` and a new entry: a line end, and a blank line when ``blank``."""
    if not tail:
        return ""
    needed = "\n\n" if blank else "\n"
    ends = len(tail) - len(tail.rstrip("\n"))
    return needed[min(ends, len(needed)) :]


def append_note(
    workspace: Workspace,
    text: str,
    target: str,
    when: datetime | None = None,
    *,
    shared: SharedDocuments | None = None,
) -> Path:
    """Append a note (secrets redacted) as a list item to ``MEMORY.md`` (``target="core"``) or, headed
    ``## HH:MM``, to the daily file of ``when`` (``"daily"``); to the shared document with ``shared``.
    See the module's invariants."""
    if target not in ("core", "daily"):
        raise ConfigError(f"target {target[:80]!r} is not 'core' or 'daily'. Fix: use one of them")
    item = note_item(redact_secrets(text))
    moment = when or datetime.now()
    relative = CORE_FILE if target == "core" else daily_relative(moment.date())
    heading = None if target == "core" else f"## {moment:%H:%M}"

    def make(tail: str) -> str:
        if heading is not None:
            return _gap(tail, blank=True) + f"{heading}\n\n{item}"
        joins = _ends_in_list(tail)
        return _gap(tail, blank=not joins) + item

    _append(workspace, shared, relative, make)
    return workspace.dir / relative


def _dialog_material(workspace: Workspace, day: date) -> str:
    try:
        return workspace.files.read_text(dialog_relative(day))
    except FileNotFoundError:
        return ""


class DailySummaryJob:
    """Writes the day's summary to the daily file at ``at`` (local ``HH:MM``, default 23:55).

    The material (by default the day's dialog archive ``dialog/YYYY-MM-DD.jsonl``; with a shared store,
    which keeps no such file, the day's messages in the store: ``material`` may be async) is hashed; when
    the hash equals the last summarised one the run is skipped, so a quiet day or a restart costs nothing.
    With ``shared`` every host runs the job on the same material, so the entry ends with a comment naming
    the material's hash, and a host that finds it in the shared document already appends nothing.
    The summariser is injected (sync or async ``material -> summary``); it runs in a worker thread when
    synchronous so it never blocks the event loop. The last hash is kept in ``memory/.daily-summary.json``
    (replaced atomically, 0600, through the gate; the dialog archive is read through it too).
    """

    def __init__(
        self,
        workspace: Workspace,
        summarize: Summarizer,
        *,
        at: str = "23:55",
        material: Callable[[Workspace, date], str | Awaitable[str]] = _dialog_material,
        shared: SharedDocuments | None = None,
    ) -> None:
        try:
            hour, minute = (int(p) for p in at.split(":"))
            self.at = time(hour, minute)
        except ValueError:
            raise ConfigError(f"daily summary time {at!r} is not HH:MM. Fix: e.g. '23:55'") from None
        self.workspace = workspace
        self.summarize = summarize
        self.material = material
        self.shared = shared  # the shared documents the summary goes to (a shared store), else the file

    def next_run(self, now: datetime) -> datetime:
        """The first moment at ``at`` strictly after ``now`` (pure)."""
        candidate = datetime.combine(now.date(), self.at, tzinfo=now.tzinfo)
        return candidate if candidate > now else candidate + timedelta(days=1)

    def _last_hash(self) -> str | None:
        try:
            state = json.loads(self.workspace.files.read_bytes(STATE_FILE, max_bytes=MAX_STATE_BYTES))
        except (FileNotFoundError, ValueError):
            return None
        value = state.get("hash") if isinstance(state, dict) else None
        return value if isinstance(value, str) else None

    def _save_hash(self, digest: str, day: date) -> None:
        state = json.dumps({"hash": digest, "day": day.isoformat()}).encode("utf-8")
        self.workspace.files.write_atomic(STATE_FILE, state)

    async def run_once(self, now: datetime | None = None) -> Path | None:
        """Summarise ``now``'s day unless nothing changed; returns the daily file written, else ``None``."""
        moment = now or datetime.now()
        if inspect.iscoroutinefunction(self.material):
            material = await self.material(self.workspace, moment.date())
        else:
            material = await asyncio.to_thread(self.material, self.workspace, moment.date())
        assert isinstance(material, str)
        if not material.strip():
            return None
        digest = hashlib.sha256(material.encode("utf-8")).hexdigest()
        if digest == await asyncio.to_thread(self._last_hash):
            return None
        summarize = self.summarize

        def call() -> object:
            return summarize(material)

        result = call() if inspect.iscoroutinefunction(summarize) else await asyncio.to_thread(call)
        summary = await result if inspect.isawaitable(result) else result
        if not isinstance(summary, str) or not summary.strip():
            return None
        # Every host of a shared store runs the job on the same material: the first one's entry stands.
        once = f"<!-- daily summary of {digest[:16]} -->" if self.shared is not None else None
        path = await asyncio.to_thread(
            partial(append_daily, title="daily summary", shared=self.shared, once=once),
            self.workspace,
            summary,
            moment,
        )
        await asyncio.to_thread(self._save_hash, digest, moment.date())
        return path

    async def run_forever(self, stop: asyncio.Event, *, clock: Callable[[], datetime] = datetime.now) -> None:
        """Sleep until each ``at``, run, repeat until ``stop`` is set. Errors of one run do not stop it."""
        while not stop.is_set():
            now = clock()
            delay = (self.next_run(now) - now).total_seconds()
            try:
                await asyncio.wait_for(stop.wait(), timeout=max(delay, 0.0))
                return
            except TimeoutError:
                pass
            try:
                await self.run_once(clock())
            except Exception:
                namespace = self.workspace.namespace
                logger.exception("the daily summary of %r failed; it runs again at the next time", namespace)
