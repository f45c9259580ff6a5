"""The public API: exactly what ``contextmem.__all__`` promises, every name usable, no extra needed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import contextmem

PUBLIC = [
    "LLM",
    "Agent",
    "ArchiveError",
    "AssistantMessage",
    "AuthenticationError",
    "BadRequestError",
    "BrokenExtraError",
    "BudgetExceededError",
    "Calibration",
    "ChatResponse",
    "CompactionError",
    "ConfigError",
    "Content",
    "ContextEngine",
    "ContextMem",
    "ContextOverflowError",
    "ContextmemError",
    "CountedHistory",
    "Embedder",
    "EngineEvent",
    "HeuristicCounter",
    "HistoryError",
    "ImagePart",
    "IncompleteReplyError",
    "InternalError",
    "JsonlLineError",
    "LLMError",
    "LLMTimeoutError",
    "MemoryConflictError",
    "MemoryHit",
    "MemoryIndex",
    "MemoryTools",
    "Message",
    "MessageCounter",
    "MessageFormatError",
    "MessageStateError",
    "MessageTooLargeError",
    "MissingExtraError",
    "MissingPackageError",
    "ModelInfo",
    "NotFoundError",
    "Part",
    "PathEscapeError",
    "RateLimitError",
    "Request",
    "RequestEstimate",
    "SessionBusyError",
    "SessionConflictError",
    "SessionStore",
    "Settings",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    "StoreURLError",
    "StoreUnavailableError",
    "SystemMessage",
    "TextPart",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerError",
    "ToolArgumentError",
    "ToolCall",
    "ToolCallExpiredError",
    "ToolMessage",
    "ToolSpec",
    "TransientLLMError",
    "Usage",
    "UsageError",
    "UserMessage",
    "Window",
    "Workspace",
    "allowed_cuts",
    "assistant",
    "fit_cut",
    "from_openai",
    "get_counter",
    "is_over_budget",
    "is_overflow",
    "lookup_model",
    "open_memory_index",
    "open_store",
    "orphan_tool_messages",
    "resolve_window",
    "safe_cut",
    "system",
    "text_of",
    "to_openai",
    "tool_call",
    "tool_result",
    "turn_starts",
    "user",
    "validate_history",
]

NEEDS_MEMORY_EXTRA = {"Embedder", "MemoryHit", "MemoryIndex", "MemoryTools", "open_memory_index"}


def test_all_is_pinned() -> None:
    """Adding or removing a public name is a decision: change this list with it."""
    assert contextmem.__all__ == PUBLIC
    assert len(set(PUBLIC)) == len(PUBLIC)
    # upper-case constants first, then classes, then functions (ruff's RUF022 order)
    ordered = sorted(PUBLIC, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    assert ordered == PUBLIC


@pytest.mark.parametrize("name", [n for n in PUBLIC if n not in NEEDS_MEMORY_EXTRA])
def test_every_core_name_resolves(name: str) -> None:
    assert getattr(contextmem, name) is not None


@pytest.mark.parametrize("name", sorted(NEEDS_MEMORY_EXTRA))
def test_memory_names_resolve_with_the_extra(name: str) -> None:
    pytest.importorskip("numpy")
    import contextmem.memory

    assert getattr(contextmem, name) is getattr(contextmem.memory, name)


def test_main_objects_import_from_the_package() -> None:
    from contextmem import Agent, ContextEngine, ContextMem, SessionStore, open_store
    from contextmem.agent import Agent as AgentHome
    from contextmem.engine import ContextEngine as EngineHome
    from contextmem.runtime import ContextMem as RuntimeHome
    from contextmem.workspace import Workspace as WorkspaceHome

    assert (ContextMem, ContextEngine, Agent) == (RuntimeHome, EngineHome, AgentHome)
    assert contextmem.Workspace is WorkspaceHome  # core: the layout needs no extra
    assert callable(open_store) and SessionStore.__name__ == "SessionStore"


def test_every_public_error_is_in_the_tree() -> None:
    errors = [getattr(contextmem, n) for n in PUBLIC if n.endswith("Error")]
    assert all(issubclass(e, contextmem.ContextmemError) for e in errors)
    tree = [
        c
        for c in vars(contextmem.errors).values()
        if isinstance(c, type) and issubclass(c, contextmem.ContextmemError)
    ]
    assert sorted(c.__name__ for c in tree) == sorted(e.__name__ for e in errors)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        contextmem.no_such_thing  # noqa: B018
    assert "MemoryTools" in dir(contextmem)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_import_works_without_the_memory_extra() -> None:
    """``import contextmem`` needs core dependencies only; the engine works without numpy."""
    result = _run(
        """
        import asyncio, sys, tempfile
        sys.modules["numpy"] = None  # any `import numpy` now raises ImportError

        import contextmem
        from contextmem import ContextEngine, MissingExtraError, Settings, user
        from contextmem.testing import InMemorySessionStore

        async def main():
            with tempfile.TemporaryDirectory() as tmp:
                engine = await ContextEngine.open(
                    "s", store=InMemorySessionStore(), settings=Settings(workspace=tmp), workspace_dir=tmp
                )
                await engine.add(user("hello"))
                request = await engine.build("be brief")
                print([m.kind for m in request.messages])

        asyncio.run(main())
        try:
            contextmem.open_memory_index  # the index and embedders need numpy; MemoryTools no longer does
        except MissingExtraError as exc:
            print("extra:", exc)
        print(sys.modules["numpy"] is None)
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "['system', 'user']"
    assert lines[1].startswith("extra:") and "memory" in lines[1]
    assert lines[2] == "True"  # nothing replaced the blocked numpy: nothing needed it
