// @dfinity/agent 3.4.3 against a running testnet's ingress API, printing one JSON document.
//
//   node tests/ic_clients/js/live.mjs <ingress URL> --canister <id> --method <name> --arg <hex>
//        [--query-method <name>] [--query-arg <hex>] [--secret <hex: Ed25519 key>]
//        [--no-verify-query-signatures] [--timeout-ms <n>]
//
// The URL may come from $IC_INGRESS_URL instead. What it does, each step reported on its own:
//   status         GET /api/v2/status; agent.fetchRootKey() takes root_key from it
//   update         agent.call (POST /api/v3/canister/<id>/call); a certificate in the answer is
//                  verified with Certificate.create, else pollForResponse reads
//                  /request_status/<id> (POST /api/v2/canister/<id>/read_state) until done
//   query          agent.query (POST /api/v2/canister/<id>/query); by default the agent checks
//                  the node signatures, reading node keys with read_state of /subnet
//   request_status read_state of /request_status/<request id> once more, certificate verified
// Exit status 0 when every step succeeded, 1 otherwise.
import { parseArgs } from 'node:util';
import { Certificate, HttpAgent, lookupResultToBuffer, pollForResponse, polling } from '@dfinity/agent';
import { Ed25519KeyIdentity } from '@dfinity/identity';
import { Principal } from '@dfinity/principal';
import { bytesToHex, describeError, hexToBytes, writeOutput } from './io.mjs';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    canister: { type: 'string' }, method: { type: 'string' }, arg: { type: 'string', default: '' },
    'query-method': { type: 'string' }, 'query-arg': { type: 'string' }, secret: { type: 'string' },
    'no-verify-query-signatures': { type: 'boolean', default: false },
    'timeout-ms': { type: 'string', default: '60000' },
  },
});
const url = positionals[0] ?? process.env.IC_INGRESS_URL;
if (!url || !values.canister || !values.method) {
  process.stderr.write('usage: live.mjs <ingress URL> --canister <id> --method <name> [--arg <hex>] ...\n');
  process.exit(2);
}
const timeoutMs = Number(values['timeout-ms']);
const canisterId = Principal.fromText(values.canister);
const utf8 = text => new TextEncoder().encode(text);
const text = bytes => (bytes ? new TextDecoder().decode(bytes) : null);

async function step(report, name, body) {
  try {
    report[name] = { ok: true, ...(await body()) };
  } catch (error) {
    report[name] = { ok: false, error: describeError(error) };
  }
}

function statusOf(certificate, requestId) {
  const path = [utf8('request_status'), requestId];
  const leaf = label => lookupResultToBuffer(certificate.lookup_path([...path, utf8(label)]));
  const reject = leaf('reject_code');
  return {
    status: text(leaf('status')), reply: leaf('reply') ? bytesToHex(leaf('reply')) : null,
    reject_code: reject ? reject[0] : null, reject_message: text(leaf('reject_message')),
    time_leb128: bytesToHex(lookupResultToBuffer(certificate.lookup_path(['time']))),
  };
}

async function main() {
  const identity = values.secret ? Ed25519KeyIdentity.fromSecretKey(hexToBytes(values.secret)) : Ed25519KeyIdentity.generate();
  const agent = HttpAgent.createSync({
    host: url, identity, shouldFetchRootKey: true, retryTimes: 1,
    verifyQuerySignatures: !values['no-verify-query-signatures'],
  });
  const report = { url, principal: identity.getPrincipal().toText(), canister_id: canisterId.toText() };
  await step(report, 'status', async () => {
    const status = await agent.status();
    await agent.fetchRootKey();
    return { root_key: bytesToHex(agent.rootKey), fields: Object.keys(status) };
  });
  let requestId;
  await step(report, 'update', async () => {
    const sent = await agent.call(canisterId, {
      methodName: values.method, arg: hexToBytes(values.arg), effectiveCanisterId: canisterId,
    });
    requestId = sent.requestId;
    const out = { request_id: bytesToHex(requestId), http_status: sent.response.status, body_status: sent.response.body?.status ?? null };
    if (sent.response.body?.certificate) {
      const certificate = await Certificate.create({ certificate: sent.response.body.certificate, rootKey: agent.rootKey, canisterId, agent });
      const found = statusOf(certificate, requestId);
      if (found.status === 'replied' || found.status === 'rejected') {
        return { ...out, via: 'call answer certificate', certificate_verified: true, ...found };
      }
    }
    if (sent.response.body && !sent.response.body.certificate && sent.response.status === 200) {
      return { ...out, via: 'call answer without certificate', answer: sent.response.body };
    }
    const strategy = polling.strategy.chain(polling.strategy.backoff(200, 1.5), polling.strategy.timeout(timeoutMs));
    try {
      const { reply, certificate } = await pollForResponse(agent, canisterId, requestId, { strategy });
      return { ...out, via: 'polled read_state', certificate_verified: true, ...statusOf(certificate, requestId), reply: bytesToHex(reply) };
    } catch (error) {
      return { ...out, via: 'polled read_state', certificate_verified: !String(error?.code?.constructor?.name).startsWith('Certificate'), poll_error: describeError(error) };
    }
  });
  await step(report, 'query', async () => {
    const answer = await agent.query(canisterId, {
      methodName: values['query-method'] ?? values.method,
      arg: hexToBytes(values['query-arg'] ?? values.arg), effectiveCanisterId: canisterId,
    });
    return {
      status: answer.status, reply: answer.reply ? bytesToHex(answer.reply.arg) : null,
      reject_code: answer.reject_code ?? null, reject_message: answer.reject_message ?? null,
      signatures: (answer.signatures ?? []).length,
      signatures_verified: !values['no-verify-query-signatures'],
    };
  });
  await step(report, 'request_status', async () => {
    if (!requestId) throw new Error('no request id: the update step failed before sending');
    const response = await agent.readState(canisterId, { paths: [[utf8('request_status'), requestId]] });
    const certificate = await Certificate.create({ certificate: response.certificate, rootKey: agent.rootKey, canisterId, agent });
    return { certificate_verified: true, ...statusOf(certificate, requestId) };
  });
  return report;
}

const timer = setTimeout(() => {
  writeOutput({ error: { name: 'Timeout', code: null, message: `no result within ${2 * timeoutMs} ms` } });
  process.exit(1);
}, 2 * timeoutMs);
main().then(report => {
  clearTimeout(timer);
  writeOutput(report);
  const steps = ['status', 'update', 'query', 'request_status'];
  process.exitCode = steps.every(s => report[s]?.ok) ? 0 : 1;
}, error => {
  clearTimeout(timer);
  writeOutput({ error: describeError(error) });
  process.exitCode = 1;
});
