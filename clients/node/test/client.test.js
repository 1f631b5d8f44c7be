// sekka-client against real `sekka serve` processes: uniqueness across clients and servers,
// kill -9 while drawing, all servers down and back, a wrong token, tags across a failover.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { AuthError, Client, NoServerError, SekkaError } from '../index.js';
import { createTag, startServer, tempDir, workerOf } from './servers.js';

const dirs = [];
const servers = [];
const clients = [];
after(async () => {
  for (const c of clients) await c.close();
  for (const s of servers) await s.stop('SIGKILL');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

async function server(workerId, flags = [], opts = {}) {
  const dir = opts.dir ?? tempDir();
  if (!opts.dir) dirs.push(dir);
  const s = await startServer(dir, ['--worker-source', 'static', '--worker-id', String(workerId), ...flags], opts);
  s.dir = dir;
  servers.push(s);
  return s;
}

function client(options) {
  const c = new Client(options);
  clients.push(c);
  return c;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

test('8 tasks x 100,000 ids through two clients and two servers are distinct', async () => {
  const a = await server(1);
  const b = await server(2);
  // 5 s reply and connect timeouts: this test is about distinct ids and routing, and on a loaded
  // 2-core machine the default 1 s reply timer can fire before a reply that has arrived is read
  // (a false failover, seen 1 run in 8 before issue 22's change too). With a compiler beside the
  // tests, even 5 s passed once without a reply; the connect timeout is raised alike. Two busy
  // CPU hogs beside the suite made a 5 s timer fire once more (issue 39's third busy run): 30 s,
  // a liveness bound, never reached by a server that answers.
  const slow = { timeout: 30000, connectTimeout: 30000 };
  const cs = [
    client({ servers: [a.resp, b.resp], ...slow }),
    client({ servers: `${b.resp},${a.resp}`, ...slow }),
  ];
  const perTask = await Promise.all(
    Array.from({ length: 8 }, async (_, k) => {
      const out = [];
      for (let i = 0; i < 100000; i++) out.push(await cs[k % 2].nextId());
      return out;
    }),
  );
  const all = new Set();
  for (const ids of perTask) {
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1] < ids[i], 'ids from one client increase');
    for (const id of ids) {
      assert.equal(typeof id, 'bigint');
      all.add(id);
    }
  }
  assert.equal(all.size, 800000);
  // A failover here says why: the servers' last errors, as each client saw them.
  const errors = (c) => c.servers.map((s) => `${s.name}: ${s.lastError || 'none'}`).join(', ');
  const why = `last errors: ${cs.map(errors).join('; ')}`;
  assert.deepEqual(new Set(perTask[0].map(workerOf)), new Set([1]), why);
  assert.deepEqual(new Set(perTask[1].map(workerOf)), new Set([2]), why);
  const text = await cs[0].nextIdString();
  assert.match(text, /^\d{18,19}$/);
  assert.ok(BigInt(text) > perTask[0].at(-1));
  assert.equal(cs[0].stats().failovers, 0);
  assert.ok(cs[0].stats().served >= 400000);
});

test('kill -9 of a server while drawing: no error, no repeat, none of its ids after the validity', async () => {
  const a = await server(1);
  const b = await server(2);
  const validity = 1000;
  // Fixed batches that last ~2.5 s at ~400 ids/s: the dead server's ids would still be buffered
  // after the validity period if the client did not drop them.
  const c = client({ servers: [a.resp, b.resp], validity, timeout: 500, batch: 1000, minBatch: 1000, maxBatch: 1000 });
  const got = []; // [time, id]
  let stop = false;
  const tasks = Array.from({ length: 4 }, async () => {
    while (!stop) {
      got.push([performance.now(), await c.nextId()]);
      await sleep(10);
    }
  });
  await sleep(500);
  const killedAt = performance.now();
  await a.stop('SIGKILL');
  await sleep(validity + 1500);
  stop = true;
  await Promise.all(tasks);
  const ids = got.map(([, id]) => id);
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(got.some(([t, id]) => t < killedAt && workerOf(id) === 1));
  const late = got.filter(([t]) => t > killedAt + validity + 200).map(([, id]) => workerOf(id));
  assert.ok(late.length > 0);
  assert.deepEqual(new Set(late), new Set([2]));
  assert.ok(c.stats().failovers >= 1);
});

test('all servers down: the buffer drains, then a clear error; back: it recovers', async () => {
  const portA = await freePort();
  const portB = await freePort();
  const a = await server(1, [], { resp: `127.0.0.1:${portA}` });
  const b = await server(2, [], { resp: `127.0.0.1:${portB}` });
  const c = client({ servers: [a.resp, b.resp], batch: 100, minBatch: 100, maxBatch: 100, validity: 60000, backoffMax: 500, timeout: 500, connectTimeout: 500 });
  const drawn = [await c.nextId()];
  await a.stop('SIGKILL');
  await b.stop('SIGKILL');
  let error = null;
  try {
    for (let i = 0; i < 10000; i++) drawn.push(await c.nextId());
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof NoServerError, String(error));
  assert.match(error.message, new RegExp(`127.0.0.1:${portA}`));
  assert.match(error.message, new RegExp(`127.0.0.1:${portB}`));
  assert.ok(drawn.length <= 201);
  await server(1, [], { resp: `127.0.0.1:${portA}`, dir: a.dir });
  const deadline = performance.now() + 10000;
  let more;
  for (;;) {
    try {
      more = await c.nextId();
      break;
    } catch (e) {
      assert.ok(e instanceof NoServerError);
      assert.ok(performance.now() < deadline, 'the client did not recover');
      await sleep(100);
    }
  }
  assert.ok(!drawn.includes(more));
  assert.ok(more > drawn.reduce((x, y) => (x > y ? x : y)));
});

test('a wrong token fails at the first call, not a hang', async () => {
  const a = await server(1, ['--auth-token', 'right-token-0123456']);
  assert.ok((await client({ servers: [a.resp], token: 'right-token-0123456' }).nextId()) > 0n);
  const t0 = performance.now();
  await assert.rejects(client({ servers: [a.resp], token: 'wrong-token-0123456' }).nextId(), AuthError);
  assert.ok(performance.now() - t0 < 2000);
  await assert.rejects(client({ servers: [a.resp] }).nextId(), AuthError);
});

test("a tag's ids increase across a failover", async () => {
  const dir = tempDir();
  dirs.push(dir);
  const store = `sqlite:${path.join(dir, 'segments.db')}`;
  createTag(store, 'order', 50);
  const a = await server(1, ['--segment-store', store]);
  const b = await server(2, ['--segment-store', store]);
  const c = client({ servers: [a.resp, b.resp], batch: 20, minBatch: 20, maxBatch: 20 });
  const other = client({ servers: [b.resp], batch: 20, minBatch: 20, maxBatch: 20 });
  assert.ok((await other.next('order')) > 0n);
  const ids = [];
  for (let i = 0; i < 300; i++) ids.push(await c.next('order'));
  await a.stop('SIGKILL');
  for (let i = 0; i < 300; i++) ids.push(await c.next('order'));
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1] < ids[i]);
  await assert.rejects(c.next('no-such-tag'), (e) => e instanceof SekkaError && /no-such-tag/.test(e.message));
});

