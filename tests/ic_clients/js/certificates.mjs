// Certificates as @dfinity/agent verifies them: Certificate.create with the root key and the
// canister the answer is about (delegation, canister ranges, BLS signature, /time freshness).
// stdin:  {"cases": [{"certificate": hex, "root_key": hex (DER), "canister_id": text,
//          "disable_time_verification": bool, "max_age_minutes": n}, ...]}
// stdout: {"results": [{"ok": true, "time_leb128": hex} | {"ok": false, "error": {...}}, ...]}
import { Certificate, lookupResultToBuffer } from '@dfinity/agent';
import { Principal } from '@dfinity/principal';
import { bytesToHex, describeError, hexToBytes, run } from './io.mjs';

async function verify(c) {
  try {
    const cert = await Certificate.create({
      certificate: hexToBytes(c.certificate),
      rootKey: hexToBytes(c.root_key),
      canisterId: Principal.fromText(c.canister_id),
      disableTimeVerification: Boolean(c.disable_time_verification),
      maxAgeInMinutes: c.max_age_minutes,
    });
    const time = lookupResultToBuffer(cert.lookup_path(['time']));
    return { ok: true, time_leb128: bytesToHex(time) };
  } catch (error) {
    return { ok: false, error: describeError(error) };
  }
}

run(async ({ cases }) => {
  const results = [];
  for (const c of cases) results.push(await verify(c));
  return { results };
});
