"""An aiohttp application served on an event loop of its own thread (shell).

``AppThread(name, bind)`` runs ``bind()`` — a coroutine that builds the application, binds it
and returns its ``AppRunner`` and port — on a new loop in a daemon thread; ``start()`` returns
the port once it listens (or raises what binding raised); ``stop()`` stops the loop, cleans the
runner up and joins the thread. The node's ingress API and the testnet's status page use it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable

from aiohttp import web

__all__ = ["AppThread"]


class AppThread:
    def __init__(self, name: str, bind: Callable[[], Awaitable[tuple[web.AppRunner, int]]]) -> None:
        self.name = name
        self._bind = bind
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> int:
        """Serve on a new thread; the bound port (the binding's error, if it failed)."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name} is already started")
        ready: list[Any] = []
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready, started), daemon=True, name=self.name)
        self._thread.start()
        started.wait()
        if isinstance(ready[0], BaseException):
            self._thread.join()
            self._thread = None
            raise ready[0]
        return ready[0]

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop serving and join the thread (idempotent); False if it still runs after ``timeout_s``."""
        thread = self._thread
        if thread is None:
            return True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=timeout_s)
        if thread.is_alive():
            return False
        self._thread = None
        return True

    def _serve(self, ready: list, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            runner, port = loop.run_until_complete(self._bind())
        except BaseException as exc:  # noqa: BLE001 - handed to start()
            ready.append(exc)
            started.set()
            loop.close()
            return
        ready.append(port)
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()
