// What every script here shares: JSON in on stdin, JSON out on stdout, and the typed values
// of the IC's maps written as JSON ({"$blob": hex}, {"$nat": decimal}) so that Python and
// JavaScript agree on every byte.

export function hexToBytes(hex) {
  if (typeof hex !== 'string' || hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new Error(`not hex: ${JSON.stringify(hex).slice(0, 40)}`);
  }
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

export function bytesToHex(bytes) {
  return Buffer.from(bytes).toString('hex');
}

/** A JSON value with {"$blob"} and {"$nat"} markers as the values the agent hashes. */
export function fromJsonValue(value) {
  if (Array.isArray(value)) return value.map(fromJsonValue);
  if (value !== null && typeof value === 'object') {
    if ('$blob' in value) return hexToBytes(value.$blob);
    if ('$nat' in value) return BigInt(value.$nat);
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fromJsonValue(v)]));
  }
  if (typeof value === 'number') throw new Error('numbers travel as {"$nat": "..."}');
  return value;
}

export async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  return text.trim() ? JSON.parse(text) : {};
}

/** An error as data: its class, the agent's error code class when it has one, and its text. */
export function describeError(error) {
  return {
    name: error?.constructor?.name ?? typeof error,
    code: error?.code?.constructor?.name ?? null,
    message: String(error?.message ?? error),
  };
}

export function writeOutput(result) {
  process.stdout.write(JSON.stringify(result, (_, v) => (typeof v === 'bigint' ? v.toString() : v)));
}

/** Run `main` on the input; any failure is printed as {"error": ...} and exits 1. */
export async function run(main) {
  try {
    writeOutput(await main(await readInput()));
  } catch (error) {
    writeOutput({ error: describeError(error) });
    process.exitCode = 1;
  }
}
