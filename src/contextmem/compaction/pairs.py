"""Tool-call pairs in a message list, pure: which calls are answered, which are still open, which are broken.

A **group** is an assistant message with tool calls and the tool results that follow it directly. It is

* **whole** when its results answer exactly its calls;
* **open** when it is the last group of the list, nothing but its own results follows it, and some of its
  calls have no result yet: a tool is still running (this writer's or another's);
* **broken** otherwise: results are missing and something else came after the call, or a result answers
  no call of the group before it (a *stray*).

Invariants (tested): :func:`sendable` returns a subsequence in which every call has all its results and
every result its call (:func:`~contextmem.messages.orphan_tool_messages` finds nothing); :func:`broken`
never lists an index of the open group; a list that passes
:func:`~contextmem.messages.validate_history` has nothing broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import AssistantMessage, Message, ToolMessage

__all__ = ["Group", "broken", "groups", "open_group", "sendable"]


@dataclass(frozen=True, slots=True)
class Group:
    """``owner`` (an index; ``None`` for stray results), its results' indices, its unanswered call ids."""

    owner: int | None
    results: tuple[int, ...]
    missing: tuple[str, ...]

    @property
    def indices(self) -> tuple[int, ...]:
        return self.results if self.owner is None else (self.owner, *self.results)


def groups(messages: Sequence[Message]) -> list[Group]:
    """Every group and every run of stray results, in order. A result repeating an answered call is stray."""
    found: list[Group] = []
    owner: int | None = None
    calls: dict[str, None] = {}
    results: list[int] = []
    strays: list[int] = []

    def close() -> None:
        nonlocal owner, calls, results
        if owner is not None:
            found.append(Group(owner, tuple(results), tuple(calls)))
        owner, calls, results = None, {}, []

    for i, msg in enumerate(messages):
        if isinstance(msg, ToolMessage):
            if owner is not None and msg.tool_call_id in calls:
                del calls[msg.tool_call_id]
                results.append(i)
            else:
                strays.append(i)
            continue
        close()
        if strays:
            found.append(Group(None, tuple(strays), ()))
            strays = []
        if isinstance(msg, AssistantMessage) and msg.tool_calls:
            owner, calls = i, dict.fromkeys(c.id for c in msg.tool_calls)
    close()
    if strays:
        found.append(Group(None, tuple(strays), ()))
    found.sort(key=lambda g: g.indices[0])
    return found


def _open(found: list[Group], n: int) -> Group | None:
    """The open group among ``found`` (the groups of a list of ``n`` messages), or ``None``."""
    if not found:
        return None
    last = found[-1]
    if last.owner is None or not last.missing or max(last.indices) + 1 != n:
        return None
    return last


def open_group(messages: Sequence[Message]) -> Group | None:
    """The open group at the end of ``messages`` (see the module docs), or ``None``."""
    return _open(groups(messages), len(messages))


def _broken(found: list[Group], tail: Group | None) -> list[int]:
    return sorted(i for g in found if g.owner is None or (g.missing and g != tail) for i in g.indices)


def broken(messages: Sequence[Message]) -> list[int]:
    """Indices of every message of a broken group (its call and the results it has) and of stray results."""
    found = groups(messages)
    return _broken(found, _open(found, len(messages)))


def sendable(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without broken groups, stray results and the open group: what a provider accepts.
    One pass over the groups; a list with every pair whole is returned as it is (the common case)."""
    found = groups(messages)
    tail = _open(found, len(messages))
    leave = set(_broken(found, tail)) | set(tail.indices if tail else ())
    if not leave:
        return list(messages)
    return [m for i, m in enumerate(messages) if i not in leave]
