// The npm generators beside sekka's (bench/run_uuid.sh): ids/s for uuid's v7() and ulid's
// monotonicFactory(), single ids as strings (what they make), for SECONDS seconds each.
// Prints CSV lines: generator,ids,seconds,ids_per_s.
import { v7 } from 'uuid';
import { monotonicFactory } from 'ulid';

const seconds = Number(process.argv[2] ?? 2);
function measure(name, next) {
  let n = 0;
  let sink = 0;
  const end = performance.now() + seconds * 1000;
  let now = performance.now();
  const start = now;
  while (now < end) {
    for (let i = 0; i < 1000; ++i) sink += next().length;
    n += 1000;
    now = performance.now();
  }
  const s = (now - start) / 1000;
  console.log(`${name},${n},${s.toFixed(2)},${Math.round(n / s)}`);
  return sink;
}
measure('npm uuid v7', v7);
measure('npm ulid monotonic', monotonicFactory());
