// Envelopes as @dfinity/agent sends them: an HttpAgent whose fetch records each request
// instead of sending it, so the bodies are exactly what would go over the wire.
// stdin:  {"identities": [spec, ...] (see identities.mjs), "canister_id": text,
//          "method": text, "arg": hex, "paths": [[hex, ...], ...]}
// stdout: {"results": [{"principal": text, "der_public_key": hex,
//          "call": {"url", "body", "request_id"}, "query": {"url", "body"},
//          "read_state": {"url", "body"}}, ...]}
import { HttpAgent } from '@dfinity/agent';
import { Principal } from '@dfinity/principal';
import { makeIdentity } from './identities.mjs';
import { bytesToHex, hexToBytes, run } from './io.mjs';

class Captured extends Error {}

function recordingAgent(identity) {
  const sent = [];
  const fetch = async (url, init) => {
    sent.push({ url: new URL(String(url)).pathname, body: bytesToHex(new Uint8Array(init.body)) });
    if (String(url).endsWith('/call')) return new Response(null, { status: 202 });
    throw new Captured('recorded, not sent');
  };
  const agent = HttpAgent.createSync({
    host: 'http://127.0.0.1:9', identity, fetch, retryTimes: 0,
    verifyQuerySignatures: false,
  });
  return { agent, sent };
}

async function swallowCaptured(promise) {
  try {
    return await promise;
  } catch (error) {
    // The agent wraps what fetch threw; anything else is a real failure.
    if (!String(error?.message ?? '').includes('recorded, not sent') && !(error?.cause instanceof Captured)) {
      throw error;
    }
    return undefined;
  }
}

async function envelopesOf(spec, input) {
  const identity = await makeIdentity(spec);
  const { agent, sent } = recordingAgent(identity);
  const canisterId = Principal.fromText(input.canister_id);
  const arg = hexToBytes(input.arg);
  const { requestId } = await agent.call(canisterId, { methodName: input.method, arg, effectiveCanisterId: canisterId });
  await swallowCaptured(agent.query(canisterId, { methodName: input.method, arg, effectiveCanisterId: canisterId }));
  const paths = input.paths.map(path => path.map(hexToBytes));
  await swallowCaptured(agent.readState(canisterId, { paths }));
  if (sent.length !== 3) throw new Error(`expected 3 requests, recorded ${sent.length}`);
  return {
    principal: identity.getPrincipal().toText(),
    der_public_key: bytesToHex(identity.getPublicKey().toDer()),
    call: { ...sent[0], request_id: bytesToHex(requestId) },
    query: sent[1],
    read_state: sent[2],
  };
}

run(async input => ({ results: await Promise.all(input.identities.map(spec => envelopesOf(spec, input))) }));
