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
  asks again every ``refresh_s`` seconds.
* ``covering`` is the rule both apply before a delegation goes out with a certificate: its
  canister ranges are the ranges the certified tree it vouches for gives its own subnet.
  Canister ranges change when canisters migrate, and an agent refuses a canister its subnet's
  delegation does not cover; a delegation older (or newer) than the state it vouches for is
  refused with ``DelegationUnavailable`` (503: an agent asks again), and the fetcher asks the
  root subnet again at once instead of at its next refresh.
"""

from __future__ import annotations

import functools
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
from state_manager.hash_tree import Found, Leaf, lookup_path
from state_manager.labeled_trie import LabeledTrie
from state_manager.trie_witness import plan_paths, witness_tree

__all__ = ["delegation_paths", "delegation_of", "covering", "DelegationFetcher"]

_log = logging.getLogger(__name__)
_MAX_ANSWER_BYTES = 1 << 22
_EXPIRY_NS = 60 * 10**9
_MIN_PAUSE_S = 0.1


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


def _own_ranges(certified: LabeledTrie, subnet: bytes) -> bytes | None:
    """``/subnet/<subnet>/canister_ranges`` of ``subnet``'s own certified tree (None: the
    topology has no key for it, so the tree names no subnet)."""
    subnets = certified.get_subtree(b"subnet")
    own = None if subnets is None else subnets.get_subtree(subnet)
    return None if own is None else own.get_leaf(b"canister_ranges")


@functools.lru_cache(maxsize=8)   # the same delegation goes out with every answer for seconds
def _delegated_ranges(delegation: CertificateDelegation) -> bytes | None:
    found = lookup_path(decode_certificate(delegation.certificate).tree,
                        [b"subnet", delegation.subnet_id, b"canister_ranges"])
    return found.tree.value if isinstance(found, Found) and isinstance(found.tree, Leaf) else None


def covering(delegation: CertificateDelegation, certified: LabeledTrie) -> CertificateDelegation:
    """``delegation`` if it delegates exactly the canister ranges that ``certified`` (its
    subnet's certified tree) gives that subnet; else ``DelegationUnavailable``."""
    wanted = _own_ranges(certified, delegation.subnet_id)
    if wanted is not None and _delegated_ranges(delegation) != wanted:
        raise DelegationUnavailable("the root subnet's delegation does not cover this subnet's canister ranges "
                                    "of its latest certified state yet (a canister moved): ask again")
    return delegation


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
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delegation-fetcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)
        self._http.close()

    def current(self, certified: LabeledTrie) -> CertificateDelegation:
        """The latest delegation, ``covering`` ``certified``; when it does not, the root
        subnet is asked again now."""
        latest = self._latest
        if latest is None:
            raise DelegationUnavailable(f"no delegation from the root subnet yet: {self._error}")
        try:
            return covering(latest, certified)
        except DelegationUnavailable:
            self._wake.set()
            raise

    def _run(self) -> None:
        while not self._stop.is_set():
            fetched = self.fetch_once()
            self._stop.wait(_MIN_PAUSE_S)   # however often requests ask for a fresh one
            self._wake.wait(self.refresh_s if fetched else min(0.25, self.refresh_s))
            self._wake.clear()

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
