"""A node's ingress HTTP API (shell): aiohttp on 127.0.0.1, in a thread with its own event loop.

Routes and bodies: ``replica.client.http_wire``. The server serves one node's view through
a ``NodeBackend`` (small callables: submit, query, latest certified tree, status), so it
runs without a testnet (``NodeBackend``: ``replica.node.backend``; a ``Node`` makes its own). Every
backend call and all decoding run on a small thread pool, never on the event loop: a slow
subnet lock delays answers, never the server accepting, reading and refusing requests.

* ``call``: ``decode_signed_ingress`` (size, canonical form, signature), receiver = URL id,
  ``submit`` (the subnet's admission checks) → 202 ``{"message_id": hex}``.
* ``query``: the same envelope checks plus ``expiry ∈ [now, now + max_ingress_ttl]``, then the
  query on the node's latest *certified* state; the answer names that height.
* ``dry_run``: the query's checks, then the update executed on a copy of the latest
  certified state and thrown away (``replica.execution.dry_run``): reply or reject,
  instructions, the calls it would make, the state paths it would change.
* ``read_state``: allowed paths only (``replica.node.read_state``); witness + certification
  of the latest certified snapshot.
* ``status``: subnet, node, finalized and certified height, certified root, subnet key, version.
* ``GET /metrics``: the node's metrics registry in the Prometheus text format
  (``replica.node.metrics``); every ingress refusal of ``call`` and ``query`` is counted there
  by reason (``replica_ingress_refusals_total``).

Every refusal is JSON ``{"reason": code, "message": text}`` with the HTTP status its class
defines: an ``IngressRefused`` or an ``ApiError`` (``replica.client.refusals``, which tables
every reason and status). aiohttp's own refusals (no such route, a method not allowed, a body
above the bound) are answered as ``RouteNotFound``, ``MethodNotAllowed`` and
``RequestTooLarge``; a bug as ``ApiError`` itself (500 ``internal_error``, logged).

Bytes that are not HTTP (a bad request line, header or content length) are answered 400 in
plain text by aiohttp's parser before they reach the API.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable

from aiohttp import web

from replica.client.envelope import decode_signed_ingress
from replica.client.http_wire import (
    API_PREFIX, MAX_READ_STATE_BYTES, STATUS_PATH, WireError, decode_read_state_request,
    encode_dry_run_answer, encode_query_answer, parse_canister_id,
)
from replica.client.refusals import (
    ApiError, BodyTimeout, ExpiredIngress, IngressExpiryTooFar, IngressRefused, InvalidCanisterId, MalformedIngress,
    MalformedRequest, MethodNotAllowed, NotCertifiedYet, ReceiverMismatch, RequestTooLarge, RouteNotFound,
)
from replica.execution.codec import EncodingError, decode_payload
from replica.ic.textual_ids import canister_text
from state_manager.messages import Ingress

from .app_thread import AppThread
from .backend import NodeBackend
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE, NodeMetrics
from .read_state import certificate_for, check_path

__all__ = ["METRICS_PATH", "NodeBackend", "HttpApiServer"]

_log = logging.getLogger(__name__)

#: aiohttp's own refusals (routing, body size) and the refusal each is answered as.
_AIOHTTP_REFUSALS: dict[type[web.HTTPException], type[ApiError]] = {
    web.HTTPNotFound: RouteNotFound, web.HTTPMethodNotAllowed: MethodNotAllowed,
    web.HTTPRequestEntityTooLarge: RequestTooLarge,
}
#: Room above the ingress limit, so an envelope slightly too large is refused by the envelope
#: decoder with its own message, and anything larger by the body bound.
_BODY_SLACK = 64 * 1024
#: Where Prometheus scrapes a node.
METRICS_PATH = "/metrics"


def _refusal(status: int, reason: str, message: str) -> web.Response:
    return web.json_response({"message": message, "reason": reason}, status=status)


class HttpApiServer:
    """The API of one node: ``start()`` binds ``host:port`` (0: any free port) and returns
    the bound ``host:port``; ``stop()`` closes the socket and joins the thread."""

    def __init__(self, backend: NodeBackend, *, host: str = "127.0.0.1", port: int = 0, workers: int = 2,
                 body_timeout_s: float = 10.0, shutdown_timeout_s: float = 1.0) -> None:
        self.backend = backend
        self.host, self.port = host, port
        self.body_timeout_s = body_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.max_envelope_bytes = backend.limits.max_ingress_bytes + _BODY_SLACK
        self.address: str | None = None
        self._workers = workers
        self.metrics = backend.metrics or NodeMetrics(backend.subnet_id, backend.node_id)
        self._pool: ThreadPoolExecutor | None = None
        self._app = AppThread(f"http-api-{backend.node_id}", self._bind)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> str:
        if self._app.running:
            raise RuntimeError(f"{self.backend.node_id}: the HTTP API is already started")
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix=f"http-{self.backend.node_id}")
        try:
            port = self._app.start()
        except BaseException:
            self._pool.shutdown(wait=False)
            raise
        self.address = f"{self.host}:{port}"
        return self.address

    @property
    def running(self) -> bool:
        return self._app.running

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop listening, close every connection, join the thread (idempotent). A thread
        still running after ``timeout_s`` is logged and left ``running``."""
        if not self._app.stop(timeout_s):
            _log.warning("%s: the HTTP API did not stop within %.1f s", self.backend.node_id, timeout_s)
            return
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    async def _bind(self) -> tuple[web.AppRunner, int]:
        app = web.Application(client_max_size=self.max_envelope_bytes, middlewares=[self._answer_errors])
        app.router.add_post(API_PREFIX + "/canister/{canister}/call", self._call)
        app.router.add_post(API_PREFIX + "/canister/{canister}/query", self._query)
        app.router.add_post(API_PREFIX + "/canister/{canister}/read_state", self._read_state)
        app.router.add_post(API_PREFIX + "/canister/{canister}/dry_run", self._dry_run)
        app.router.add_get(STATUS_PATH, self._status)
        app.router.add_get(METRICS_PATH, self._metrics)
        # A refused body is drained for at most a second (so its sender still reads the answer),
        # then the connection is closed: a client announcing a huge body cannot hold it open.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=self.shutdown_timeout_s, lingering_time=1.0)
        await runner.setup()
        # SO_REUSEADDR (aiohttp's default on POSIX), no SO_REUSEPORT: a restarted node has its
        # old port again at once, though connections of its last life linger in TIME_WAIT
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError:   # the port is taken: nothing of this runner is left behind
            await runner.cleanup()
            raise
        return runner, runner.addresses[0][1]

    # -- handlers ------------------------------------------------------------------------------

    @web.middleware
    async def _answer_errors(self, request: web.Request, handler: Callable[[web.Request], Awaitable]) -> web.StreamResponse:
        try:
            return await handler(request)
        except (IngressRefused, ApiError) as refusal:
            if isinstance(refusal, IngressRefused):
                self.metrics.ingress_refused(refusal.reason)
            return _refusal(refusal.status, refusal.reason, str(refusal))
        except web.HTTPException as exc:
            known = next((ours for theirs, ours in _AIOHTTP_REFUSALS.items() if isinstance(exc, theirs)), None)
            if known is None:
                return _refusal(exc.status, f"http_{exc.status}", exc.reason)
            return _refusal(known.status, known.reason, exc.reason)
        except Exception:  # noqa: BLE001 - a bug: answered, logged, never a dead node
            _log.exception("%s: %s %s failed", self.backend.node_id, request.method, request.path)
            return _refusal(ApiError.status, ApiError.reason, "the node failed to answer this request")

    async def _blocking(self, function: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, function, *args)

    async def _body(self, request: web.Request, max_bytes: int) -> bytes:
        """The whole body: at most ``max_bytes`` (``too_large``), within ``body_timeout_s``."""
        if request.content_length is not None and request.content_length > max_bytes:
            raise RequestTooLarge(f"a body of {request.content_length} bytes exceeds {max_bytes}")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.body_timeout_s):
                async for chunk in request.content.iter_any():
                    size += len(chunk)
                    if size > max_bytes:
                        raise RequestTooLarge(f"the body exceeds {max_bytes} bytes")
                    chunks.append(chunk)
        except TimeoutError as exc:
            raise BodyTimeout(f"the body did not arrive within {self.body_timeout_s} s") from exc
        except (ConnectionError, OSError, ValueError) as exc:
            raise MalformedRequest(f"the body could not be read: {exc}") from exc
        return b"".join(chunks)

    @staticmethod
    def _canister(request: web.Request) -> int:
        try:
            return parse_canister_id(request.match_info["canister"])
        except WireError as exc:
            raise InvalidCanisterId(str(exc)) from exc

    async def _call(self, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, self.max_envelope_bytes)
        message_id = await self._blocking(self._submit, canister, body)
        return web.json_response({"message_id": message_id.hex(), "status": "accepted"}, status=202)

    async def _query(self, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, self.max_envelope_bytes)
        answer = await self._blocking(self._run_query, canister, body)
        return web.Response(body=answer, content_type="application/msgpack")

    async def _dry_run(self, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, self.max_envelope_bytes)
        answer = await self._blocking(self._run_dry_run, canister, body)
        return web.Response(body=answer, content_type="application/msgpack")

    async def _read_state(self, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, MAX_READ_STATE_BYTES)
        answer = await self._blocking(self._certificate, canister, body)
        return web.Response(body=answer, content_type="application/msgpack")

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(await self._blocking(self.backend.status))

    async def _metrics(self, request: web.Request) -> web.Response:
        body = await self._blocking(self.metrics.exposition)
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})

    # -- the work, on the thread pool ------------------------------------------------------------

    def _authenticated(self, canister: int, body: bytes) -> Ingress:
        ingress = decode_signed_ingress(body, self.backend.limits.max_ingress_bytes)
        if ingress.receiver != canister:
            raise ReceiverMismatch(f"the envelope is for canister {canister_text(ingress.receiver)}, "
                                   f"the URL names {canister_text(canister)}")
        return ingress

    def _submit(self, canister: int, body: bytes) -> bytes:
        ingress = self._authenticated(canister, body)
        self.backend.submit(ingress)
        return ingress.message_id

    def _current(self, canister: int, body: bytes, what: str) -> Ingress:
        """An authenticated envelope whose expiry is in ``[now, now + max_ingress_ttl]``."""
        ingress = self._authenticated(canister, body)
        now, ttl = self.backend.clock(), self.backend.limits.max_ingress_ttl_ns
        if ingress.expiry_time < now:
            raise ExpiredIngress(f"{what} expired at {ingress.expiry_time} ns, now {now} ns")
        if ingress.expiry_time > now + ttl:
            raise IngressExpiryTooFar(f"{what} expiry {ingress.expiry_time} ns is more than {ttl} ns after {now} ns")
        return ingress

    def _run_dry_run(self, canister: int, body: bytes) -> bytes:
        ingress = self._current(canister, body, "dry run")
        if self.backend.dry_run is None:
            raise NotCertifiedYet(f"{self.backend.node_id} does not run dry runs")
        return encode_dry_run_answer(self.backend.dry_run(canister, ingress.method_name, ingress.method_payload,
                                                          ingress.source))

    def _run_query(self, canister: int, body: bytes) -> bytes:
        ingress = self._current(canister, body, "query")
        try:
            arg = decode_payload(ingress.method_payload)
        except EncodingError as exc:
            raise MalformedIngress(f"the query argument does not decode: {exc}") from exc
        return encode_query_answer(self.backend.query(canister, ingress.method_name, arg, ingress.source))

    def _certificate(self, canister: int, body: bytes) -> bytes:
        try:
            paths = decode_read_state_request(body)
        except WireError as exc:
            raise MalformedRequest(str(exc)) from exc
        for path in paths:
            check_path(path, canister)
        latest = self.backend.certified()
        if latest is None:
            raise NotCertifiedYet(f"{self.backend.node_id} has no certified state yet")
        certified, certification = latest
        return certificate_for(certified, certification, paths)
