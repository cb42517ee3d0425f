"""A stand-in ingress API, just enough of the interface specification for the live client
scripts (``tests/ic_clients``) to run end to end before the real server lands: one root subnet
(no delegation) with one canister range and one node, every request authenticated with
``replica.ic.envelope``, every answer certified with ``replica.ic.certificate``.

* ``GET /api/v2/status``: ``{root_key}``.
* ``POST /api/v{2,3,4}/canister/<id>/call``: 202; the call is answered at once, its reply
  echoing its argument (what a testnet's echo canister does).
* ``POST /api/v{2,3}/canister/<id>/read_state`` and ``/api/v3/subnet/<id>/read_state``: a
  certificate of the whole (small) state: ``/time``, ``/request_status``, ``/subnet`` (key,
  flat canister ranges, node keys) and the sharded ``/canister_ranges``.
* ``POST /api/v{2,3}/canister/<id>/query``: the echo, signed by the node (``\\x0Bic-response``).

Answers carry CBOR's self-describe tag as the IC's do, unless ``self_describe=False``. It
serves 127.0.0.1 only, from a thread; ``stop()`` ends it.
"""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from replica.ic import cbor
from replica.ic.canister_ranges import encode_canister_ranges, shard_canister_ranges
from replica.ic.certificate import encode_certificate
from replica.ic.envelope import authenticate, decode_envelope
from replica.ic.errors import IcFormatError
from replica.ic.identities import Ed25519Identity
from replica.ic.principal import Principal
from replica.ic.request_id import hash_of_map, uleb128
from tests.ic.trees import tree_of

from .network import RANGES, ROOT

RESPONSE_DOMAIN = b"\x0bic-response"
NODE = Ed25519Identity.from_seed(b"stub ingress node")
_ROUTE = re.compile(r"^/api/v(\d)/(canister|subnet)/([a-z0-9-]+)/(call|query|read_state)$")


class StubIngress:
    def __init__(self, *, self_describe: bool = True) -> None:
        self.self_describe = self_describe
        self.replies: dict[bytes, bytes] = {}
        self.seen: list[str] = []   # "POST /api/v3/canister/<id>/call", in order
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-ingress", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    # -- answers ---------------------------------------------------------------------------

    def certificate(self) -> bytes:
        subnet = ROOT.principal.raw
        with self._lock:
            statuses = {rid: {b"status": b"replied", b"reply": reply} for rid, reply in self.replies.items()}
        tree = tree_of({
            b"canister_ranges": {subnet: shard_canister_ranges(RANGES)},
            b"request_status": statuses,
            b"subnet": {subnet: {b"canister_ranges": encode_canister_ranges(RANGES), b"public_key": ROOT.der_key,
                                 b"node": {NODE.principal.raw: {b"public_key": NODE.der_public_key}}}},
            b"time": uleb128(time.time_ns()),
        })
        return encode_certificate(ROOT.certify(tree))

    def signed_query(self, request_id: bytes, arg: bytes) -> dict:
        timestamp = time.time_ns()
        signed = hash_of_map({"status": "replied", "reply": {"arg": arg}, "timestamp": timestamp, "request_id": request_id})
        return {"status": "replied", "reply": {"arg": arg},
                "signatures": [{"timestamp": timestamp, "signature": NODE.sign(RESPONSE_DOMAIN + signed),
                                "identity": NODE.principal.raw}]}

    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        route = _ROUTE.match(path)
        if route is None:
            return 404, b"no such endpoint"
        _, scope, target, endpoint = route.groups()
        try:
            who = authenticate(decode_envelope(body, max_bytes=1 << 20), now_ns=time.time_ns(),
                               target=Principal.from_text(target).raw if scope == "canister" else None)
        except IcFormatError as exc:
            return 400, f"{type(exc).__name__}: {exc}".encode()
        if endpoint == "call":
            with self._lock:
                self.replies[who.request_id] = who.content.arg
            return 202, b""
        if endpoint == "query":
            return 200, cbor.encode(self.signed_query(who.request_id, who.content.arg), self_describe=self.self_describe)
        return 200, cbor.encode({"certificate": self.certificate()}, self_describe=self.self_describe)

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/cbor")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):   # noqa: N802 - the standard library's name
                stub.seen.append(f"GET {self.path}")
                if self.path == "/api/v2/status":
                    self._send(200, cbor.encode({"root_key": ROOT.der_key, "impl_version": "stub"},
                                                self_describe=stub.self_describe))
                else:
                    self._send(404, b"no such endpoint")

            def do_POST(self):   # noqa: N802
                stub.seen.append(f"POST {self.path}")
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._send(*stub.answer(self.path, body))

            def log_message(self, *args):   # quiet: the test reads ``seen``
                return None

        return Handler
