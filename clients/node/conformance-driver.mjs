// The Node.js client's conformance driver (tests/conformance/PROTOCOL.md): JSON requests on
// stdin, one JSON reply a line on stdout. Not part of the package (package.json "files").

import readline from 'node:readline';
import * as sekka from './index.js';

const { Client, AuthError, NoServerError, SekkaError } = sekka;

const MS = {
  connect_timeout_ms: 'connectTimeout',
  timeout_ms: 'timeout',
  target_refill_ms: 'targetRefill',
  validity_ms: 'validity',
  backoff_min_ms: 'backoffMin',
  backoff_max_ms: 'backoffMax',
  strict_wait_ms: 'strictWait',
};
const CAMEL = {
  batch: 'batch',
  min_batch: 'minBatch',
  max_batch: 'maxBatch',
  low_water: 'lowWater',
  token: 'token',
  tls_ca_file: 'tlsCaFile',
  tls_cert_file: 'tlsCertFile',
  tls_key_file: 'tlsKeyFile',
};

// The error kind; RangeError and TypeError are the client refusing an argument only when it
// was given one (open, or an argument of a call), else a defect.
function kind(e, argument) {
  if (sekka.ClosedError && e instanceof sekka.ClosedError) return 'closed';
  if (e instanceof AuthError) return 'auth';
  if (e instanceof NoServerError) return 'no_server';
  if (e instanceof SekkaError) return 'refused';
  if (argument && (e instanceof RangeError || e instanceof TypeError)) return 'invalid_argument';
  return `other:${e?.constructor?.name ?? typeof e}`;
}

let client = null;

async function handle(req) {
  switch (req.op) {
    case 'open': {
      const options = { servers: req.servers };
      for (const [key, value] of Object.entries(req.options)) options[MS[key] ?? CAMEL[key]] = value;
      client = new Client(options);
      return { ok: true };
    }
    case 'ids':
    case 'tag': {
      const ids = [];
      try {
        for (let i = 0; i < req.n; i++) {
          ids.push(String(req.op === 'ids' ? await client.nextId() : await client.next(req.tag)));
        }
      } catch (e) {
        return { ids, error: kind(e, false), message: String(e?.message ?? e) };
      }
      return { ids };
    }
    case 'strict': {
      const ids = [];
      try {
        for (let i = 0; i < req.n; i++) ids.push(String(await client.strict(req.tag)));
      } catch (e) {
        return { ids, error: kind(e, true), message: String(e?.message ?? e) };
      }
      return { ids };
    }
    case 'strict_batch':
      try {
        return { ids: (await client.strictBatch(req.tag, req.n)).map(String) };
      } catch (e) {
        return { error: kind(e, true), message: String(e?.message ?? e) };
      }
    case 'batch':
      return { ids: (await client.nextIds(req.n)).map(String) };
    case 'stats':
      return { stats: client.stats() };
    case 'close':
      await client.close();
      return { ok: true };
    case 'exit':
      return { ok: true };
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const req = JSON.parse(line);
  const start = performance.now();
  let reply;
  try {
    reply = await handle(req);
  } catch (e) {
    reply = { error: kind(e, req.op === 'open'), message: String(e?.message ?? e) };
  }
  reply.ms = performance.now() - start;
  process.stdout.write(JSON.stringify(reply) + '\n');
  if (req.op === 'exit') {
    lines.close();
    process.stdin.destroy();
    break;
  }
}
