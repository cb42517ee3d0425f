"""The root subnet's delegation to this subnet: what lets an agent that knows only the root key
verify this subnet's certificates (docs/architecture.md, *The IC's HTTP interface*).

The interface specification, *Delegation*: a certificate of a subnet other than the root
subnet carries ``{subnet_id, certificate}``, a certificate of the root subnet revealing
``/subnet/<subnet_id>/public_key`` (the key that signs the outer certificate) and the subnet's
canister ranges, in both of the IC's layouts (``/subnet/<subnet_id>/canister_ranges`` for v2
and v3 agents, ``/canister_ranges/<subnet_id>/…`` for v4 agents).

* ``delegation_paths`` are what a delegation reveals; ``delegation_of`` makes one from the root
  subnet's certified tree and certification, where the root subnet runs in the same process.
* ``DelegationFetcher`` asks the root subnet's nodes for it over HTTP (a subnet read_state,
  anonymous) where it runs elsewhere, verifies it under the root key, keeps the latest and
  asks again every ``refresh_s`` seconds: canister ranges change when canisters migrate, and an
  agent refuses a canister its subnet's delegation does not cover.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Sequence

import httpx

from replica.client.refusals import DelegationUnavailable
from replica.ic.certificate import Certificate, CertificateDelegation, decode_certificate, encode_certificate
from replica.ic.certificate import verify_certificate
from replica.ic.envelope import encode_envelope, sign_envelope
from replica.ic.errors import IcFormatError
from replica.ic.http_interface import decode_read_state_answer, subnet_read_state_path
from replica.ic.principal import ANONYMOUS_BYTES, Principal, principal_to_text
from state_manager.certification import HEIGHT_PATH, Certification
from state_manager.labeled_trie import LabeledTrie
from state_manager.trie_witness import plan_paths, witness_tree

__all__ = ["delegation_paths", "delegation_of", "DelegationFetcher"]

_log = logging.getLogger(__name__)
_MAX_ANSWER_BYTES = 1 << 22
_EXPIRY_NS = 60 * 10**9


def delegation_paths(subnet: bytes) -> list[list[bytes]]:
    """``/subnet/<subnet>/public_key``, ``/subnet/<subnet>/canister_ranges`` and
    ``/canister_ranges/<subnet>``: what a delegation to ``subnet`` reveals."""
    return [[b"subnet", subnet, b"public_key"], [b"subnet", subnet, b"canister_ranges"],
            [b"canister_ranges", subnet]]


def delegation_of(root_certified: LabeledTrie, root_certification: Certification, subnet: bytes) -> CertificateDelegation:
    """The delegation to ``subnet`` made of the root subnet's certified tree at one height."""
    plan = plan_paths(delegation_paths(subnet) + [[b"time"], list(HEIGHT_PATH)])
    certificate = Certificate(witness_tree(root_certified, plan), root_certification.signature)
    return CertificateDelegation(subnet, encode_certificate(certificate))


class DelegationFetcher:
    """The latest delegation to ``subnet`` from the root subnet's nodes (module docstring).
    ``endpoints()`` says where the root subnet's nodes listen (``"127.0.0.1:port"``)."""

    def __init__(self, subnet: bytes, root_subnet: bytes, root_key: bytes, endpoints: Callable[[], Sequence[str]], *,
                 refresh_s: float = 5.0, timeout_s: float = 5.0, clock: Callable[[], int] = time.time_ns) -> None:
        self.subnet, self.root_subnet, self.root_key = subnet, root_subnet, root_key
        self.refresh_s = refresh_s
        self._endpoints = endpoints
        self._clock = clock
        self._http = httpx.Client(timeout=timeout_s, trust_env=False)
        self._latest: CertificateDelegation | None = None
        self._error = "not asked yet"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delegation-fetcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)
        self._http.close()

    def current(self) -> CertificateDelegation:
        latest = self._latest
        if latest is None:
            raise DelegationUnavailable(f"no delegation from the root subnet yet: {self._error}")
        return latest

    def _run(self) -> None:
        while not self._stop.is_set():
            fetched = self.fetch_once()
            self._stop.wait(self.refresh_s if fetched else min(0.25, self.refresh_s))

    def fetch_once(self) -> bool:
        """Ask each root node in turn; keep the first delegation that verifies."""
        content = {"request_type": "read_state", "sender": ANONYMOUS_BYTES, "paths": delegation_paths(self.subnet),
                   "ingress_expiry": self._clock() + _EXPIRY_NS}
        body = encode_envelope(sign_envelope(content, None))
        path = subnet_read_state_path(2, principal_to_text(self.root_subnet))
        for endpoint in self._endpoints():
            try:
                answer = self._http.post(f"http://{endpoint}{path}", content=body,
                                         headers={"Content-Type": "application/cbor"})
                if answer.status_code != 200:
                    self._error = f"{endpoint} answered {answer.status_code}: {answer.text[:200]}"
                    continue
                certificate = decode_read_state_answer(answer.content, _MAX_ANSWER_BYTES)
                verify_certificate(decode_certificate(certificate), root_key=self.root_key)
            except (httpx.HTTPError, IcFormatError) as exc:
                self._error = f"{endpoint}: {exc}"
                continue
            self._latest = CertificateDelegation(self.subnet, certificate)
            return True
        if self._latest is None:
            _log.debug("subnet %s: no delegation yet (%s)", Principal(self.subnet), self._error)
        return False
