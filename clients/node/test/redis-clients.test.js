// Two npm Redis clients no one here wrote, against `sekka serve`: RESP integers become
// JavaScript Numbers in both, which lose a 64-bit id's low bits. ioredis keeps them exact with
// stringNumbers; node-redis 4 has no such option, so the server sends ids as decimal bulk
// strings after ID.REPLY STRING (per connection) or with server.resp_ids = "string".

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import Redis from 'ioredis';
import { createClient } from 'redis';

import { startServer, tempDir, workerOf } from './servers.js';

const dirs = [];
const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

async function server(flags = [], env = {}) {
  const dir = tempDir();
  dirs.push(dir);
  const s = await startServer(dir, ['--worker-source', 'static', '--worker-id', '1001', ...flags], { env });
  servers.push(s);
  return s;
}

function checkExact(ids) {
  for (const id of ids) {
    assert.equal(typeof id, 'string');
    assert.match(id, /^\d+$/);
    assert.equal(workerOf(id), 1001);
  }
  assert.equal(new Set(ids).size, ids.length);
  const big = ids.map(BigInt);
  for (let i = 1; i < big.length; i++) assert.ok(big[i - 1] < big[i]);
}

test('ioredis: plain integers lose digits; stringNumbers keeps every id exact', async () => {
  const s = await server();
  const lossy = new Redis({ host: '127.0.0.1', port: s.port, lazyConnect: true });
  await lossy.connect();
  const numbers = await lossy.call('ID.BATCH', 3);
  assert.equal(typeof numbers[0], 'number');
  assert.ok(numbers.some((n) => !Number.isSafeInteger(n)), 'a 64-bit id is past 2^53');
  lossy.disconnect();

  const exact = new Redis({ host: '127.0.0.1', port: s.port, stringNumbers: true, lazyConnect: true });
  await exact.connect();
  checkExact(await exact.call('ID.BATCH', 100));
  checkExact([await exact.call('ID.NEXT')]);
  exact.disconnect();
});

test('node-redis 4: ID.REPLY STRING on the connection gives exact ids', async () => {
  const s = await server();
  const c = createClient({ url: `redis://127.0.0.1:${s.port}` });
  await c.connect();
  assert.equal(typeof (await c.sendCommand(['ID.NEXT'])), 'number');
  assert.equal(await c.sendCommand(['ID.REPLY', 'STRING']), 'OK');
  checkExact(await c.sendCommand(['ID.BATCH', '100']));
  checkExact([await c.sendCommand(['ID.NEXT'])]);
  await assert.rejects(c.sendCommand(['ID.REPLY', 'FLOAT']), /allowed STRING or INTEGER/);
  assert.equal(await c.sendCommand(['ID.REPLY', 'INTEGER']), 'OK');
  assert.equal(typeof (await c.sendCommand(['ID.NEXT'])), 'number');
  await c.quit();
});

test('node-redis 4: server.resp_ids = "string" needs nothing from the client', async () => {
  const s = await server([], { SEKKA_SERVER_RESP_IDS: 'string' });
  const c = createClient({ url: `redis://127.0.0.1:${s.port}` });
  await c.connect();
  checkExact(await c.sendCommand(['ID.BATCH', '100']));
  checkExact([await c.sendCommand(['ID.NEXT'])]);
  await c.quit();
});
