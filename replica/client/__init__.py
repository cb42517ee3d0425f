"""The other side of the ingress API: identities, signed envelopes, and why a submission is refused.

* ``identity``  a user's Ed25519 key and self-authenticating id
* ``envelope``  signed call envelopes: message ids, signing, strict decoding
* ``refusals``  one typed error per reason the replica refuses a submission
* ``answers``   query and dry-run answers (shared with ``replica.node.http_api``); the routes and
  the other bodies are the IC's (``replica.ic.http_interface``)
* ``agent``      submits calls over the IC's HTTP interface and verifies every certified answer
  (``certificate``, errors in ``agent_errors``); imported on its own (it brings the HTTP client)
* ``subnet_ids`` the IC ids of a registry's subnets, and its root key
* ``identities`` the user's named Ed25519 keys, PEM files with mode 0600
* ``management`` calls to the management canister (create_canister, install_code)
"""

from .envelope import ENVELOPE_VERSION, compute_message_id, decode_signed_ingress, sign_ingress
from .identity import UserKey, source_of
from .refusals import (
    BadIngressSignature, CanisterNotOnSubnet, DuplicateIngress, ExpiredIngress, IngressExpiryTooFar, IngressPoolFull,
    IngressRefused, IngressTooLarge, MalformedIngress, UnknownCanister, refusal_for,
)

__all__ = [
    "ENVELOPE_VERSION", "compute_message_id", "decode_signed_ingress", "sign_ingress", "UserKey", "source_of",
    "IngressRefused", "MalformedIngress", "IngressTooLarge", "BadIngressSignature", "ExpiredIngress",
    "IngressExpiryTooFar", "DuplicateIngress", "UnknownCanister", "CanisterNotOnSubnet", "IngressPoolFull",
    "refusal_for",
]