// Issue 23's finding 1: streams refill on their own schedules over one connection, which used
// to track one pending command, so a reply went to the wrong request (a TypeError crashed the
// process after about a second, a tag got snowflake ids, one tag another's).
test("streams refilling at once over one connection each get their own replies", async () => {
  const dir = tempDir();
  dirs.push(dir);
  const store = `sqlite:${path.join(dir, 'segments.db')}`;
  createTag(store, 'low', 37, 1);
  createTag(store, 'high', 41, 1_000_000_000);
  const s = await server(5, ['--segment-store', store]);
  const c = client({ servers: [s.resp], batch: 20, minBatch: 20, maxBatch: 20, lowWater: 0.9 });
  const seen = { snowflake: new Set(), low: [], high: [] };
  const end = Date.now() + 1500;
  while (Date.now() < end) {
    const [id, low, high] = await Promise.all([c.nextId(), c.next('low'), c.next('high')]);
    seen.snowflake.add(id);
    seen.low.push(low);
    seen.high.push(high);
    assert.equal(workerOf(id), 5, `a snowflake id from elsewhere: ${id}`);
    assert.ok(id > 1n << 40n, `a segment id served as a snowflake id: ${id}`);
    assert.ok(low < 1_000_000_000n, `tag low got ${low}`);
    assert.ok(high >= 1_000_000_000n && high < 1n << 40n, `tag high got ${high}`);
  }
  assert.equal(seen.snowflake.size, seen.low.length);
  for (const ids of [seen.low, seen.high]) {
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1] < ids[i], `${ids[i - 1]} then ${ids[i]}`);
  }
});

