package io.sekka.client;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The Java client's cost per id from its buffer against one ID.NEXT round trip per id (the JDK
 * has no Redis client and Debian packages none, so the round trip is this package's own RESP
 * connection), and nextId() latency while 4 threads draw 100,000 ids/s together. Needs a
 * running server: bench/run_clients.sh passes its RESP address.
 */
public final class Bench {
  private Bench() {}

  public static void main(String[] args) throws Exception {
    String address = args[0];
    try (SekkaClient c = SekkaClient.builder(address).build()) {
      // From the buffer: rounds of 40,000 draws, each after a pause in which the refill (of a
      // batch grown to 100,000) completes, so that no timed call waits for the server (whose
      // own ceiling, 4.1 M ids/s per worker, would be measured instead).
      long sink = 0;
      long timed = 0;
      int n = 0;
      for (int round = 0; round < 150; round++) {
        Thread.sleep(30);
        long t0 = System.nanoTime();
        for (int i = 0; i < 40_000; i++) sink ^= c.nextId();
        if (round >= 50) { // the first 50: JIT and batch growth
          timed += System.nanoTime() - t0;
          n += 40_000;
        }
      }
      double buffered = timed / (double) n;
      long t0;

      int colon = address.lastIndexOf(':');
      double trip;
      try (RespConnection r = new RespConnection(address.substring(0, colon),
          Integer.parseInt(address.substring(colon + 1)), 1000, 1000)) {
        for (int i = 0; i < 2000; i++) r.call("ID.NEXT");
        int m = 20_000;
        t0 = System.nanoTime();
        for (int i = 0; i < m; i++) sink ^= (Long) r.call("ID.NEXT");
        trip = (System.nanoTime() - t0) / (double) m;
      }

      int threads = 4;
      double perMs = 100_000.0 / threads / 1000;
      double seconds = 3;
      List<long[]> samples = new ArrayList<>();
      List<Thread> ts = new ArrayList<>();
      for (int k = 0; k < threads; k++) {
        long[] out = new long[(int) (perMs * 1000 * seconds) + 1000];
        samples.add(out);
        ts.add(new Thread(() -> {
          long start = System.nanoTime();
          int done = 0;
          while (true) {
            double elapsedMs = (System.nanoTime() - start) / 1e6;
            if (elapsedMs >= seconds * 1000) break;
            int owed = (int) (elapsedMs * perMs) - done;
            for (int i = 0; i < owed && done < out.length; i++) {
              long a = System.nanoTime();
              c.nextId();
              out[done++] = System.nanoTime() - a;
            }
            try {
              Thread.sleep(0, 500_000);
            } catch (InterruptedException e) {
              return;
            }
          }
          out[out.length - 1] = done; // how many samples
        }));
      }
      for (Thread t : ts) t.start();
      for (Thread t : ts) t.join();
      long[] all = samples.stream()
          .flatMapToLong(s -> Arrays.stream(s, 0, (int) s[s.length - 1]))
          .sorted()
          .toArray();
      SekkaClient.Stats st = c.stats();
      System.out.printf(
          "{\"language\":\"java\",\"next_id_ns\":%.1f,\"round_trip_ns\":%.1f,\"ratio\":%.1f,"
              + "\"load\":{\"ids\":%d,\"ids_per_s\":%.0f,\"p50_us\":%.3f,\"p99_us\":%.3f,"
              + "\"p999_us\":%.3f,\"max_us\":%.3f},\"stats\":\"%s\",\"sink\":%d}%n",
          buffered, trip, trip / buffered, all.length, all.length / seconds,
          pick(all, 0.5), pick(all, 0.99), pick(all, 0.999), all[all.length - 1] / 1000.0, st,
          sink & 1);
    }
  }

  private static double pick(long[] sorted, double q) {
    return sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))] / 1000.0;
  }
}
