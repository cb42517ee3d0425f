"""The agent: talks to nodes' ingress HTTP APIs and trusts only what it can verify (shell).

``Agent(endpoint, identity, registry)`` signs calls with ``identity`` and sends them to
``endpoint`` (``"127.0.0.1:port"``, a list of one subnet's nodes, or ``{subnet id:
"host:port" | ["host:port", …]}`` to reach each canister's own subnet through any of its
nodes). With several nodes, a node that
gives no HTTP answer or answers 503 ``unavailable`` (or, for a query, ``not_certified_yet``)
is passed over for the next, which the agent then keeps using; a call resubmitted that way and refused as ``duplicate`` was pooled
by the node that went silent, and counts as submitted. ``registry`` (``consensus_stub.registry.Registry``, e.g. a testnet's
``registry.bin``) is the root of trust: it says which subnet's canister ranges cover a
canister and that subnet's threshold public key.

* ``submit_call`` → message id once the node pooled the call (202);
* ``request_status`` reads ``/request_status/<id>`` (and ``/time``) with ``read_state`` and
  verifies the certificate (``replica.client.certificate``: root, signature under the
  registry key, no rollback below the highest height verified for that subnet, ``/time`` at
  most ``max_certificate_age_s`` old);
* ``update_call`` = ``submit_call`` + ``wait``: polls ``request_status`` until the certified
  status is replied (the decoded reply) or rejected (``CallRejected``);
* ``request_statuses`` verifies the statuses of many messages of one subnet with one
  certificate (a load generator's poll);
* ``query_call`` runs a query (answered from the node's latest certified state; a query
  answer carries no certificate, so it is as good as the node that gave it);
* ``read_state`` → a ``VerifiedCertificate`` of the paths asked for. Every certificate is
  checked in full, except that a certification whose exact bytes verified before under the
  same key is not pairing-checked again (``_verify_signature``).

Calls to the management canister (``MANAGEMENT_CANISTER_ID``) are executed by the subnet
they are sent to, so they name it: ``subnet=`` on ``submit_call``, ``update_call``, ``wait``,
``request_status`` and ``read_state`` (for any other canister, ``subnet`` must be the one
the registry routes it to, or None). ``replica.client.management`` wraps the two calls.

Errors: ``replica.client.agent_errors`` (one class per cause), and a refused call or query
raises the node's own ``IngressRefused`` subclass (``refusal_class`` of the answer's reason).
The HTTP transport (``http_transport``) ignores proxy settings: an agent talks to the endpoint it is given.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from consensus_stub.registry import Registry
from replica.execution.codec import EncodingError, decode_payload
from state_manager.encoding import decode
from state_manager.hash_tree import Unknown, lookup_path
from state_manager.certification import Certification, SignatureMemo, verify_certification
from state_manager.messages import MANAGEMENT_CANISTER_ID, RejectCode

from .agent_errors import (
    AgentError, CallRejected, CallTimeout, CanisterNotRouted, MalformedCertificate,
    PathNotProven, ReplyUnavailable, RequestRefused, TransportError, UnexpectedAnswer,
)
from .certificate import VerifiedCertificate, verify_certificate
from .envelope import compute_message_id, sign_ingress
from .http_transport import HttpTransport, error_for_answer, json_object
from .http_wire import (
    MAX_CERTIFICATE_BYTES, MAX_PATHS, STATUS_PATH, QueryAnswer, WireError, canister_url, decode_certificate, decode_query_answer,
    encode_read_state_request,
)
from .identity import UserKey
from .refusals import ApiError, DuplicateIngress, NodeUnavailable, NotCertifiedYet

__all__ = ["Agent", "RequestStatus", "reject_code_name", "error_for_answer", "status_from_certificate"]

#: Refusals for which the next node of the subnet is asked instead (per kind of request).
_PASS_OVER: dict[str, tuple[type[ApiError], ...]] = {
    "call": (NodeUnavailable,), "read_state": (NodeUnavailable,), "query": (NodeUnavailable, NotCertifiedYet)}
#: Refusals of a status request that go away by themselves: ``wait`` asks again.
_ASK_AGAIN = (NodeUnavailable.reason, NotCertifiedYet.reason)

#: Certifications whose signature an agent remembers having verified.
_REMEMBERED_SIGNATURES = 64


def _endpoint_list(endpoints: str | Sequence[str]) -> tuple[str, ...]:
    return (endpoints,) if isinstance(endpoints, str) else tuple(endpoints)


def _reason(body: bytes) -> object:
    """The ``reason`` of a refusal answer (None if the body is not one)."""
    try:
        return json_object(body, 0).get("reason")
    except UnexpectedAnswer:
        return None


def _is(refusal: type[ApiError | DuplicateIngress], status: int, body: bytes) -> bool:
    """Whether an answer is ``refusal`` (its status, then its reason)."""
    return status == refusal.status and _reason(body) == refusal.reason

SECOND_NS = 10**9
#: Certified statuses of a message id (``unknown``: the tree proves the id absent).
STATUSES = ("unknown", "received", "processing", "replied", "rejected", "done")


def reject_code_name(code: object) -> str:
    """``CANISTER_ERROR`` for 5, ...; an unknown code as ``UNKNOWN_<n>``."""
    try:
        return RejectCode(code).name  # type: ignore[arg-type]
    except ValueError:
        return f"UNKNOWN_{code}"


@dataclass(frozen=True, slots=True)
class RequestStatus:
    """The verified status of a call: ``status`` in ``STATUSES``; the answer if it has one."""

    message_id: bytes
    status: str
    certificate: VerifiedCertificate
    reply: bytes | None = None
    reject_code: str | None = None
    reject_message: str | None = None


def status_from_certificate(certificate: VerifiedCertificate, message_id: bytes) -> RequestStatus:
    """The status of ``message_id`` that ``certificate`` proves (``unknown`` when the tree
    proves it absent)."""
    prefix = [b"request_status", message_id]
    status = certificate.lookup_value(prefix + [b"status"])
    if status is None:
        return RequestStatus(message_id, "unknown", certificate)
    if status not in STATUSES[1:]:
        raise MalformedCertificate(f"unknown request status {status!r}")
    if status == "replied":
        reply = certificate.lookup_value(prefix + [b"reply"])
        if not isinstance(reply, bytes):
            raise MalformedCertificate("a replied status without reply bytes")
        return RequestStatus(message_id, status, certificate, reply=reply)
    if status == "rejected":
        code = certificate.lookup_value(prefix + [b"reject_code"])
        message = certificate.lookup_value(prefix + [b"reject_message"])
        if type(code) is not int or not isinstance(message, str):
            raise MalformedCertificate("a rejected status without reject code and message")
        return RequestStatus(message_id, status, certificate, reject_code=reject_code_name(code),
                             reject_message=message)
    return RequestStatus(message_id, status, certificate)


class Agent:
    """A client of the ingress HTTP API (module docstring)."""

    def __init__(
        self,
        endpoint: str | Sequence[str] | Mapping[str, str | Sequence[str]],
        identity: UserKey,
        registry: Registry,
        *,
        max_certificate_age_s: float = 300.0,
        timeout_s: float = 10.0,
        ingress_ttl_s: float = 240.0,
        poll_interval_s: float = 0.05,
        max_poll_interval_s: float = 0.25,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.identity = identity
        self.registry = registry
        self.max_certificate_age_ns = int(max_certificate_age_s * SECOND_NS)
        self.ingress_ttl_ns = int(ingress_ttl_s * SECOND_NS)
        self.poll_interval_s = poll_interval_s
        self.max_poll_interval_s = max_poll_interval_s
        self._endpoints: tuple[str, ...] | dict[str, tuple[str, ...]] = (
            _endpoint_list(endpoint) if not isinstance(endpoint, Mapping)
            else {s: _endpoint_list(e) for s, e in endpoint.items()})
        if not all(self._endpoints.values() if isinstance(self._endpoints, dict) else self._endpoints):
            raise AgentError("every subnet needs at least one endpoint")
        self._clock = clock
        self._lock = threading.Lock()
        self._verified_heights: dict[str, int] = {}
        self._signatures = SignatureMemo(capacity=_REMEMBERED_SIGNATURES)
        self._http = HttpTransport(timeout_s)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- routing ------------------------------------------------------------------------------

    def subnet_of(self, canister_id: int, subnet: str | None = None) -> str:
        """The subnet whose canister ranges (latest registry version) cover ``canister_id``;
        for the management canister, ``subnet`` (the one chosen to execute the call)."""
        if canister_id == MANAGEMENT_CANISTER_ID:
            if subnet is None:
                raise CanisterNotRouted("a call to the management canister names the subnet that executes it")
            if self.registry.latest().subnet(subnet) is None:
                raise CanisterNotRouted(f"subnet {subnet} is not in the registry")
            return subnet
        routed = self.registry.latest().routing_table.lookup(canister_id)
        if routed is None:
            raise CanisterNotRouted(f"no subnet of the registry hosts canister {canister_id}")
        if subnet is not None and subnet != routed:
            raise CanisterNotRouted(f"canister {canister_id} is on subnet {routed}, not {subnet}")
        return routed

    def endpoint_for(self, canister_id: int, subnet: str | None = None) -> str:
        """The endpoint requests for ``canister_id`` go to first."""
        return self._candidates(canister_id, subnet)[0]

    def _candidates(self, canister_id: int, subnet: str | None) -> tuple[str, ...]:
        if isinstance(self._endpoints, tuple):
            return self._endpoints
        subnet = self.subnet_of(canister_id, subnet)
        if subnet not in self._endpoints:
            raise CanisterNotRouted(f"no endpoint known for subnet {subnet} (canister {canister_id})")
        return self._endpoints[subnet]

    def verified_height(self, subnet_id: str) -> int:
        """The highest certified height verified so far for ``subnet_id`` (0 before any)."""
        with self._lock:
            return self._verified_heights.get(subnet_id, 0)

    # -- calls ----------------------------------------------------------------------------------

    def _envelope(self, canister_id: int, method: str, arg: Any) -> tuple[bytes, bytes]:
        envelope = sign_ingress(self.identity, canister_id, method, arg, secrets.randbits(64),
                                self._clock() + self.ingress_ttl_ns)
        _, content, public_key, _ = decode(envelope)
        return envelope, compute_message_id(content, public_key)

    def submit_call(self, canister_id: int, method: str, arg: Any = None, *, subnet: str | None = None) -> bytes:
        """Sign and submit an update call; its message id once the node pooled it."""
        envelope, message_id = self._envelope(canister_id, method, arg)
        status, body, failed_over = self._post_any(canister_id, "call", envelope, subnet)
        if failed_over and _is(DuplicateIngress, status, body):   # pooled by the node that went silent
            return message_id
        if status != 202:
            raise error_for_answer(status, body)
        answer = json_object(body, status)
        if answer.get("message_id") != message_id.hex():
            raise UnexpectedAnswer(f"the node accepted message {answer.get('message_id')!r}, not {message_id.hex()}")
        return message_id

    def update_call(self, canister_id: int, method: str, arg: Any = None, timeout_s: float = 30.0, *,
                    subnet: str | None = None) -> Any:
        """Submit, then ``wait`` for the certified answer: the decoded reply, or ``CallRejected``."""
        return self.wait(self.submit_call(canister_id, method, arg, subnet=subnet), canister_id, timeout_s,
                         subnet=subnet)

    def wait(self, message_id: bytes, canister_id: int, timeout_s: float = 30.0, *, subnet: str | None = None) -> Any:
        """Poll ``request_status`` (every answer verified; every ``poll_interval_s``, growing by
        half up to ``max_poll_interval_s``) until replied or rejected; a 503
        (``not_certified_yet``, ``unavailable``) is retried until ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        delay = self.poll_interval_s
        while True:
            try:
                status = self.request_status(message_id, canister_id, subnet=subnet)
            except RequestRefused as refusal:
                if refusal.reason not in _ASK_AGAIN or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                continue
            if status.status == "replied":
                try:
                    return decode_payload(status.reply or b"")
                except EncodingError as exc:
                    raise UnexpectedAnswer(f"the certified reply does not decode: {exc}") from exc
            if status.status == "rejected":
                raise CallRejected(status.reject_code or "", status.reject_message or "")
            if status.status == "done":
                raise ReplyUnavailable(f"message {message_id.hex()} was answered, but its answer has expired")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CallTimeout(f"message {message_id.hex()} is {status.status} after {timeout_s} s")
            time.sleep(min(delay, remaining))
            delay = min(delay * 1.5, self.max_poll_interval_s)

    def query_answer(self, canister_id: int, method: str, arg: Any = None,
                     timeout_s: float = 10.0) -> QueryAnswer:
        """A query's answer (reply bytes or reject) and the certified height it was run at.
        A node whose latest state is not certified yet (503 ``not_certified_yet``: it has just
        executed a height, or is catching up) is passed over for the next node, and when every
        node says so the query is asked again, polling as ``wait`` does, until ``timeout_s``."""
        envelope, _ = self._envelope(canister_id, method, arg)
        deadline = time.monotonic() + timeout_s
        delay = self.poll_interval_s
        while True:
            status, body = self._post(canister_id, "query", envelope)
            if _is(NotCertifiedYet, status, body) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 1.5, self.max_poll_interval_s)
                continue
            break
        if status != 200:
            raise error_for_answer(status, body)
        try:
            return decode_query_answer(body, MAX_CERTIFICATE_BYTES)
        except WireError as exc:
            raise UnexpectedAnswer(f"query answer: {exc}") from exc

    def query_call(self, canister_id: int, method: str, arg: Any = None) -> Any:
        """The decoded reply of a query, or ``CallRejected``."""
        answer = self.query_answer(canister_id, method, arg)
        if answer.reply is None:
            raise CallRejected(answer.reject_code or "", answer.reject_message or "")
        try:
            return decode_payload(answer.reply)
        except EncodingError as exc:
            raise UnexpectedAnswer(f"the query reply does not decode: {exc}") from exc

    # -- certified state ------------------------------------------------------------------------

    def read_state(self, canister_id: int, paths: Sequence[Sequence[bytes]], *,
                   subnet: str | None = None) -> VerifiedCertificate:
        """The verified certificate of ``paths``; each is revealed or proven absent in it."""
        subnet = self.subnet_of(canister_id, subnet)
        record = self.registry.latest().subnet(subnet)
        if record is None:
            raise CanisterNotRouted(f"subnet {subnet} is not in the registry")
        status, body = self._post(canister_id, "read_state", encode_read_state_request([list(p) for p in paths]),
                                  subnet)
        if status != 200:
            raise error_for_answer(status, body)
        try:
            certificate = decode_certificate(body)
        except WireError as exc:
            raise MalformedCertificate(str(exc)) from exc
        verified = verify_certificate(certificate, subnet_id=subnet, public_key=record.public_key,
                                      now_ns=self._clock(), max_age_ns=self.max_certificate_age_ns,
                                      min_height=self.verified_height(subnet),
                                      verify_signature=self._verify_signature)
        for path in paths:
            if isinstance(lookup_path(verified.tree, list(path)), Unknown):
                raise PathNotProven(f"the certificate neither reveals nor excludes {[p.hex() for p in path]}")
        with self._lock:
            if verified.height > self._verified_heights.get(subnet, 0):
                self._verified_heights[subnet] = verified.height
        return verified

    def _verify_signature(self, certification: Certification, public_key: bytes) -> None:
        """``verify_certification`` with this agent's memo: the same certification answers
        every read at one height, and a pairing check costs milliseconds."""
        verify_certification(certification, public_key, memo=self._signatures)

    def request_status(self, message_id: bytes, canister_id: int, *, subnet: str | None = None) -> RequestStatus:
        """The verified status of ``message_id`` (sent to ``canister_id``, on ``subnet``)."""
        return self.request_statuses([message_id], canister_id, subnet=subnet)[message_id]

    def request_statuses(self, message_ids: Sequence[bytes], canister_id: int, *,
                         subnet: str | None = None) -> dict[bytes, RequestStatus]:
        """The verified statuses of up to ``MAX_PATHS - 1`` messages of one subnet, from one
        certificate (the subnet that hosts ``canister_id``, or ``subnet``)."""
        if not 1 <= len(message_ids) < MAX_PATHS:
            raise AgentError(f"ask for 1 to {MAX_PATHS - 1} message ids at once, not {len(message_ids)}")
        certificate = self.read_state(canister_id, [[b"request_status", m] for m in message_ids], subnet=subnet)
        return {message_id: status_from_certificate(certificate, message_id) for message_id in message_ids}

    def status(self, endpoint: str | None = None) -> dict:
        """The node's ``/api/v2/status`` (unverified: heights and keys as the node reports them)."""
        if endpoint is None:
            if not isinstance(self._endpoints, tuple):
                raise AgentError("name the endpoint: this agent knows one per subnet")
            endpoint = self._endpoints[0]
        status, body = self._http.request("GET", endpoint, STATUS_PATH, None)
        if status != 200:
            raise error_for_answer(status, body)
        return json_object(body, status)

    # -- HTTP -------------------------------------------------------------------------------------

    def _post(self, canister_id: int, kind: str, body: bytes, subnet: str | None = None) -> tuple[int, bytes]:
        status, answer, _ = self._post_any(canister_id, kind, body, subnet)
        return status, answer

    def _post_any(self, canister_id: int, kind: str, body: bytes,
                  subnet: str | None) -> tuple[int, bytes, bool]:
        """POST to the first node of the subnet that answers (module docstring): its status and
        body, and whether an earlier node was passed over. The node that answered goes first
        from then on. ``TransportError`` if none answers."""
        candidates = self._candidates(canister_id, subnet)
        path = canister_url(canister_id, kind)
        failure = TransportError(f"no endpoint for canister {canister_id}")
        for position, endpoint in enumerate(candidates):
            try:
                status, answer = self._http.request("POST", endpoint, path, body)
            except TransportError as exc:
                failure = exc
                continue
            if position + 1 < len(candidates) and any(_is(r, status, answer) for r in _PASS_OVER.get(kind, ())):
                continue
            if position and isinstance(self._endpoints, dict):
                routed = self.subnet_of(canister_id, subnet)
                with self._lock:
                    self._endpoints[routed] = (endpoint,) + tuple(e for e in candidates if e != endpoint)
            return status, answer, position > 0
        raise failure   # the last node gave no answer (the last node's 503 would have been returned)
