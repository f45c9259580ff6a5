"""What the local model's two runtimes (:mod:`.local_xllamacpp`, :mod:`.local_llamacpp`) share: importing
one, which tells a missing install from one that does not load, and the engines each loads once per
process and frees at exit."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from ..errors import BrokenExtraError, MissingExtraError

__all__ = ["Loaded", "import_runtime", "importable"]


def import_runtime(module: str, extra: str) -> Any:
    """``module``, imported; not installed: :class:`MissingExtraError` naming ``extra``; installed but its
    native library does not load (both wheels link the system's OpenMP, libgomp.so.1, and an image may
    lack it): :class:`BrokenExtraError` (a :class:`MissingExtraError` too, so a caller that falls back on
    the other runtime still does), with the fix for what did not load."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(module, extra) from None
        fix = (
            "install the OpenMP runtime it links (Debian/Ubuntu: apt install libgomp1; Fedora: dnf install "
            "libgomp)"
            if "libgomp" in str(exc)
            else f"reinstall it: pip install --force-reinstall 'contextmem[{extra}]'"
        )
        raise BrokenExtraError(module, str(exc), fix) from None


def importable(load: Callable[[], Any]) -> bool:
    """Whether ``load()`` (a runtime's import) succeeds: a missing or broken install is ``False``."""
    try:
        load()
    except MissingExtraError:
        return False
    return True


class _Engine(Protocol):
    def close(self) -> None: ...


E = TypeVar("E", bound=_Engine)


class Loaded(Generic[E]):
    """A runtime's engines, one per key (file, window, threads, buffers), made under one lock and closed
    when the interpreter exits (llama.cpp's own teardown fails after that point)."""

    def __init__(self) -> None:
        self._engines: dict[Hashable, E] = {}
        self._lock = threading.Lock()
        atexit.register(self.close_all)

    def get(self, key: Hashable, make: Callable[[], E]) -> E:
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                engine = self._engines[key] = make()
            return engine

    def close_all(self) -> None:
        with self._lock:
            for engine in self._engines.values():
                with contextlib.suppress(Exception):
                    engine.close()
            self._engines.clear()
