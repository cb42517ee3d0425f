"""The Internet Computer's wire format: the pure primitives every IC agent and node speaks.

One module, one job (the interface specification's names are the code's):

* ``cbor``            strict, bounded CBOR decoding of what arrives; encoding of what we send
* ``request_id``      the representation-independent hash of a content map (request ids)
* ``principal``       principals: self-authenticating, anonymous, canister, subnet and node ids,
                      and their textual form
* ``textual_ids``     canister and subnet ids as people read and type them (every display goes
                      through it)
* ``public_keys``     DER public keys of the schemes the interface names
* ``signatures``      Ed25519 and ECDSA signature checks over domain-separated payloads
* ``identities``      Ed25519 and secp256k1 signing identities
* ``delegations``     delegation chains: signing and verifying them
* ``requests``        the content maps of call, query and read_state requests
* ``envelope``        request envelopes: signing, decoding, authenticating
* ``hash_tree_cbor``  hash trees in the IC's CBOR encoding, to and from the project's hash trees
* ``bls``             the IC's BLS variant (signatures in G1, keys in G2), threshold shares:
                      ``state_manager.bls`` (the subnet's certifications use it too), plus DER keys
* ``canister_ranges`` a subnet's canister ranges as the state tree states them (both layouts)
* ``certificate``     certificates: encoding, signing, verification with subnet delegations
* ``query_response``  query answers: the map a node signs, node signatures, the answer's CBOR body
* ``errors``          every refusal, one typed class per reason

Pure: no clocks (expiry checks take ``now``), no files, no ambient randomness (keys come
from seeds the caller supplies).
"""
