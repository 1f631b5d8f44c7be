// sekka's Node.js client: ids from a local buffer that a background task refills from a list
// of sekka servers over the Redis protocol (RESP2), with failover. Ids are BigInt (or decimal
// strings), never Number: a 64-bit id loses its low bits in a double. No dependencies.
//
//   import { Client } from 'sekka-client';
//   const c = new Client({ servers: ['127.0.0.1:6380', '127.0.0.1:6381'] });
//   const id = await c.nextId();            // 250447712346773872n
//   const text = await c.nextIdString();    // '250447712346773873'
//   const invoice = await c.next('invoice');
//   const version = await c.strict('ledger');   // one request, in the cluster's order
//   await c.close();
//
// Options and failures: docs/clients.md.

import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';

const FAILOVER_PREFIXES = new Set(['LEASELOST', 'CLOCKBACKWARDS', 'UNAVAILABLE']);
const AUTH_PREFIXES = new Set(['NOAUTH', 'WRONGPASS']);
// Batch commands whose ids must come increasing.
const INCREASING = new Set(['SEG.NEXT', 'STRICT.BATCH']);

export class SekkaError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SekkaError';
  }
}
export class AuthError extends SekkaError {
  constructor(message) {
    super(message);
    this.name = 'AuthError';
  }
}
export class NoServerError extends SekkaError {
  constructor(message) {
    super(message);
    this.name = 'NoServerError';
  }
}
export class ClosedError extends SekkaError {
  constructor() {
    super('the client is closed');
    this.name = 'ClosedError';
  }
}

// The most ids one batch may hold (the server's largest server.max_batch), and the longest
// any time option may be: a day (Node's timers hold at most 24.8 days).
const MAX_BATCH = 10_000_000;
const MAX_MS = 86_400_000;

// A RESP length or integer: an optional minus and decimal digits only.
function integer(text) {
  if (!/^-?\d{1,19}$/.test(text)) throw new Error(`${JSON.stringify(text.slice(0, 40))} is not an integer`);
  return text;
}

// The ids of a batch reply, which must be an array of exactly `n` distinct ids (integers, or
// decimal strings after ID.REPLY STRING) from 0 to 2^63 - 1, increasing if `increasing` (a
// tag's; a snowflake layout may be descending or sharded). Anything else is a broken server
// (docs/contract.md), and the error fails the call over like a connection's.
function batchIds(reply, n, increasing) {
  if (!Array.isArray(reply) || reply.length !== n) {
    throw new Error(`a reply to a batch of ${n} that is not ${n} ids`);
  }
  const ids = new Array(n);
  for (let i = 0; i < n; i++) {
    const x = reply[i];
    const ok = typeof x === 'bigint' || (typeof x === 'string' && /^\d{1,19}$/.test(x));
    ids[i] = ok ? BigInt(x) : -1n;
    if (ids[i] < 0n || ids[i] >= 1n << 63n || (increasing && i > 0 && ids[i] <= ids[i - 1])) {
      throw new Error(`not an id, or not increasing, in a batch: ${String(x).slice(0, 40)} at ${i}`);
    }
  }
  if (!increasing && new Set(ids).size !== n) throw new Error('an id twice in a batch');
  return ids;
}

// A batch refused for its size names the server's server.max_batch (docs/contract.md).
const ALLOWED = /: ERR count "\d+" is not valid: allowed 1 to (\d+)$/;

class RespError extends Error {
  constructor(message) {
    super(message);
    this.prefix = message.split(' ', 1)[0];
  }
}

