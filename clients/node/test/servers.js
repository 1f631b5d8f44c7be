// Starts real `sekka serve` processes on 127.0.0.1 for the tests (ports the kernel picks, or
// given), reads where they listen from their first stdout line, and stops them by PID.

import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

export const SEKKA = process.env.SEKKA_BIN ?? path.resolve('../../build/cli/sekka');
const LISTEN_RE = /HTTP (?:on http:\/\/(\S+)|off), Redis protocol (?:on (\S+?)|off)(?:, Thrift on (\S+))? \(worker id (\d+)/;

export function tempDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'sekka-node-'));
}

export async function startServer(dataDir, flags = [], { resp = '127.0.0.1:0', env = {} } = {}) {
  const proc = spawn(SEKKA, ['serve', '--http', '127.0.0.1:0', '--resp', resp, '--data-dir', dataDir, ...flags], {
    stdio: ['ignore', 'pipe', 'ignore'],
    // Each server is a host of its own (its own worker lock dir).
    env: { ...process.env, SEKKA_WORKER_LOCK_DIR: path.join(dataDir, 'host-locks'), ...env },
  });
  const lines = readline.createInterface({ input: proc.stdout });
  const first = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('sekka serve did not start in 30 s')), 30000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sekka serve exited with ${code}`));
    });
  });
  const m = LISTEN_RE.exec(first);
  if (!m) throw new Error(`unexpected first line: ${first}`);
  return {
    proc,
    resp: m[2],
    port: Number(m[2].split(':').pop()),
    workerId: Number(m[4]),
    stop(signal = 'SIGTERM') {
      return new Promise((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill(signal);
      });
    },
  };
}

export function createTag(store, tag, step, start = 1) {
  execFileSync(SEKKA, ['segment', 'create', tag, '--step', String(step), '--start', String(start),
    '--segment-store', store]);
}

// The sekka layout: worker id in bits 12..21.
export const workerOf = (id) => Number((BigInt(id) >> 12n) & 1023n);
