// The Node client's cost per id from its buffer against one ID.NEXT round trip per id with
// ioredis (stringNumbers), and nextId() latency while 4 tasks draw 100,000 ids/s together.
// Needs a running sekka server: bench/run_clients.sh passes its RESP address.
//   node clients/node/bench/bench.mjs 127.0.0.1:6380

import Redis from 'ioredis';
import { Client } from '../index.js';

const address = process.argv[2];
const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.split(':').pop())];

// Rounds of draws, each after a pause in which the refill completes, so that no timed call
// waits for the server (whose own ceiling would be measured instead).
async function perIdFromBuffer(c, rounds = 60, perRound = 40_000) {
  let timed = 0n;
  let n = 0;
  for (let r = 0; r < rounds + 20; r++) {
    await new Promise((res) => setTimeout(res, 30));
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < perRound; i++) await c.nextId();
    if (r >= 20) {
      timed += process.hrtime.bigint() - t0;
      n += perRound;
    }
  }
  return Number(timed) / n;
}

async function perIdRoundTrip(n = 20_000) {
  const r = new Redis({ host, port, stringNumbers: true });
  for (let i = 0; i < 1000; i++) await r.call('ID.NEXT');
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await r.call('ID.NEXT');
  const ns = Number(process.hrtime.bigint() - t0) / n;
  r.disconnect();
  return ns;
}

async function latencyUnderLoad(c, rate = 100_000, tasks = 4, seconds = 3) {
  const samples = [];
  const perMs = rate / tasks / 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: tasks }, async () => {
      let done = 0;
      for (;;) {
        const elapsed = performance.now() - start;
        if (elapsed >= seconds * 1000) break;
        const owed = Math.floor(elapsed * perMs) - done;
        for (let i = 0; i < owed; i++) {
          const t0 = process.hrtime.bigint();
          await c.nextId();
          samples.push(Number(process.hrtime.bigint() - t0));
        }
        done += Math.max(0, owed);
        await new Promise((r) => setTimeout(r, 1));
      }
    }),
  );
  samples.sort((a, b) => a - b);
  const pick = (q) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] / 1000;
  return { ids: samples.length, ids_per_s: samples.length / seconds, p50_us: pick(0.5), p99_us: pick(0.99), p999_us: pick(0.999), max_us: samples.at(-1) / 1000 };
}

const c = new Client({ servers: [address] });
const buffered = await perIdFromBuffer(c);
const trip = await perIdRoundTrip();
const load = await latencyUnderLoad(c);
console.log(JSON.stringify({ language: 'node', next_id_ns: +buffered.toFixed(1), round_trip_ns: +trip.toFixed(1), ratio: +(trip / buffered).toFixed(1), load, stats: c.stats() }));
await c.close();