// Issue 23's finding 2: a connection the server closed (its idle timeout, a restart) failed the
// next refill and put a healthy server into backoff; with one server, callers got "no sekka
// server could serve" though it was up. A reused connection that fails before any byte of the
// reply is tried once more on a fresh one.
test('a connection the server closed while idle is replaced, not counted as a failure', async () => {
  const s = await server(6, [], { env: { SEKKA_SERVER_IDLE_TIMEOUT: '1s' } });
  // lowWater 0.01: each batch of 20 is used up before the next refill, which then meets the
  // closed connection with nothing buffered.
  const c = client({ servers: [s.resp], batch: 20, minBatch: 20, maxBatch: 20, lowWater: 0.01, validity: 60000 });
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 20; i++) assert.equal(workerOf(await c.nextId()), 6);
    await sleep(1500); // past the server's idle timeout: it closes the connection
  }
  assert.equal(c.servers[0].lastError, '', 'a closed idle connection counted as a server failure');
});

// A RESP server scripted by `answer(args, n)` (n: the command's number on its connection): a
// reply string, or null to never answer. It counts the connections made to it.
async function scriptedServer(answer) {
  const state = { connections: 0, sockets: [] };
  const srv = net.createServer((sock) => {
    state.connections++;
    state.sockets.push(sock);
    let buf = '';
    let n = 0;
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      for (;;) {
        const m = /^\*(\d+)\r\n/.exec(buf);
        if (!m) return;
        let at = m[0].length;
        const args = [];
        for (let i = 0; i < Number(m[1]); i++) {
          const h = /^\$(\d+)\r\n/.exec(buf.slice(at));
          if (!h || buf.length < at + h[0].length + Number(h[1]) + 2) return;
          at += h[0].length;
          args.push(buf.slice(at, at + Number(h[1])));
          at += Number(h[1]) + 2;
        }
        buf = buf.slice(at);
        const reply = answer(args, ++n);
        if (reply !== null) sock.write(reply);
      }
    });
    sock.on('error', () => {});
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  state.address = `127.0.0.1:${srv.address().port}`;
  state.stop = () => {
    for (const sock of state.sockets) sock.destroy();
    return new Promise((r) => srv.close(r));
  };
  return state;
}

const idsReply = (from, count) => {
  let out = `*${count}\r\n`;
  for (let i = 0; i < count; i++) out += `:${from + i}\r\n`;
  return out;
};

// The review of the fixes above: a refill in flight at close() was sent again on a new
// connection, and then failed over to every other server.
test('close() during a refill opens no new connection', async () => {
  let batches = 0;
  const s = await scriptedServer((args) => {
    if (args[0] !== 'ID.BATCH') return '+OK\r\n';
    return ++batches === 1 ? idsReply(1 << 30, 20) : null; // the second is never answered
  });
  try {
    const c = new Client({ servers: [s.address], batch: 20, minBatch: 20, maxBatch: 20, lowWater: 0.01 });
    for (let i = 0; i < 20; i++) await c.nextId();
    const waiting = c.nextId(); // its refill waits on the server
    await sleep(100);
    await c.close();
    await assert.rejects(waiting, SekkaError);
    await sleep(200);
    assert.equal(s.connections, 1, 'a connection was made after close()');
  } finally {
    await s.stop();
  }
});

test('a refill answered with something other than an array fails, without a crash', async () => {
  const s = await scriptedServer((args) => (args[0] === 'SEG.NEXT' ? '*-1\r\n' : '+OK\r\n'));
  try {
    const c = new Client({ servers: [s.address] });
    await assert.rejects(c.next('t'), (e) => e instanceof NoServerError && /not 1000 ids/.test(e.message));
    await c.close();
  } finally {
    await s.stop();
  }
});
