"""OpenAI Agents SDK: a ``Session`` backed by contextmem, so any agent gets compaction and the archive.

Swap the session, and pass its run config so every model call of a run fits the window::

    cm = await ContextMem.open(settings)
    tools = agent_tool_specs(agent)
    session = ContextMemSession(cm, "user-42", system_prompt=agent.instructions, tools=tools)
    await Runner.run(agent, "hello", session=session, run_config=session.run_config())

``get_items`` returns what :meth:`ContextEngine.build` assembles — the running summary (as a ``developer``
item) and the budget-fitted live history — instead of every item ever stored; what left the context is in
the dialog archive. Pass the agent's instructions and tools so the fit leaves room for them.

**Inside a run.** The SDK reads the session once, when a run starts; the items a run produces (a tool's
output among them) go to the model without passing through ``get_items``. ``session.run_config(...)``
(a ``RunConfig`` with :meth:`ContextMemSession.model_input_filter` as its ``call_model_input_filter``,
other options passed through) makes every model call of the run send what :meth:`ContextEngine.build`
assembles, as the LangChain middleware does: a 140 KB tool output is cut to the budget at the next
call of the same run, its full text kept in ``tool_results/`` (offloaded, as older results are), and
the history compacted there if it is over budget. Items the SDK sends before storing them (a streamed
run's input) are added to the session first, and not again when the SDK stores them. Without the filter
the SDK sends the run's items as they are, and a large one reaches the provider whole.

**When the session changes.** What ``get_items`` returns moves only at one defined point: the first
``get_items`` after a turn ended (after ``add_items`` whose last item is a reply without tool calls,
and the first call on a new session object) — where ``Runner.run`` reads the history to start a run.
There, and only there, a background summary that finished meanwhile is applied and the history is
fitted (compacted if over budget). Between two such points ``get_items`` returns what it returned
before, plus the items added since, minus the items popped — or, with the filter, what the last model
call of the run was fitted to (the filter's ``build`` may cut and compact): a summary finishing mid-run
waits for the next run. Every summary leaves the newest user turn live. ``pop_item`` is immediate: it
never waits for a running summary (a summary that folded the popped message is discarded, never applied).

Items are Responses-API input items, mapped at the edge by :mod:`contextmem.formats.responses`
(one message per run of items; source items returned verbatim while still accurate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import (
    AssistantMessage,
    ContextEngine,
    ContextMem,
    Message,
    MissingExtraError,
    Request,
    SystemMessage,
    ToolSpec,
    UsageError,
)
from ..formats.responses import ITEMS_KEY, Item, items_to_messages, messages_to_items

try:
    from agents import RunConfig
    from agents.memory.session_settings import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("agents", "openai-agents") from exc

if TYPE_CHECKING:
    from agents import Agent
    from agents.items import TResponseInputItem

__all__ = ["ITEMS_KEY", "ContextMemSession", "agent_tool_specs", "items_to_messages", "messages_to_items"]


def agent_tool_specs(agent: Agent[Any]) -> list[ToolSpec]:
    """The function tools of an agent as :class:`ToolSpec`, so the budget leaves room for them."""
    from agents import FunctionTool

    return [
        ToolSpec(t.name, t.description, t.params_json_schema)
        for t in agent.tools
        if isinstance(t, FunctionTool)
    ]


class ContextMemSession:
    """An Agents SDK ``Session`` over one contextmem session (its store, archive and summary).

    ``system_prompt`` and ``tools`` are what the agent sends besides the history: the history is fitted
    to what is left of the window after them and the output reserve.
    """

    def __init__(
        self,
        runtime: ContextMem,
        session_id: str,
        *,
        system_prompt: str = "",
        tools: Sequence[ToolSpec] = (),
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.session_settings = session_settings
        self.system_prompt = system_prompt
        self.tools = tuple(tools)
        self._engine: ContextEngine | None = None
        self._turn_starts = True  # the next get_items is the defined point (module docstring)
        # A run's model input is what get_items returned at its start, then the run's own items; these
        # count where the run's items begin and how many of them the engine holds (module docstring).
        self._run_from: int | None = None
        self._run_held = 0
        self._ahead: list[Item] = []  # taken by the filter before the SDK stored them

    async def engine(self) -> ContextEngine:
        """The session's engine, opened (and restored from the store) on first use; it holds finished
        background summaries until a turn starts (see the module docstring)."""
        if self._engine is None:
            engine = await self.runtime.session(self.session_id)
            engine.hold_summaries()
            self._engine = engine
        return self._engine

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The summary and the history. At a turn start a finished summary is applied and the history
        fitted (compacting first when over budget); otherwise what the last call returned, plus the
        items added since, minus those popped. For :meth:`model_input_filter`, a read is where a run
        starts (the SDK reads once per run, at its start)."""
        engine = await self.engine()
        if self._turn_starts:
            await engine.apply_summary()
            request = await engine.build(self.system_prompt, self.tools)
            self._turn_starts = False
        else:
            request = engine.assemble(self.system_prompt, self.tools, fit=False)
        items = _items(engine, request)
        if limit is not None:
            items = items[max(len(items) - limit, 0) :]
        # The SDK reads the session when a run starts (a run that ended without a reply included): the
        # run's own items follow these in every model input of the run.
        self._run_from, self._run_held, self._ahead = len(items), 0, []
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        engine = await self.engine()
        given = cast("list[Item]", items)
        skip = 0
        while skip < len(given) and self._ahead and given[skip] == self._ahead[0]:
            skip += 1  # the filter added it already, when the SDK sent it before storing it
            self._ahead.pop(0)
        self._run_held += len(given) - skip
        messages = items_to_messages(given)
        if not messages:
            return
        await engine.add(*(items_to_messages(given[skip:]) if skip else messages))
        last = messages[-1]
        if isinstance(last, AssistantMessage) and not last.tool_calls:  # the turn is over
            await engine.end_turn()
            self._turn_starts = True

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` whose ``call_model_input_filter`` is :meth:`model_input_filter`; ``options`` are
        the other ``RunConfig`` fields, passed through."""
        return RunConfig(call_model_input_filter=self.model_input_filter, **options)

    async def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """The SDK's ``call_model_input_filter``: what this model call sends is what
        :meth:`ContextEngine.build` assembles for the agent's instructions and tools (module docstring).

        The run's items the session does not hold yet are added first. Raises :class:`UsageError` when
        the run did not read this session (it was not passed as the run's ``session``).
        """
        if self._run_from is None:
            raise UsageError(
                f"ContextMemSession {self.session_id!r} filtered a model call of a run that did not read "
                "it. Fix: pass this session to the run too: Runner.run(agent, input, session=session, "
                "run_config=session.run_config())."
            )
        engine = await self.engine()
        unheld = [dict(item) for item in data.model_data.input[self._run_from + self._run_held :]]
        if unheld:
            await engine.add(*items_to_messages(unheld))
            self._run_held += len(unheld)
            self._ahead.extend(unheld)
        instructions = data.model_data.instructions
        request = await engine.build(instructions or "", agent_tool_specs(data.agent))
        return ModelInputData(
            input=cast("list[TResponseInputItem]", _items(engine, request)), instructions=instructions
        )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item. Its message leaves through the engine (archived first, never lost);
        the other items of its group, if any, come back as a new message."""
        engine = await self.engine()
        message = await engine.pop_newest()
        if message is None:
            return None
        items = messages_to_items([message])
        if len(items) > 1:
            await engine.add(*items_to_messages(items[:-1]))
        return cast("TResponseInputItem", items[-1])

    async def clear_session(self) -> None:
        """Everything leaves the context (archived first) and the summary is reset; never waits for a
        running summary."""
        await (await self.engine()).clear()
        self._turn_starts = True


def _items(engine: ContextEngine, request: Request) -> list[dict[str, Any]]:
    """A built request as the SDK's input items: the running summary, then the history."""
    summary, history = _summary_and_history(engine, request)
    return messages_to_items([SystemMessage(summary), *history] if summary else history)


def _summary_and_history(engine: ContextEngine, request: Request) -> tuple[str, list[Message]]:
    """A built request split for the SDK: the running summary (a ``developer`` item) and the history.

    The agent sends its instructions itself, so the request's system message (the system prompt, and
    the summary when it is injected there) is not sent as an item; the summary is read from the engine,
    not cut out of that message. With ``summary_injection="first_user"`` the summary already is in the
    history's first user message.
    """
    messages = list(request.messages)
    if messages and isinstance(messages[0], SystemMessage):
        messages.pop(0)
    summary = engine.summary
    in_system = summary is not None and engine.settings.summary_injection == "system"
    return (summary.render() if summary is not None and in_system else ""), messages