// One connection. Commands may overlap (every stream refills on its own schedule): replies
// come back in the order the commands were sent, so each goes to the oldest command still
// waiting. Integers are parsed as BigInt, bulk strings as text.
class Connection {
  // Connects within connectTimeout; `opening` (a Set) holds the socket until the caller's
  // handshake is done (or it closes), so that the client's close() can end either at once.
  // `secureContext`: TLS with it (the handshake within connectTimeout), or null: plain TCP.
  static open(host, port, connectTimeout, timeout, opening, secureContext) {
    return new Promise((resolve, reject) => {
      const socket = secureContext
        ? tls.connect({ host, port, secureContext, servername: net.isIP(host) ? undefined : host })
        : net.connect({ host, port });
      opening.add(socket);
      socket.once('close', () => opening.delete(socket));
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect timed out after ${connectTimeout} ms`));
      }, connectTimeout);
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      socket.once(secureContext ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        socket.setNoDelay(true);
        resolve(new Connection(socket, timeout));
      });
    });
  }

  constructor(socket, timeout) {
    this.socket = socket;
    this.timeout = timeout;
    this.buf = Buffer.alloc(0);
    this.queue = []; // commands sent and not answered yet, oldest first: {resolve, reject, timer}
    this.array = null; // a top-level array being parsed: {n, items}
    this.dead = null;
    socket.removeAllListeners('error');
    socket.on('data', (chunk) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
      this.tryParse();
    });
    socket.on('error', (e) => this.kill(e));
    socket.on('close', () => this.kill(new Error('the server closed the connection')));
  }

  close() {
    this.kill(new Error('the connection was closed'));
  }

  call(...args) {
    return this.batch(undefined, ...args);
  }

  // Sends a command whose reply is a batch of `expect` ids (undefined: any reply): a longer
  // array is refused at its header, before its elements are read.
  batch(expect, ...args) {
    if (this.dead) return Promise.reject(Object.assign(new Error(this.dead.message), { replyStarted: false }));
    let out = `*${args.length}\r\n`;
    for (const a of args) {
      const s = String(a);
      out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
    }
    return new Promise((resolve, reject) => {
      // A command past its deadline ends the connection: a reply that comes later would put
      // every reply after it one command out of step.
      const timer = setTimeout(
        () => this.kill(Object.assign(new Error(`no reply within ${this.timeout} ms`), { timedOut: true })),
        this.timeout,
      );
      this.queue.push({ resolve, reject, timer, expect });
      this.socket.write(out);
    });
  }

  // The connection can no longer be used: every command waiting on it fails with `error`'s
  // message, saying whether bytes of its reply had come (only the oldest one's can have) and
  // whether it timed out.
  kill(error) {
    if (!this.dead) this.dead = error;
    const started = this.buf.length > 0 || this.array !== null;
    this.socket.destroy();
    this.queue.splice(0).forEach((p, i) => {
      clearTimeout(p.timer);
      const e = new Error(this.dead.message);
      p.reject(Object.assign(e, { replyStarted: i === 0 && started, timedOut: this.dead.timedOut === true }));
    });
  }

  // The oldest waiting command gets its reply.
  finish(value, error) {
    const p = this.queue.shift();
    clearTimeout(p.timer);
    if (error) p.reject(error);
    else p.resolve(value);
  }

  // Parses what has arrived. A top-level array (ID.BATCH's reply: up to 100,000 ids in many
  // packets) is parsed element by element as bytes come, keeping its progress, so a large
  // reply costs one pass rather than one per packet.
  tryParse() {
    while (this.queue.length && this.buf.length && !this.dead) {
      if (!this.parseOne()) return;
    }
  }

  // Parses one reply for the oldest waiting command; false when more bytes are needed.
  parseOne() {
    let result;
    try {
      let at = 0;
      if (!this.array) {
        if (this.buf[0] === 0x2a /* '*' */) {
          const eol = this.buf.indexOf('\r\n');
          if (eol < 0) return false;
          const n = Number(integer(this.buf.toString('latin1', 1, eol)));
          const expect = this.queue[0].expect ?? MAX_BATCH;
          if (n > expect) throw new Error(`an array of ${n} elements where ${expect} were asked for`);
          at = eol + 2;
          if (n < 0) {
            result = { value: null, end: at };
          } else {
            this.array = { n, items: [] };
          }
        } else if (this.queue[0].expect !== undefined && this.buf[0] !== 0x2d /* '-' */) {
          throw new Error(`a reply to a batch that is not an array: ${JSON.stringify(this.buf.toString('latin1', 0, 20))}`);
        } else {
          result = parse(this.buf, 0);
          if (result === null) return false;
        }
      }
      if (this.array) {
        const a = this.array;
        while (a.items.length < a.n) {
          const r = parse(this.buf, at, false);
          if (r === null) break;
          a.items.push(r.value);
          at = r.end;
        }
        this.buf = this.buf.subarray(at);
        if (a.items.length < a.n) return false;
        this.array = null;
        const failed = a.items.find((x) => x instanceof RespError);
        // No reply of sekka's has one: the server is broken, and so is this connection.
        if (failed) throw new Error(`an error inside an array: ${failed.message}`);
        result = { value: a.items, end: 0 };
      }
    } catch (e) {
      this.kill(e);
      return false;
    }
    this.buf = this.buf.subarray(result.end);
    if (result.value instanceof RespError) this.finish(null, result.value);
    else this.finish(result.value, null);
    return true;
  }
}

// Parses one reply at `at`: {value, end}, or null when more bytes are needed. `nested`: an
// array may come here (no reply of sekka's has an array inside an array).
function parse(buf, at, nested = true) {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) {
    if (buf.length - at > 1 << 20) throw new Error('a reply line over 1 MiB');
    return null;
  }
  const kind = String.fromCharCode(buf[at]);
  const line = buf.toString('latin1', at + 1, eol);
  const next = eol + 2;
  switch (kind) {
    case ':':
      return { value: BigInt(integer(line)), end: next };
    case '+':
      return { value: line, end: next };
    case '-':
      return { value: new RespError(line), end: next };
    case '$': {
      const n = Number(integer(line));
      // An id in an array is at most 20 characters; a reply on its own, at most 64 MiB.
      if (n > (nested ? 64 << 20 : 20)) throw new Error(`a bulk string of ${n} bytes`);
      if (n < 0) return { value: null, end: next };
      if (buf.length < next + n + 2) return null;
      return { value: buf.toString('utf8', next, next + n), end: next + n + 2 };
    }
    case '*': {
      if (!nested) throw new Error('an array inside an array');
      const n = Number(integer(line));
      if (n > MAX_BATCH) throw new Error(`an array of ${n} elements`);
      if (n < 0) return { value: null, end: next };
      const items = [];
      let pos = next;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, pos, false);
        if (r === null) return null;
        items.push(r.value);
        pos = r.end;
      }
      return { value: items, end: pos };
    }
    default:
      throw new Error(`a reply starting with ${JSON.stringify(kind)}`);
  }
}

// "host:port" or "[v6 address]:port" items, as one text "a,b" or a list.
function parseServers(servers) {
  const items = typeof servers === 'string' ? servers.split(',') : [...(servers ?? [])];
  if (items.length === 0 || (items.length === 1 && String(items[0]).trim() === '')) {
    throw new TypeError('servers is empty: give at least one host:port');
  }
  return items.map((item, i) => {
    const text = String(item).trim();
    const colon = text.lastIndexOf(':');
    const portText = text.slice(colon + 1);
    const port = /^\d+$/.test(portText) ? Number(portText) : NaN;
    let host = text.slice(0, colon);
    if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
    if (colon <= 0 || host === '' || !(port >= 1 && port <= 65535)) {
      throw new TypeError(`servers[${i}] = ${JSON.stringify(item)} is not host:port (a port from 1 to 65535)`);
    }
    return { host, port, name: text, conn: null, connecting: null, downUntil: 0, backoff: 0, lastError: '' };
  });
}

// Throws a RangeError naming the first option out of its range and what is allowed.
function checkOptions(o) {
  const whole = (x) => Number.isSafeInteger(x);
  if (!(whole(o.minBatch) && whole(o.batch) && whole(o.maxBatch) && 1 <= o.minBatch && o.minBatch <= o.batch && o.batch <= o.maxBatch && o.maxBatch <= MAX_BATCH)) {
    throw new RangeError(`batch sizes minBatch ${o.minBatch}, batch ${o.batch}, maxBatch ${o.maxBatch}: allowed whole numbers, 1 <= minBatch <= batch <= maxBatch <= ${MAX_BATCH}`);
  }
  if (!(o.lowWater > 0 && o.lowWater < 1)) throw new RangeError(`lowWater = ${o.lowWater}: allowed above 0 and below 1`);
  for (const name of ['connectTimeout', 'timeout', 'targetRefill', 'validity', 'backoffMin', 'backoffMax', 'strictWait']) {
    const v = o[name];
    if (!(typeof v === 'number' && v > 0 && v <= MAX_MS)) throw new RangeError(`${name} = ${v}: allowed above 0 and at most ${MAX_MS} ms`);
  }
  if (o.backoffMax < o.backoffMin) throw new RangeError(`backoffMax = ${o.backoffMax}: allowed at least backoffMin (${o.backoffMin})`);
  if (o.token !== null && typeof o.token !== 'string') throw new TypeError('token: allowed a string or null');
}

// The TLS context of the client's connections, or null (plain TCP) when no TLS option is set.
// tlsCaFile: the CA that signed the servers' certificates ('system': the system's CAs);
// tlsCertFile and tlsKeyFile: a client certificate (PEM) for servers that require one. Throws a
// RangeError naming the option that cannot be used.
function secureContextOf(o) {
  if (o.tlsCaFile == null && o.tlsCertFile == null && o.tlsKeyFile == null) return null;
  if ((o.tlsCertFile == null) !== (o.tlsKeyFile == null)) {
    throw new RangeError('tlsCertFile and tlsKeyFile go together: give both or neither');
  }
  const read = (name) => {
    try {
      return fs.readFileSync(o[name]);
    } catch (e) {
      throw new RangeError(`${name} = ${JSON.stringify(o[name])} cannot be read: ${e.message}`);
    }
  };
  const options = { minVersion: 'TLSv1.2' };
  if (o.tlsCaFile != null && o.tlsCaFile !== 'system') options.ca = read('tlsCaFile');
  if (o.tlsCertFile != null) Object.assign(options, { cert: read('tlsCertFile'), key: read('tlsKeyFile') });
  try {
    return tls.createSecureContext(options);
  } catch (e) {
    throw new RangeError(`the TLS files (tlsCaFile, tlsCertFile, tlsKeyFile) cannot be used: ${e.message}`);
  }
}

const now = () => performance.now();

export class Client {
  // Options (times in ms): servers (required), token, connectTimeout 1000, timeout 1000,
  // batch 1000, minBatch 100, maxBatch 100000, targetRefill 1000, lowWater 0.5,
  // validity 10000, backoffMin 100, backoffMax 5000, strictWait 30000; tlsCaFile, tlsCertFile,
  // tlsKeyFile (TLS, secureContextOf).
  constructor(options = {}) {
    const o = {
      token: null,
      connectTimeout: 1000,
      timeout: 1000,
      batch: 1000,
      minBatch: 100,
      maxBatch: 100000,
      targetRefill: 1000,
      lowWater: 0.5,
      validity: 10000,
      backoffMin: 100,
      backoffMax: 5000,
      strictWait: 30000,
      ...options,
    };
    checkOptions(o);
    this.options = o;
    this.secureContext = secureContextOf(o);
    this.servers = parseServers(o.servers);
    this.current = 0;
    // Strict calls have connections (and backoffs) of their own: a tag without a leader for a
    // while must not hold back the refills.
    this.strictPool = { servers: parseServers(o.servers), current: 0 };
    this.pauses = new Set(); // strict calls waiting for a server's backoff: {timer, resolve}
    this.streams = new Map(); // key: null (snowflake) or a tag
    this.closed = false;
    this.opening = new Set(); // sockets connecting now
    this.counters = { served: 0, refills: 0, failovers: 0, dropped: 0 };
    // setTimeout holds at most 2^31 - 1 ms (24.8 days); more would fire at once.
    this.maxWait = Math.min(2 ** 31 - 1, 2 * (o.connectTimeout + o.timeout) * this.servers.length + 1000);
  }

  // The next snowflake id, a BigInt.
  async nextId() {
    return this.take(null);
  }

  // The next snowflake id as decimal text.
  async nextIdString() {
    return String(await this.take(null));
  }

  // `n` ids (BigInt), in the order they were served.
  async nextIds(n) {
    if (!Number.isInteger(n) || n < 0) throw new RangeError('n must be a whole number >= 0');
    const out = [];
    for (let i = 0; i < n; i++) out.push(await this.take(null));
    return out;
  }

  // The next id of segment tag `tag` (BigInt), above every id this client gave for it.
  async next(tag) {
    if (typeof tag !== 'string' || tag === '') throw new TypeError('tag must be a non-empty string');
    return this.take(tag);
  }

  // The next strict id of `tag` (BigInt; docs/contract.md section 15): larger than every id of
  // the tag that any client of the cluster got before this call began.
  async strict(tag) {
    return (await this.strictBatch(tag, 1))[0];
  }

  // `n` consecutive strict ids of `tag` (BigInt), larger than every id of the tag that any
  // client got before this call began. One request, never buffered: on a connection error, a
  // timeout or an -UNAVAILABLE (a leader failover) the servers are tried again, in turn and
  // with their backoff, for up to strictWait ms; then NoServerError.
  async strictBatch(tag, n) {
    if (typeof tag !== 'string' || tag === '') throw new TypeError('tag must be a non-empty string');
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_BATCH) throw new RangeError(`n = ${n}: allowed a whole number from 1 to ${MAX_BATCH}`);
    const pool = this.strictPool;
    const deadline = now() + this.options.strictWait;
    for (;;) {
      if (this.closed) throw new ClosedError();
      let ids;
      try {
        ids = await this.call(pool, n, 'STRICT.BATCH', tag, n);
      } catch (e) {
        if (this.closed) throw new ClosedError();
        if (!(e instanceof NoServerError)) throw e;
        const up = Math.min(...pool.servers.map((s) => s.downUntil));
        if (up >= deadline) throw new NoServerError(`no strict ids within ${this.options.strictWait} ms: ${e.message}`);
        await this.pause(up - now());
        continue;
      }
      if (ids[n - 1] - ids[0] !== BigInt(n - 1)) {
        throw new SekkaError(`the ids of STRICT.BATCH ${tag} ${n} are not consecutive: ${ids[0]} to ${ids[n - 1]}`);
      }
      return ids;
    }
  }

  // Resolves after `ms`, or at once when the client closes.
  pause(ms) {
    return new Promise((resolve) => {
      const p = { resolve };
      p.timer = setTimeout(() => {
        this.pauses.delete(p);
        resolve();
      }, Math.max(0, ms));
      this.pauses.add(p);
    });
  }

  stats() {
    let buffered = 0;
    for (const s of this.streams.values()) for (const b of s.batches) buffered += b.ids.length - b.pos;
    return { ...this.counters, buffered };
  }

  // Cuts off the refills in flight, closes every connection and wakes waiting callers with
  // ClosedError (as every later call); resolves when the refills have ended.
  async close() {
    this.closed = true;
    for (const socket of this.opening) socket.destroy(new ClosedError());
    for (const s of [...this.servers, ...this.strictPool.servers]) {
      if (s.conn) s.conn.close();
      s.conn = null;
    }
    for (const p of this.pauses) {
      clearTimeout(p.timer);
      p.resolve();
    }
    this.pauses.clear();
    for (const st of this.streams.values()) {
      for (const w of st.waiters.splice(0)) w.reject(new ClosedError());
    }
    await Promise.allSettled([...this.streams.values()].map((st) => st.refilling).filter(Boolean));
  }

  stream(key) {
    let s = this.streams.get(key);
    if (!s) {
      s = {
        key,
        size: this.options.batch,
        batches: [], // [{ids, pos, expires}]
        refilling: null, // the running refill's promise
        retryAt: 0,
        high: -1n,
        lastRefill: null,
        waiters: [],
      };
      this.streams.set(key, s);
    }
    return s;
  }

  // An id from the buffer, refilling at the low-water mark; waits only when it is empty.
  take(key) {
    if (this.closed) return Promise.reject(new ClosedError());
    const s = this.stream(key);
    const value = this.pop(s);
    if (value !== undefined) return value; // an async caller awaits a plain value at no cost
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const i = s.waiters.indexOf(w);
        if (i >= 0) s.waiters.splice(i, 1);
        reject(new NoServerError(`no ids within ${this.maxWait} ms from ${this.names()}`));
      }, this.maxWait);
      const w = {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      s.waiters.push(w);
      this.refill(s);
    });
  }

  pop(s) {
    const t = now();
    while (s.batches.length && (s.batches[0].expires <= t || s.batches[0].pos === s.batches[0].ids.length)) {
      const b = s.batches.shift();
      this.counters.dropped += b.ids.length - b.pos;
    }
    let left = 0;
    for (const b of s.batches) left += b.ids.length - b.pos;
    if (left < this.options.lowWater * s.size && t >= s.retryAt) this.refill(s);
    if (!s.batches.length) return undefined;
    const b = s.batches[0];
    this.counters.served++;
    return b.ids[b.pos++];
  }

  refill(s) {
    if (s.refilling || this.closed) return;
    s.refilling = this.fetch(s).finally(() => {
      s.refilling = null;
      // Waiters left (ids dropped as too low, or expired): ask again.
      if (s.waiters.length && !this.closed) this.refill(s);
    });
  }

  async fetch(s) {
    const t = now();
    if (s.lastRefill !== null) {
      const lasted = t - s.lastRefill;
      if (lasted < this.options.targetRefill / 2) s.size = Math.min(this.options.maxBatch, s.size * 2);
      else if (lasted > this.options.targetRefill * 2) s.size = Math.max(this.options.minBatch, Math.floor(s.size / 2));
    }
    let ids;
    try {
      ids = s.key === null ? await this.call(this, s.size, 'ID.BATCH', s.size) : await this.call(this, s.size, 'SEG.NEXT', s.key, s.size);
    } catch (e) {
      if (this.learnMaxBatch(e, s)) return this.fetch(s); // at once, with the server's size
      s.retryAt = now() + this.options.backoffMin;
      for (const w of s.waiters.splice(0)) w.reject(e);
      return;
    }
    this.counters.refills++;
    s.lastRefill = now();
    if (s.key !== null) {
      // A tag's ids stay increasing within the client (another server's range may be lower).
      const fresh = ids.filter((x) => x > s.high);
      this.counters.dropped += ids.length - fresh.length;
      ids = fresh;
      if (ids.length) s.high = ids[ids.length - 1];
    }
    if (ids.length) s.batches.push({ ids, pos: 0, expires: s.lastRefill + this.options.validity });
    while (s.waiters.length) {
      const value = this.pop(s);
      if (value === undefined) break;
      s.waiters.shift().resolve(value);
    }
  }

  // A batch refused because the server allows fewer ids: keep to its size from now on.
  learnMaxBatch(e, s) {
    const m = e instanceof SekkaError && e.constructor === SekkaError ? ALLOWED.exec(e.message) : null;
    const most = m ? Number(m[1]) : 0;
    if (!(most > 0 && most < s.size)) return false;
    this.options.maxBatch = most;
    this.options.minBatch = Math.min(this.options.minBatch, most);
    s.size = most;
    return true;
  }

  names() {
    return this.servers.map((s) => s.name).join(', ');
  }

  async connect(s) {
    const conn = await Connection.open(s.host, s.port, this.options.connectTimeout, this.options.timeout, this.opening, this.secureContext);
    try {
      if (this.options.token !== null) await conn.call('AUTH', this.options.token);
      await conn.call('ID.REPLY', 'STRING'); // ids as decimal bulk strings: never a double
      this.opening.delete(conn.socket);
    } catch (e) {
      conn.close();
      if (e instanceof RespError && (AUTH_PREFIXES.has(e.prefix) || e.prefix === 'ERR') && this.options.token !== null) {
        throw new AuthError(`sekka server ${s.name} refused the token: ${e.message}`);
      }
      throw e;
    }
    return conn;
  }

  // The server's connection, made once even when several streams ask for it at once (a second
  // one made beside it would leak, and keep the process from exiting).
  connection(s) {
    if (this.closed) return Promise.reject(new ClosedError());
    if (s.conn) return s.conn;
    if (!s.connecting) {
      s.connecting = this.connect(s)
        .then((conn) => {
          if (this.closed) {
            conn.close();
            throw new ClosedError();
          }
          s.conn = conn;
          return conn;
        })
        .finally(() => {
          s.connecting = null;
        });
    }
    return s.connecting;
  }

  // `args` on server `s`. A connection made before this call that fails before any byte of the
  // reply (the server closed it while idle, or restarted) is replaced and the command sent once
  // more, without counting against the server: a command it did run costs a range, never an id.
  async callOn(s, n, args) {
    const reused = s.conn !== null;
    const conn = await this.connection(s);
    try {
      return batchIds(await conn.batch(n, ...args), n, INCREASING.has(args[0]));
    } catch (e) {
      if (this.closed || !reused || e instanceof RespError || e.timedOut || e.replyStarted !== false) throw e;
      if (s.conn === conn) s.conn = null;
      conn.close();
      return batchIds(await (await this.connection(s)).batch(n, ...args), n, INCREASING.has(args[0]));
    }
  }

  // The `count` ids of the first server of `pool` (the client itself, or its strictPool) that
  // answers batch command `args`, from the pool's current one; failover on connection errors,
  // timeouts, broken replies and -LEASELOST/-CLOCKBACKWARDS/-UNAVAILABLE.
  async call(pool, count, ...args) {
    const t = now();
    const servers = pool.servers;
    const n = servers.length;
    const order = Array.from({ length: n }, (_, i) => (pool.current + i) % n);
    let up = order.filter((i) => servers[i].downUntil <= t);
    if (!up.length) up = [order.reduce((a, b) => (servers[b].downUntil < servers[a].downUntil ? b : a))];
    const tried = [];
    for (const i of up) {
      const s = servers[i];
      try {
        const reply = await this.callOn(s, count, args);
        s.backoff = 0;
        s.downUntil = 0;
        if (i !== pool.current) {
          this.counters.failovers++;
          pool.current = i;
        }
        return reply;
      } catch (e) {
        // A closed client fails over to nothing: it opens no connection after close().
        if (e instanceof AuthError || this.closed) throw e;
        if (e instanceof RespError) {
          if (AUTH_PREFIXES.has(e.prefix)) throw new AuthError(`sekka server ${s.name}: ${e.message}`);
          if (!FAILOVER_PREFIXES.has(e.prefix)) throw new SekkaError(`sekka server ${s.name}: ${e.message}`);
        }
        s.lastError = e.message;
        tried.push(i);
        if (s.conn) s.conn.close();
        s.conn = null;
        s.backoff = Math.min(this.options.backoffMax, Math.max(this.options.backoffMin, s.backoff * 2));
        s.downUntil = now() + s.backoff;
      }
    }
    // Every server, with its last error (those backing off were not tried this time).
    const each = servers.map((s, i) => `${s.name} (${s.lastError}${tried.includes(i) ? '' : '; backing off'})`);
    throw new NoServerError(`no sekka server could serve ${args.join(' ')}: ${each.join(', ')}`);
  }
}
