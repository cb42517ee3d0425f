"""The agent: talks to nodes' ingress HTTP APIs and trusts only what it can verify (shell).

``Agent(endpoint, identity, registry)`` signs calls with ``identity`` and sends them to
``endpoint`` (``"127.0.0.1:port"``, a list of one subnet's nodes, or ``{subnet id:
"host:port" | ["host:port", …]}`` to reach each canister's own subnet through any of its
nodes). ``registry`` (``consensus_stub.registry.Registry``, e.g. a testnet's ``registry.bin``)
is the root of trust: it says which subnet's canister ranges cover a canister and that
subnet's threshold public key.

Failover, the same for every kind of request (call, query, read_state, status): a node that
gives no HTTP answer (connection refused or reset, a timeout) or answers a 5xx is passed over
for the subnet's next node, and the node that answered is asked first from then on
(``replica.client.endpoint_book``); so is a node whose read_state answer is certified below
a height the agent verified already (it is catching up, e.g. after a restart). When no node
gave an answer, the agent re-reads where the nodes are (``endpoints_source``, and a newer
registry from ``registry_source``: a testnet directory, ``agent_for_testnet``) and asks them
all again, pausing as ``wait`` does, for up to ``failover_s`` seconds (a query: its
``timeout_s``). Only an answer below 500 ends the
asking, or a node's typed ingress refusal among the 5xx (``pool_full``: the node refused the
call, and every node said so). A call resubmitted that way and refused as ``duplicate`` was
pooled by a node that went silent, and counts as submitted; a call no node confirmed raises
``SubmissionUncertain`` with its message id (it may have been pooled: ask for its status).

* ``submit_call`` → message id once the node pooled the call (202);
* ``request_status`` reads ``/request_status/<id>`` (and ``/time``) with ``read_state`` and
  verifies the certificate (``replica.client.certificate``: root, signature under the
  registry key, no rollback below the highest height verified for that subnet, ``/time`` at
  most ``max_certificate_age_s`` old);
* ``update_call`` = ``submit_call`` + ``wait``: polls ``request_status`` until the certified
  status is replied (the decoded reply) or rejected (``CallRejected``);
* ``request_statuses`` verifies the statuses of many messages of one subnet with one
  certificate (a load generator's poll);
* ``query_call`` runs a query (answered from the node's latest certified state). A query
  answer carries no certificate but the answering node's signature, checked under the node key
  the registry lists for a node of the canister's subnet (``QueryAnswerInvalid`` otherwise): it
  is as good as that node;
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
from replica.execution.codec import EncodingError, decode_reply, encode_value
from replica.execution.dry_run import DryRunResult
from replica.ic.envelope import encode_envelope, sign_envelope
from replica.ic.errors import IcFormatError
from replica.ic.http_interface import (
    STATUS_PATH, canister_path, decode_call_answer, decode_read_state_answer, decode_status,
)
from replica.ic.principal import Principal, canister_principal, principal_to_text
from replica.ic.query_response import decode_query_response, verify_query_response
from replica.ic.request_id import decode_uleb128, request_id
from replica.ic.textual_ids import canister_text
from state_manager.hash_tree import Unknown, lookup_path
from state_manager.messages import MANAGEMENT_CANISTER_ID, RejectCode

from .agent_errors import (
    AgentError, CallRejected, CallTimeout, CanisterNotRouted, MalformedCertificate, PathNotProven,
    QueryAnswerInvalid, ReplyUnavailable, RequestRefused, SubmissionUncertain, TransportError, UnexpectedAnswer,
)
from .answers import QueryAnswer, decode_dry_run_answer, query_answer_of
from .certificate import SignatureCache, VerifiedCertificate, verify_answer_certificate
from .endpoint_book import EndpointBook, Endpoints
from .envelope import CALL, QUERY, canister_id_of, sign_request
from .identity import Identity
from .subnet_ids import subnet_principal_of
from .http_transport import MAX_ANSWER_BYTES, Answer, HttpTransport, error_for_answer
from .refusals import ApiError, DuplicateIngress, IngressRefused, refusal_class

__all__ = ["Agent", "RequestStatus", "reject_code_name", "error_for_answer", "status_from_certificate"]

#: At most this many request ids in one read_state (an agent polling its calls).
MAX_PATHS = 64
#: The least time between two re-readings of where the nodes are.
_REFRESH_INTERVAL_S = 0.25


def _passed_over(status: int) -> bool:
    """An answer for which the subnet's next node is asked: a 5xx (the node is failing,
    restarting, not certified yet or full)."""
    return status >= 500


def _behind(answer: Answer, min_height: int) -> bool:
    """Whether a read_state answer is certified below ``min_height`` (one that does not decode
    is not: its verification says what is wrong with it)."""
    try:
        certificate = decode_read_state_answer(answer.body, MAX_ANSWER_BYTES)
        return _unverified_height(certificate) < min_height
    except (IcFormatError, AgentError):
        return False


def _unverified_height(certificate: bytes) -> int:
    from replica.ic.certificate import decode_certificate   # noqa: PLC0415 - only for the catching-up check
    tree = decode_certificate(certificate).tree
    return VerifiedCertificate("", 0, 0, tree).lookup_value([b"metadata", b"height"]) or 0


def _is(refusal: type[ApiError | DuplicateIngress], answer: Answer) -> bool:
    """Whether an answer is ``refusal`` (its status, then its reason)."""
    return answer.status == refusal.status and answer.reason == refusal.reason

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


def _text(raw: bytes | None, what: str) -> str:
    try:
        return (raw or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedCertificate(f"{what} is not UTF-8 text") from exc


def status_from_certificate(certificate: VerifiedCertificate, message_id: bytes) -> RequestStatus:
    """The status of ``message_id`` that ``certificate`` proves (``unknown`` when the tree
    proves it absent), its leaves as the interface specification encodes them (text, the
    reply blob, a LEB128 reject code)."""
    prefix = [b"request_status", message_id]
    raw = certificate.lookup(prefix + [b"status"])
    if raw is None:
        return RequestStatus(message_id, "unknown", certificate)
    status = _text(raw, "a request status")
    if status not in STATUSES[1:]:
        raise MalformedCertificate(f"unknown request status {status!r}")
    if status == "replied":
        reply = certificate.lookup(prefix + [b"reply"])
        if reply is None:
            raise MalformedCertificate("a replied status without reply bytes")
        return RequestStatus(message_id, status, certificate, reply=reply)
    if status == "rejected":
        code, message = certificate.lookup(prefix + [b"reject_code"]), certificate.lookup(prefix + [b"reject_message"])
        if code is None or message is None:
            raise MalformedCertificate("a rejected status without reject code and message")
        try:
            number = decode_uleb128(code)
        except IcFormatError as exc:
            raise MalformedCertificate(f"a reject code that is not a LEB128 nat: {exc}") from exc
        return RequestStatus(message_id, status, certificate, reject_code=reject_code_name(number),
                             reject_message=_text(message, "a reject message"))
    return RequestStatus(message_id, status, certificate)


class Agent:
    """A client of the ingress HTTP API (module docstring)."""

    def __init__(
        self,
        endpoint: Endpoints,
        identity: Identity | None,
        registry: Registry,
        *,
        max_certificate_age_s: float = 300.0,
        timeout_s: float = 10.0,
        ingress_ttl_s: float = 240.0,
        poll_interval_s: float = 0.05,
        max_poll_interval_s: float = 0.25,
        failover_s: float = 10.0,
        endpoints_source: Callable[[], Endpoints | None] | None = None,
        registry_source: Callable[[], Registry | None] | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.identity = identity
        self.registry = registry
        self.max_certificate_age_ns = int(max_certificate_age_s * SECOND_NS)
        self.ingress_ttl_ns = int(ingress_ttl_s * SECOND_NS)
        self.poll_interval_s = poll_interval_s
        self.max_poll_interval_s = max_poll_interval_s
        self.failover_s = failover_s
        try:
            self._book = EndpointBook(endpoint, endpoints_source)
        except ValueError as exc:
            raise AgentError(str(exc)) from exc
        self._registry_source = registry_source
        self._refreshed_at = float("-inf")
        self._clock = clock
        self._lock = threading.Lock()
        self._verified_heights: dict[str, int] = {}
        self._cache = SignatureCache()
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
            raise CanisterNotRouted(f"no subnet of the registry hosts canister {canister_text(canister_id)}")
        if subnet is not None and subnet != routed:
            raise CanisterNotRouted(f"canister {canister_text(canister_id)} is on subnet {routed}, not {subnet}")
        return routed

    def endpoint_for(self, canister_id: int, subnet: str | None = None) -> str:
        """The endpoint requests for ``canister_id`` go to first."""
        return self._candidates(self._book_key(canister_id, subnet))[0]

    def _book_key(self, canister_id: int, subnet: str | None) -> str | None:
        """The subnet whose nodes answer for ``canister_id`` (None: this agent knows one list)."""
        return self.subnet_of(canister_id, subnet) if self._book.per_subnet else None

    def _candidates(self, key: str | None) -> tuple[str, ...]:
        candidates = self._book.candidates(key)
        if candidates is None:
            raise CanisterNotRouted(f"no endpoint known for subnet {key}")
        return candidates

    def verified_height(self, subnet_id: str) -> int:
        """The highest certified height verified so far for ``subnet_id`` (0 before any)."""
        with self._lock:
            return self._verified_heights.get(subnet_id, 0)

    # -- calls ----------------------------------------------------------------------------------

    def _signed(self, content: dict[str, Any]) -> tuple[bytes, bytes]:
        """``content`` sent by this agent's identity (``None``: the anonymous sender), expiring
        after ``ingress_ttl_s``: the envelope and its request id."""
        sender = Principal.anonymous() if self.identity is None else self.identity.principal
        content = {**content, "sender": sender.raw, "ingress_expiry": self._clock() + self.ingress_ttl_ns,
                   "nonce": secrets.token_bytes(8)}
        return encode_envelope(sign_envelope(content, self.identity)), request_id(content)

    def _envelope(self, canister_id: int, method: str, arg: Any, request_type: str = CALL) -> tuple[bytes, bytes]:
        """A signed call or query of ``method(arg)`` and its request id."""
        signed = sign_request(self.identity, canister_id, method, encode_value(arg), nonce=secrets.token_bytes(8),
                              expiry=self._clock() + self.ingress_ttl_ns, request_type=request_type)
        return signed.envelope, signed.message_id

    def submit_call(self, canister_id: int, method: str, arg: Any = None, *, subnet: str | None = None) -> bytes:
        """Sign and submit an update call (``/api/v2/…/call``); its request id once the node pooled it."""
        envelope, message_id = self._envelope(canister_id, method, arg)
        self._submit(canister_id, envelope, message_id, subnet, version=2)
        return message_id

    def _submit(self, canister_id: int, envelope: bytes, message_id: bytes, subnet: str | None, *,
                version: int) -> Answer:
        """POST a call envelope with failover: the answer that accepted it (202, or a v3 200)."""
        try:
            answer, failed_over = self._post_any(canister_id, "call", envelope, subnet, version=version)
        except TransportError as exc:
            raise SubmissionUncertain(f"no node confirmed message {message_id.hex()}: {exc}", message_id) from exc
        if failed_over and _is(DuplicateIngress, answer):   # pooled by the node that went silent
            return Answer(202, b"")
        if answer.status not in (200, 202) or (answer.status == 200 and version == 2):
            error = error_for_answer(answer) if answer.status >= 400 else UnexpectedAnswer(
                f"a call answered {answer.status}")
            if _passed_over(answer.status) and not isinstance(error, IngressRefused):
                raise SubmissionUncertain(f"no node confirmed message {message_id.hex()}: {error}",
                                          message_id) from error
            raise error
        return answer

    def update_call(self, canister_id: int, method: str, arg: Any = None, timeout_s: float = 30.0, *,
                    subnet: str | None = None) -> Any:
        """A synchronous call (``/api/v3/…/call``): the node answers with the certificate of
        the call's status once it is certified, and the agent verifies it; if the node does
        not wait that long (202), ``wait`` polls for it. The decoded reply, or ``CallRejected``."""
        envelope, message_id = self._envelope(canister_id, method, arg)
        answer = self._submit(canister_id, envelope, message_id, subnet, version=3)
        if answer.status == 200:
            try:
                call_answer = decode_call_answer(answer.body, MAX_ANSWER_BYTES)
            except IcFormatError as exc:
                raise UnexpectedAnswer(f"a call answer: {exc}") from exc
            if call_answer.status != "replied" or call_answer.certificate is None:
                raise CallRejected(reject_code_name(call_answer.reject_code), call_answer.reject_message or "")
            routed = self.subnet_of(canister_id, subnet)
            verified = self._verify(call_answer.certificate, canister_id, routed)
            status = status_from_certificate(verified, message_id)
            if status.status in ("replied", "rejected", "done"):
                return self._outcome(status)
        return self.wait(message_id, canister_id, timeout_s, subnet=subnet)

    @staticmethod
    def _outcome(status: RequestStatus) -> Any:
        """The decoded reply of a terminal status; ``CallRejected`` or ``ReplyUnavailable``."""
        if status.status == "replied":
            try:
                return decode_reply(status.reply or b"")
            except EncodingError as exc:
                raise UnexpectedAnswer(f"the certified reply does not decode: {exc}") from exc
        if status.status == "rejected":
            raise CallRejected(status.reject_code or "", status.reject_message or "")
        raise ReplyUnavailable(f"message {status.message_id.hex()} was answered, but its answer has expired")

    def wait(self, message_id: bytes, canister_id: int, timeout_s: float = 30.0, *, subnet: str | None = None) -> Any:
        """Poll ``request_status`` (every answer verified; every ``poll_interval_s``, growing by
        half up to ``max_poll_interval_s``) until replied or rejected; no answer from any node,
        or a 5xx from every one (``not_certified_yet``, ``unavailable``), is asked again
        until ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        delay = self.poll_interval_s
        while True:
            try:
                status = self.request_status(message_id, canister_id, subnet=subnet)
            except (TransportError, RequestRefused) as failure:
                if (isinstance(failure, RequestRefused) and not _passed_over(failure.status)
                        or time.monotonic() > deadline):
                    raise
                time.sleep(delay)
                continue
            if status.status in ("replied", "rejected", "done"):
                return self._outcome(status)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CallTimeout(f"message {message_id.hex()} is {status.status} after {timeout_s} s")
            time.sleep(min(delay, remaining))
            delay = min(delay * 1.5, self.max_poll_interval_s)

    def query_answer(self, canister_id: int, method: str, arg: Any = None,
                     timeout_s: float = 10.0) -> QueryAnswer:
        """A query's answer (reply bytes or reject) and the certified height it was run at.
        A node whose latest state is not certified yet (503 ``not_certified_yet``: it has just
        executed a height, or is catching up) is passed over for the next node like one that
        does not answer, and when every node says so the query is asked again (failover, in
        the module docstring) until ``timeout_s``."""
        envelope, request_id = self._envelope(canister_id, method, arg, QUERY)
        answer = self._unreplicated(canister_id, "query", envelope, timeout_s)
        try:
            response = decode_query_response(answer.body, max_bytes=MAX_ANSWER_BYTES)
            verify_query_response(response, request_id, self._node_keys(self.subnet_of(canister_id)))
        except IcFormatError as exc:
            raise QueryAnswerInvalid(f"a query answer of canister {canister_text(canister_id)}: {exc}") from exc
        return query_answer_of(response.outcome)

    def _node_keys(self, subnet: str) -> dict[Principal, bytes]:
        """The signing keys of ``subnet``'s nodes by node id, as the agent's registry lists them."""
        return {Principal(node.node_principal): node.signing_key for node in self.registry.latest().nodes_of(subnet)}

    def query_call(self, canister_id: int, method: str, arg: Any = None) -> Any:
        """The decoded reply of a query, or ``CallRejected``."""
        answer = self.query_answer(canister_id, method, arg)
        if answer.reply is None:
            raise CallRejected(answer.reject_code or "", answer.reject_message or "")
        try:
            return decode_reply(answer.reply)
        except EncodingError as exc:
            raise UnexpectedAnswer(f"the query reply does not decode: {exc}") from exc

    def dry_run(self, canister_id: int, method: str, arg: Any = None, timeout_s: float = 10.0) -> DryRunResult:
        """An update call executed on a copy of the latest certified state of a node of the
        canister's subnet and thrown away (``replica.execution.dry_run``): its reply or reject,
        instructions, the calls it would make and the state paths it would change. Not
        certified (nothing of it is committed): as trustworthy as the node that answers."""
        envelope, _ = self._envelope(canister_id, method, arg, QUERY)
        answer = self._unreplicated(canister_id, "dry_run", envelope, timeout_s)
        try:
            return decode_dry_run_answer(answer.body, MAX_ANSWER_BYTES)
        except IcFormatError as exc:
            raise UnexpectedAnswer(f"a dry run answer: {exc}") from exc

    def _unreplicated(self, canister_id: int, kind: str, envelope: bytes, timeout_s: float) -> Answer:
        """POST a signed ``kind`` request (a query or a dry run: answered by one node, nothing
        committed) with failover; its 200 answer."""
        answer, _ = self._post_any(canister_id, kind, envelope, None, patience_s=timeout_s)
        if answer.status != 200:
            raise error_for_answer(answer)
        return answer

    # -- certified state ------------------------------------------------------------------------

    def read_state(self, canister_id: int, paths: Sequence[Sequence[bytes]], *,
                   subnet: str | None = None) -> VerifiedCertificate:
        """The verified certificate of ``paths``; each is revealed or proven absent in it."""
        subnet = self.subnet_of(canister_id, subnet)
        min_height = self.verified_height(subnet)
        envelope, _ = self._signed({"request_type": "read_state", "paths": [list(p) for p in paths]})
        answer, _ = self._post_any(canister_id, "read_state", envelope, subnet,
                                   behind=lambda a: _behind(a, min_height))
        if answer.status != 200:
            raise error_for_answer(answer)
        try:
            certificate = decode_read_state_answer(answer.body, MAX_ANSWER_BYTES)
        except IcFormatError as exc:
            raise MalformedCertificate(str(exc)) from exc
        verified = self._verify(certificate, canister_id, subnet, min_height)
        for path in paths:
            if isinstance(lookup_path(verified.tree, list(path)), Unknown):
                raise PathNotProven(f"the certificate neither reveals nor excludes {[p.hex() for p in path]}")
        return verified

    def _verify(self, certificate: bytes, canister_id: int, subnet: str, min_height: int = 0) -> VerifiedCertificate:
        """``certificate`` verified for ``canister_id`` on ``subnet`` (``replica.client.certificate``),
        with this agent's root key, registry and cache; the subnet's verified height raised."""
        record = self.registry.latest()
        subnet_record, root = record.subnet(subnet), record.subnets[0]
        if subnet_record is None:
            raise CanisterNotRouted(f"subnet {subnet} is not in the registry")
        with self._lock:
            verified = verify_answer_certificate(
                certificate, subnet_id=subnet, subnet_principal=subnet_principal_of(record, subnet),
                is_root=subnet == root.subnet_id, root_key=root.public_key, subnet_key=subnet_record.public_key,
                canister=None if canister_id == MANAGEMENT_CANISTER_ID else canister_principal(canister_id),
                now_ns=self._clock(), max_age_ns=self.max_certificate_age_ns,
                min_height=max(min_height, 0), cache=self._cache)
            if verified.height > self._verified_heights.get(subnet, 0):
                self._verified_heights[subnet] = verified.height
        return verified

    def request_status(self, message_id: bytes, canister_id: int, *, subnet: str | None = None) -> RequestStatus:
        """The verified status of ``message_id`` (sent to ``canister_id``, on ``subnet``)."""
        return self.request_statuses([message_id], canister_id, subnet=subnet)[message_id]

    def request_statuses(self, message_ids: Sequence[bytes], canister_id: int, *,
                         subnet: str | None = None) -> dict[bytes, RequestStatus]:
        """The verified statuses of up to ``MAX_PATHS - 1`` messages of one subnet, from one
        certificate (the subnet that hosts ``canister_id``, or ``subnet``); each must have been
        sent by this agent's identity (a node shows a request's status to its sender only)."""
        if not 1 <= len(message_ids) < MAX_PATHS:
            raise AgentError(f"ask for 1 to {MAX_PATHS - 1} message ids at once, not {len(message_ids)}")
        certificate = self.read_state(canister_id, [[b"request_status", m] for m in message_ids], subnet=subnet)
        return {message_id: status_from_certificate(certificate, message_id) for message_id in message_ids}

    def status(self, endpoint: str | None = None, *, subnet: str | None = None) -> dict:
        """``/api/v2/status`` (unverified: the root key, heights and ids as the node reports
        them) of the node ``endpoint``, or of the first of ``subnet``'s nodes that answers
        (failover; no ``subnet`` needed when the agent knows one list)."""
        if endpoint is not None:
            answer = self._http.request("GET", endpoint, STATUS_PATH, None)
        else:
            if self._book.per_subnet and subnet is None:
                raise AgentError("name the endpoint or the subnet: this agent knows nodes of several subnets")
            answer, _ = self._exchange(subnet if self._book.per_subnet else None, "GET", STATUS_PATH, None,
                                       self.failover_s)
        if answer.status != 200:
            raise error_for_answer(answer)
        try:
            return decode_status(answer.body)
        except IcFormatError as exc:
            raise UnexpectedAnswer(f"a status answer: {exc}") from exc

    # -- HTTP -------------------------------------------------------------------------------------

    def _post_any(self, canister_id: int, kind: str, body: bytes, subnet: str | None, *,
                  patience_s: float | None = None, version: int = 2,
                  behind: Callable[[Answer], bool] | None = None) -> tuple[Answer, bool]:
        """POST ``body`` to ``canister_id``'s ``kind`` route on its subnet's nodes (failover)."""
        path = canister_path(version, principal_to_text(canister_id_of(canister_id).raw), kind)
        return self._exchange(self._book_key(canister_id, subnet), "POST", path, body,
                              self.failover_s if patience_s is None else patience_s, behind)

    def _exchange(self, key: str | None, method: str, path: str, body: bytes | None, patience_s: float,
                  behind: Callable[[Answer], bool] | None = None) -> tuple[Answer, bool]:
        """The first answer of ``key``'s nodes that ends the asking (failover, in the module
        docstring), and whether a node was passed over before it. ``TransportError`` if no
        node answered within ``patience_s``; the last 5xx if every node that answered said
        one. A 200 that ``behind`` says is older than what this agent verified already (a
        node catching up after a restart) is passed over like a 5xx, and is the answer only
        if every node's is."""
        deadline = time.monotonic() + patience_s
        delay = self.poll_interval_s
        passed_over = False
        while True:
            failure: TransportError | None = None
            last: Answer | None = None
            refused: Answer | None = None
            for endpoint in self._candidates(key):
                try:
                    answer = self._http.request(method, endpoint, path, body)
                except TransportError as exc:
                    failure, passed_over = exc, True
                    continue
                if not _passed_over(answer.status) and not (
                        answer.status == 200 and behind is not None and behind(answer)):
                    self._book.prefer(key, endpoint)
                    if failure is not None:   # a node went silent: it may be back elsewhere
                        self._refresh()
                    return answer, passed_over
                last, passed_over = answer, True
                if answer.reason and refusal_class(answer.reason) is not None:
                    refused = last   # a node's own refusal of the call (pool_full)
            remaining = deadline - time.monotonic()
            if refused is not None or remaining <= 0:
                if refused is not None or last is not None:
                    return (refused or last), passed_over   # type: ignore[return-value]
                raise failure or TransportError(f"no endpoint answered {path}")
            time.sleep(min(delay, remaining))
            delay = min(delay * 1.5, self.max_poll_interval_s)
            self._refresh()

    def _refresh(self) -> None:
        """Re-read where the nodes are and a newer registry, if this agent has sources for
        them (at most every ``_REFRESH_INTERVAL_S``)."""
        with self._lock:
            if time.monotonic() - self._refreshed_at < _REFRESH_INTERVAL_S:
                return
            self._refreshed_at = time.monotonic()
        if self._registry_source is not None:
            registry = self._registry_source()
            if registry is not None and registry.latest_version > self.registry.latest_version:
                self.registry = registry
        self._book.refresh()
