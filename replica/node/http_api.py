"""A node's ingress HTTP API (shell): the IC's HTTP interface, aiohttp on 127.0.0.1, in a
thread with its own event loop.

Routes and answer bodies: ``replica.ic.http_interface`` (the IC's v2, v3 and v4 generations;
every body CBOR). The server serves one node's view through a ``NodeBackend`` (small callables:
submit, query, latest certified tree, delegation, status), so it runs without a testnet. Every
backend call and all decoding run on a small thread pool, never on the event loop: a slow subnet
lock delays answers, never the server accepting, reading and refusing requests.

* ``call`` (v2): the envelope authenticated (``replica.node.ingress_requests``), its canister the
  URL's, then ``submit`` (the subnet's admission checks) → 202. v3 and v4 then wait up to
  ``sync_call_s`` for the call's status to be certified as replied, rejected or done and answer
  ``{status: "replied", certificate}`` (a call already known is answered the same way), or 202.
* ``query``: the same checks plus the expiry window, then the query on the node's latest
  *certified* state; the answer is signed by the node (``replica.ic.query_response``) when the
  backend has a node signer.
* ``dry_run`` (the replica's own): the query's checks (a ``query`` envelope: what is signed for
  a dry run can never be submitted as a call), then the update
  executed on a copy of the latest certified state and thrown away (``replica.execution.dry_run``).
* ``read_state`` of a canister or of this subnet: the paths allowed (``replica.node.read_state``),
  the certificate of the latest certified state with the root subnet's delegation (none on
  the root subnet itself).
* ``status``: the root key, the node's health and heights.
* ``GET /metrics``: the node's metrics registry in the Prometheus text format
  (``replica.node.metrics``); every ingress refusal of ``call`` and ``query`` is counted there
  by reason (``replica_ingress_refusals_total``).

Every refusal is the IC's: an HTTP status with a plain-text message; its reason code
(``replica.client.refusals``) travels in the ``X-Replica-Refusal`` header. aiohttp's own refusals
(no such route, a method not allowed, a body above the bound) are answered as ``RouteNotFound``,
``MethodNotAllowed`` and ``RequestTooLarge``; a bug as ``ApiError`` itself (500, logged).
Bytes that are not HTTP are answered 400 in plain text by aiohttp's parser.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable

from aiohttp import web

from replica.client.answers import encode_dry_run_answer
from replica.client.refusals import (
    ApiError, BodyTimeout, DelegationUnavailable, DuplicateIngress, IngressRefused, InvalidCanisterId, InvalidSubnetId,
    MalformedRequest, MethodNotAllowed, NotCertifiedYet, RequestTooLarge, RouteNotFound,
)
from replica.ic.errors import PrincipalError
from replica.ic.http_interface import (
    CALL_VERSIONS, QUERY_VERSIONS, READ_STATE_VERSIONS, REFUSAL_HEADER, STATUS_PATH, CallAnswer,
    encode_call_answer, encode_read_state_answer, encode_status,
)
from replica.ic.principal import principal_from_text

from .app_thread import AppThread
from .backend import NodeBackend
from .ingress_requests import authenticated_call, authenticated_read_state, canister_of, encode_query_answer
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE, NodeMetrics
from .read_state import certificate_for, check_canister_paths, check_subnet_paths

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
#: A read_state body: at most 1000 paths of short labels (the interface's bound on paths).
_MAX_READ_STATE_BYTES = 256 * 1024
#: Where Prometheus scrapes a node.
METRICS_PATH = "/metrics"
_CBOR = "application/cbor"
_TERMINAL = (b"replied", b"rejected", b"done")


def _refusal(status: int, reason: str, message: str) -> web.Response:
    return web.Response(status=status, text=message, headers={REFUSAL_HEADER: reason})


def _cbor(body: bytes, status: int = 200) -> web.Response:
    return web.Response(status=status, body=body, content_type=_CBOR)


class HttpApiServer:
    """The API of one node: ``start()`` binds ``host:port`` (0: any free port) and returns
    the bound ``host:port``; ``stop()`` closes the socket and joins the thread."""

    def __init__(self, backend: NodeBackend, *, host: str = "127.0.0.1", port: int = 0, workers: int = 2,
                 body_timeout_s: float = 10.0, shutdown_timeout_s: float = 1.0, sync_call_s: float = 10.0) -> None:
        self.backend = backend
        self.host, self.port = host, port
        self.body_timeout_s = body_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.sync_call_s = sync_call_s
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
        for version in CALL_VERSIONS:
            app.router.add_post(f"/api/v{version}/canister/{{canister}}/call", functools.partial(self._call, version))
        for version in QUERY_VERSIONS:
            app.router.add_post(f"/api/v{version}/canister/{{canister}}/query", self._query)
        for version in READ_STATE_VERSIONS:
            app.router.add_post(f"/api/v{version}/canister/{{canister}}/read_state", self._read_state)
            app.router.add_post(f"/api/v{version}/subnet/{{subnet}}/read_state", self._read_subnet_state)
        app.router.add_post("/api/v2/canister/{canister}/dry_run", self._dry_run)
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
        return canister_of(request.match_info["canister"])

    async def _call(self, version: int, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, self.max_envelope_bytes)
        message_id = await self._blocking(self._submit, canister, body, version > 2)
        if version == 2:
            return web.Response(status=202)
        deadline = time.monotonic() + self.sync_call_s
        while True:
            certificate = await self._blocking(self._certified_answer, message_id)
            if certificate is not None:
                return _cbor(encode_call_answer(CallAnswer("replied", certificate=certificate)))
            if time.monotonic() >= deadline:
                return web.Response(status=202, text="the call was accepted; it is not certified yet: poll read_state")
            await asyncio.sleep(0.02)

    async def _query(self, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, self.max_envelope_bytes)
        return _cbor(await self._blocking(self._run_query, canister, body))

    async def _dry_run(self, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, self.max_envelope_bytes)
        return _cbor(await self._blocking(self._run_dry_run, canister, body))

    async def _read_state(self, request: web.Request) -> web.Response:
        canister = self._canister(request)
        body = await self._body(request, _MAX_READ_STATE_BYTES)
        return _cbor(await self._blocking(self._canister_certificate, canister, body))

    async def _read_subnet_state(self, request: web.Request) -> web.Response:
        try:
            subnet = principal_from_text(request.match_info["subnet"])
        except PrincipalError as exc:
            raise InvalidSubnetId(f"the URL's subnet id: {exc}") from exc
        if subnet != self.backend.subnet_principal:
            raise InvalidSubnetId(f"this node is on subnet {self.backend.subnet_id}, not the one the URL names")
        body = await self._body(request, _MAX_READ_STATE_BYTES)
        return _cbor(await self._blocking(self._subnet_certificate, body))

    async def _status(self, request: web.Request) -> web.Response:
        return _cbor(await self._blocking(self._status_body))

    async def _metrics(self, request: web.Request) -> web.Response:
        body = await self._blocking(self.metrics.exposition)
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})

    # -- the work, on the thread pool ------------------------------------------------------------

    def _submit(self, canister: int, body: bytes, known_is_fine: bool) -> bytes:
        ingress = authenticated_call(body, canister, "call", self.backend, check_window=False)
        try:
            self.backend.submit(ingress)
        except DuplicateIngress:
            if not known_is_fine:   # a synchronous call asked again is answered with its certificate
                raise
        return ingress.message_id

    def _certified_answer(self, message_id: bytes) -> bytes | None:
        """The certificate of ``message_id``'s status once it is replied, rejected or done."""
        latest = self.backend.certified()
        if latest is None:
            return None
        certified, certification = latest
        if _status_leaf(certified, message_id) not in _TERMINAL:
            return None
        try:
            delegation = self.backend.delegation(certified)
        except DelegationUnavailable:
            return None   # a canister just moved here: the answer waits for the fresh delegation
        return certificate_for(certified, certification, [[b"request_status", message_id]], delegation)

    def _run_query(self, canister: int, body: bytes) -> bytes:
        ingress = authenticated_call(body, canister, "query", self.backend, check_window=True)
        answer = self.backend.query(canister, ingress.method_name, ingress.method_payload, ingress.source)
        return encode_query_answer(answer, ingress.message_id, self.backend)

    def _run_dry_run(self, canister: int, body: bytes) -> bytes:
        ingress = authenticated_call(body, canister, "query", self.backend, check_window=True)
        if self.backend.dry_run is None:
            raise NotCertifiedYet(f"{self.backend.node_id} does not run dry runs")
        return encode_dry_run_answer(self.backend.dry_run(canister, ingress.method_name, ingress.method_payload,
                                                          ingress.source))

    def _latest(self) -> tuple:
        latest = self.backend.certified()
        if latest is None:
            raise NotCertifiedYet(f"{self.backend.node_id} has no certified state yet")
        return latest

    def _canister_certificate(self, canister: int, body: bytes) -> bytes:
        reader, paths = authenticated_read_state(body, self.backend, canister)
        check_canister_paths(paths, canister, reader, self.backend.request_sender, self.backend.operators)
        certified, certification = self._latest()
        return encode_read_state_answer(certificate_for(certified, certification, paths, self.backend.delegation(certified)))

    def _subnet_certificate(self, body: bytes) -> bytes:
        _, paths = authenticated_read_state(body, self.backend)
        check_subnet_paths(paths)
        certified, certification = self._latest()
        return encode_read_state_answer(certificate_for(certified, certification, paths, self.backend.delegation(certified)))

    def _status_body(self) -> bytes:
        ours = {key: value for key, value in self.backend.status().items() if value is not None}
        latest = self.backend.certified()
        return encode_status({
            **ours, "root_key": self.backend.root_key(), "impl_version": ours.get("replica_version", ""),
            "replica_health_status": "healthy" if latest is not None else "starting",
        })


def _status_leaf(certified: Any, message_id: bytes) -> bytes | None:
    """The certified status of ``message_id`` (its leaf's bytes), None if it has none."""
    statuses = certified.get_subtree(b"request_status")
    entry = None if statuses is None else statuses.get_subtree(message_id)
    return None if entry is None else entry.get_leaf(b"status")
