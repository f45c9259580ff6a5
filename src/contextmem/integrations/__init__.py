"""Adapters for agent frameworks (A4): thin shells over the public engine, one module per framework.

* :mod:`contextmem.integrations.openai_agents` — ``ContextMemSession``, an OpenAI Agents SDK ``Session``
  (extra ``openai-agents``);
* :mod:`contextmem.integrations.langchain` — ``ContextMemMiddleware``, a LangChain v1 agent middleware
  (extra ``langchain``).

Each module imports its framework on import and raises :class:`~contextmem.errors.MissingExtraError`
naming the extra when it is missing; importing this package costs nothing.
"""

__all__: list[str] = []
