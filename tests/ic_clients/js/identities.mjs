// The agent's own identities from secret keys the caller gives, so that both sides can derive
// the same keys: Ed25519, secp256k1, and delegation chains ending in one of them.
import { DelegationChain, DelegationIdentity, Ed25519KeyIdentity } from '@dfinity/identity';
import { Secp256k1KeyIdentity } from '@dfinity/identity-secp256k1';
import { Principal } from '@dfinity/principal';
import { hexToBytes } from './io.mjs';

/**
 * spec: {"kind": "ed25519" | "secp256k1", "secret": hex}
 *     | {"kind": "delegation", "inner": spec, "chain": [{"signer": spec, "expiration_ms": n,
 *        "targets": [principal text] | null}, ...]}
 * The chain's first signer is the sender; each delegation passes to the next signer, the last
 * to `inner`, which signs the requests.
 */
export async function makeIdentity(spec) {
  switch (spec.kind) {
    case 'ed25519':
      return Ed25519KeyIdentity.fromSecretKey(hexToBytes(spec.secret));
    case 'secp256k1':
      return Secp256k1KeyIdentity.fromSecretKey(hexToBytes(spec.secret));
    case 'delegation': {
      const inner = await makeIdentity(spec.inner);
      const signers = await Promise.all(spec.chain.map(link => makeIdentity(link.signer)));
      let chain;
      for (const [i, link] of spec.chain.entries()) {
        const to = i + 1 < signers.length ? signers[i + 1].getPublicKey() : inner.getPublicKey();
        chain = await DelegationChain.create(signers[i], to, new Date(link.expiration_ms), {
          previous: chain,
          targets: link.targets ? link.targets.map(t => Principal.fromText(t)) : undefined,
        });
      }
      return DelegationIdentity.fromDelegation(inner, chain);
    }
    default:
      throw new Error(`unknown identity kind ${spec.kind}`);
  }
}
