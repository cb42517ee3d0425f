"""The other side of the ingress API: identities, signed envelopes, and why a submission is refused.

* ``identity``  a user's IC identity (Ed25519 or secp256k1) and the caller id it gives
* ``envelope``  calls and queries as IC envelopes: signing, request ids as message ids, decoding
* ``refusals``  one typed error per reason the replica refuses a submission
* ``answers``   query and dry-run answers (shared with ``replica.node.http_api``); the routes and
  the other bodies are the IC's (``replica.ic.http_interface``)
* ``agent``      submits calls over the IC's HTTP interface and verifies every certified answer
  (``certificate``, errors in ``agent_errors``); imported on its own (it brings the HTTP client)
* ``subnet_ids`` the IC ids of a registry's subnets, and its root key
* ``identities`` the user's named keys, PKCS#8 PEM files with mode 0600
* ``management`` calls to the management canister (create_canister, install_code)
"""

from .envelope import ENVELOPE_VERSION, SignedRequest, decode_signed_ingress, sign_ingress, sign_request
from .identity import Ed25519Identity, Identity, Secp256k1Identity, identity_from_seed, source_of
from .refusals import (
    BadIngressSignature, CanisterNotOnSubnet, DuplicateIngress, ExpiredIngress, IngressExpiryTooFar, IngressPoolFull,
    IngressRefused, IngressTooLarge, MalformedIngress, UnknownCanister, WrongRequestType, refusal_for,
)

__all__ = [
    "ENVELOPE_VERSION", "SignedRequest", "decode_signed_ingress", "sign_ingress", "sign_request",
    "Identity", "Ed25519Identity", "Secp256k1Identity", "identity_from_seed", "source_of",
    "IngressRefused", "MalformedIngress", "IngressTooLarge", "BadIngressSignature", "ExpiredIngress",
    "IngressExpiryTooFar", "DuplicateIngress", "UnknownCanister", "CanisterNotOnSubnet", "IngressPoolFull",
    "WrongRequestType", "refusal_for",
]
