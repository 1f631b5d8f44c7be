package io.sekka.client;

import java.io.IOException;
import java.net.Socket;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.SSLContext;

/**
 * Ids from a local buffer that a background thread refills from a list of sekka servers over the
 * Redis protocol, with failover. Thread-safe; no dependencies beyond the JDK.
 *
 * <pre>{@code
 * try (SekkaClient c = SekkaClient.builder("127.0.0.1:6380,127.0.0.1:6381").build()) {
 *   long orderId = c.nextId();        // from the buffer: no network in steady state
 *   long[] ids = c.nextIds(100);
 *   long invoiceNo = c.next("invoice"); // a segment tag: increasing within this client
 *   long version = c.strict("ledger");  // a strict tag: one request, in the cluster's order
 * }
 * }</pre>
 *
 * <p>Options and failures: docs/clients.md.
 */
public final class SekkaClient implements AutoCloseable {
  private static final Set<String> FAILOVER = Set.of("LEASELOST", "CLOCKBACKWARDS", "UNAVAILABLE");
  private static final Set<String> AUTH = Set.of("NOAUTH", "WRONGPASS");
  /** Batch commands whose ids must come increasing. */
  private static final Set<String> INCREASING = Set.of("SEG.NEXT", "STRICT.BATCH");
  /** The longest any time option may be: a day. */
  private static final long MAX_MS = 86_400_000;
  // A batch refused for its size names the server's server.max_batch (docs/contract.md).
  private static final Pattern ALLOWED =
      Pattern.compile("^ERR count \"\\d+\" is not valid: allowed 1 to (\\d+)$");

  /** Options, with their defaults (times in milliseconds). */
  public static final class Builder {
    private final List<String> servers = new ArrayList<>();
    private String token;
    private int connectTimeoutMs = 1000;
    private int timeoutMs = 1000;
    private int batch = 1000;
    private int minBatch = 100;
    private int maxBatch = 100_000;
    private long targetRefillMs = 1000;
    private double lowWater = 0.5;
    private long validityMs = 10_000;
    private long backoffMinMs = 100;
    private long backoffMaxMs = 5000;
    private long strictWaitMs = 30_000;
    private SSLContext tls; // null: plain TCP

    private Builder(String servers) {
      for (String s : servers.split(",")) this.servers.add(s.trim());
    }

    /** A copy, so that a client keeps the options it was built with. */
    private Builder copy() {
      Builder c = new Builder("");
      c.servers.clear();
      c.servers.addAll(servers);
      c.token = token;
      c.connectTimeoutMs = connectTimeoutMs;
      c.timeoutMs = timeoutMs;
      c.batch = batch;
      c.minBatch = minBatch;
      c.maxBatch = maxBatch;
      c.targetRefillMs = targetRefillMs;
      c.lowWater = lowWater;
      c.validityMs = validityMs;
      c.backoffMinMs = backoffMinMs;
      c.backoffMaxMs = backoffMaxMs;
      c.strictWaitMs = strictWaitMs;
      c.tls = tls;
      return c;
    }

    /** The servers' {@code server.auth_token}, sent with AUTH on each connection. */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    public Builder connectTimeoutMs(int ms) {
      this.connectTimeoutMs = ms;
      return this;
    }

    public Builder timeoutMs(int ms) {
      this.timeoutMs = ms;
      return this;
    }

    /** First batch size (1000), adapting within [min (100), max (100000)]. */
    public Builder batch(int first, int min, int max) {
      this.batch = first;
      this.minBatch = min;
      this.maxBatch = max;
      return this;
    }

    /** A batch should last about this long (1000 ms): shorter doubles it, over twice halves it. */
    public Builder targetRefillMs(long ms) {
      this.targetRefillMs = ms;
      return this;
    }

    /** Refill when less than this share of a batch is left (0.5). */
    public Builder lowWater(double share) {
      this.lowWater = share;
      return this;
    }

    /** Buffered ids older than this are dropped (10000 ms). */
    public Builder validityMs(long ms) {
      this.validityMs = ms;
      return this;
    }

    /** A failed server is skipped for min (100 ms), doubling up to max (5000 ms). */
    public Builder backoffMs(long min, long max) {
      this.backoffMinMs = min;
      this.backoffMaxMs = max;
      return this;
    }

    /**
     * How long a strict call tries the servers, again and again, before it throws
     * NoServerException (30000 ms): a strict tag's leader failover takes the servers'
     * worker.lease_ttl and a few seconds.
     */
    public Builder strictWaitMs(long ms) {
      this.strictWaitMs = ms;
      return this;
    }

    /**
     * TLS to the servers with this context (TLS 1.2 or later; the server's certificate must
     * name the host it is reached by); null: plain TCP.
     */
    public Builder tls(SSLContext context) {
      this.tls = context;
      return this;
    }

    /**
     * TLS from PEM files: {@code caFile} signed the servers' certificates ({@code "system"}: the
     * JDK's CAs); {@code certFile} and {@code keyFile} (PKCS#8), a client certificate for servers
     * that require one, or both null.
     *
     * @throws IllegalArgumentException naming the file that cannot be used
     */
    public Builder tlsFiles(String caFile, String certFile, String keyFile) {
      this.tls = TlsFiles.context(caFile, certFile, keyFile);
      return this;
    }

    /** @throws IllegalArgumentException naming the first option out of its range */
    public SekkaClient build() {
      check();
      return new SekkaClient(copy());
    }

    private void check() {
      if (!(1 <= minBatch && minBatch <= batch && batch <= maxBatch
          && maxBatch <= RespConnection.MAX_ARRAY)) {
        throw new IllegalArgumentException(String.format(
            "batch sizes min %d, first %d, max %d: allowed 1 <= min <= first <= max <= %d",
            minBatch, batch, maxBatch, RespConnection.MAX_ARRAY));
      }
      if (!(lowWater > 0 && lowWater < 1)) {
        throw new IllegalArgumentException("lowWater = " + lowWater + ": allowed above 0 and below 1");
      }
      positive("connectTimeoutMs", connectTimeoutMs);
      positive("timeoutMs", timeoutMs);
      positive("targetRefillMs", targetRefillMs);
      positive("validityMs", validityMs);
      positive("backoff min", backoffMinMs);
      positive("strictWaitMs", strictWaitMs);
      if (backoffMaxMs < backoffMinMs) {
        throw new IllegalArgumentException(
            "backoff max = " + backoffMaxMs + " ms: allowed at least min (" + backoffMinMs + ")");
      }
    }

    private static void positive(String name, long ms) {
      if (ms <= 0 || ms > MAX_MS) {
        throw new IllegalArgumentException(
            name + " = " + ms + ": allowed 1 to " + MAX_MS + " ms (a day)");
      }
    }
  }

  /** Counters since the client was made. */
  public record Stats(long served, long refills, long failovers, long buffered, long dropped) {}

  private static final class Server {
    final String host;
    final int port;
    final String name;
    RespConnection conn;
    long downUntil;
    long backoff;
    String lastError = "";

    /** "host:port" or "[v6 address]:port", the {@code index}th of the servers. */
    Server(String hostPort, int index) {
      int colon = hostPort.lastIndexOf(':');
      String digits = colon > 0 ? hostPort.substring(colon + 1) : "";
      int p = digits.matches("\\d{1,5}") ? Integer.parseInt(digits) : -1;
      String h = colon > 0 ? hostPort.substring(0, colon) : "";
      if (h.startsWith("[") && h.endsWith("]")) h = h.substring(1, h.length() - 1);
      if (p < 1 || p > 65535 || h.isEmpty()) {
        throw new IllegalArgumentException(
            "servers[" + index + "] = \"" + hostPort + "\" is not host:port (a port from 1 to 65535)");
      }
      host = h;
      port = p;
      name = hostPort;
    }

    void drop() {
      if (conn != null) conn.close();
      conn = null;
    }
  }

  private static final class Batch {
    final long[] ids;
    final long expires; // System.nanoTime()
    int pos;

    Batch(long[] ids, long expires) {
      this.ids = ids;
      this.expires = expires;
    }
  }

  private static final class Stream {
    final String tag; // null: snowflake ids
    final ArrayDeque<Batch> batches = new ArrayDeque<>();
    int size;
    boolean wanted;
    boolean busy;
    long attempts;
    RuntimeException error;
    long retryAt;
    long high = -1;
    long lastRefill = -1;
    long left; // ids in batches not handed out yet
    long lowMark; // refill below this many: lowWater * size

    Stream(String tag, int size, double lowWater) {
      this.tag = tag;
      this.size = size;
      this.lowMark = (long) (lowWater * size);
    }
  }

  private final Builder o;
  // Guards aborted, and each pool's connecting socket and its servers' conn fields.
  private final Object connections = new Object();
  private boolean aborted; // close() began: no connection is made any more
  private final Pool pool; // the refill thread's
  // Strict calls have connections (and backoffs) of their own, used by one caller at a time
  // (strictLock): a strict id is never buffered, and a tag without a leader for a while must
  // not hold back the refills.
  private final Pool strictPool;
  private final ReentrantLock strictLock = new ReentrantLock();
  private int minBatch; // the builder's, lowered to a server's max_batch when it refuses more
  private int maxBatch;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private final Map<String, Stream> streams = new HashMap<>();
  private final Stream ids; // snowflake ids
  private boolean closed;
  private long served;
  private long refills;
  private long failovers;
  private long dropped;
  private final long maxWaitNanos;
  private final Thread refiller;

  private SekkaClient(Builder b) {
    if (b.servers.isEmpty() || (b.servers.size() == 1 && b.servers.get(0).isEmpty())) {
      throw new IllegalArgumentException("servers is empty: give at least one host:port");
    }
    this.o = b;
    this.minBatch = b.minBatch;
    this.maxBatch = b.maxBatch;
    this.pool = new Pool(b.servers);
    this.strictPool = new Pool(b.servers);
    this.ids = new Stream(null, b.batch, b.lowWater);
    this.maxWaitNanos =
        TimeUnit.MILLISECONDS.toNanos(
            2L * ((long) b.connectTimeoutMs + b.timeoutMs) * b.servers.size() + 1000);
    this.refiller = new Thread(this::refillLoop, "sekka-refill");
    refiller.setDaemon(true);
    refiller.start();
  }

  /** A builder for {@code servers}: "host:port,host:port". */
  public static Builder builder(String servers) {
    return new Builder(Objects.requireNonNull(servers, "servers"));
  }

  /** The next snowflake id. @throws SekkaException (NoServerException, AuthException) */
  public long nextId() {
    return take(ids);
  }

  /** {@code n} snowflake ids, in the order they were served. */
  public long[] nextIds(int n) {
    if (n < 0) throw new IllegalArgumentException("n must be 0 or more");
    long[] out = new long[n];
    for (int i = 0; i < n; i++) out[i] = take(ids);
    return out;
  }

  /** The next id of segment tag {@code tag}, above every id this client gave for it. */
  public long next(String tag) {
    if (tag == null || tag.isEmpty()) throw new IllegalArgumentException("tag is empty");
    Stream s;
    lock.lock();
    try {
      s = streams.computeIfAbsent(tag, t -> new Stream(t, o.batch, o.lowWater));
    } finally {
      lock.unlock();
    }
    return take(s);
  }

  /**
   * The next strict id of {@code tag} (docs/contract.md section 15): larger than every id of the
   * tag that any client of the cluster got before this call began.
   */
  public long strict(String tag) {
    return strictBatch(tag, 1)[0];
  }

  /**
   * {@code n} consecutive strict ids of {@code tag}, larger than every id of the tag that any
   * client got before this call began. One request, never buffered: on a connection error, a
   * timeout or an -UNAVAILABLE (a leader failover) the servers are tried again, in turn and with
   * their backoff, for up to strictWaitMs; then NoServerException.
   */
  public long[] strictBatch(String tag, int n) {
    if (tag == null || tag.isEmpty()) throw new IllegalArgumentException("tag is empty");
    if (n < 1 || n > RespConnection.MAX_ARRAY) {
      throw new IllegalArgumentException(
          "n = " + n + ": allowed 1 to " + RespConnection.MAX_ARRAY);
    }
    String[] args = {"STRICT.BATCH", tag, Integer.toString(n)};
    // strictWaitMs bounds the whole call, its turn for the connections included.
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(o.strictWaitMs);
    try {
      if (!strictLock.tryLock(o.strictWaitMs, TimeUnit.MILLISECONDS)) {
        throw new NoServerException("no strict ids within " + o.strictWaitMs
            + " ms: the client's other strict calls held its connections");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new SekkaException("interrupted while waiting for the strict connections");
    }
    try {
      while (true) {
        if (isClosed()) throw new ClosedException();
        long[] got;
        try {
          got = strictPool.call(n, args);
        } catch (NoServerException e) {
          if (pauseUntil(strictPool.soonestUp(), deadline)) continue;
          if (isClosed()) throw new ClosedException();
          throw new NoServerException(
              "no strict ids within " + o.strictWaitMs + " ms: " + e.getMessage());
        }
        if (got[n - 1] - got[0] != n - 1) {
          throw new SekkaException("the ids of STRICT.BATCH " + tag + " " + n
              + " are not consecutive: " + got[0] + " to " + got[n - 1]);
        }
        return got;
      }
    } finally {
      strictLock.unlock();
    }
  }

  /**
   * Sleeps to {@code until} (System.nanoTime()), or wakes at close(); false when {@code until}
   * is not before {@code deadline}, or the client closed.
   */
  private boolean pauseUntil(long until, long deadline) {
    if (until - deadline >= 0) return false;
    lock.lock();
    try {
      for (long left = until - System.nanoTime(); left > 0 && !closed; ) {
        left = changed.awaitNanos(left);
      }
      return !closed;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new SekkaException("interrupted while waiting for a server");
    } finally {
      lock.unlock();
    }
  }

  private boolean isClosed() {
    lock.lock();
    try {
      return closed;
    } finally {
      lock.unlock();
    }
  }

  /** Server i's last error ("" when it has not failed), for this package's tests. */
  String lastErrorOf(int i) {
    return pool.servers.get(i).lastError;
  }

  public Stats stats() {
    lock.lock();
    try {
      long buffered = 0;
      for (Stream s : allStreams()) buffered += s.left;
      return new Stats(served, refills, failovers, buffered, dropped);
    } finally {
      lock.unlock();
    }
  }

  /**
   * Stops the refill (a call in flight is cut off at once), wakes waiting callers with {@link
   * ClosedException}, and closes every connection; later calls throw ClosedException too.
   */
  @Override
  public void close() {
    lock.lock();
    try {
      closed = true;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    synchronized (connections) {
      aborted = true;
      pool.abort();
      strictPool.abort();
    }
    boolean interrupted = false;
    while (refiller.isAlive()) {
      try {
        refiller.join();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) Thread.currentThread().interrupt();
    for (Server s : pool.servers) s.drop();
    strictLock.lock(); // a strict call in flight has ended: the abort cut it off
    try {
      for (Server s : strictPool.servers) s.drop();
    } finally {
      strictLock.unlock();
    }
  }

  private List<Stream> allStreams() {
    List<Stream> all = new ArrayList<>(streams.values());
    all.add(ids);
    return all;
  }

  /** An id from the buffer or -1, asking for a refill at the low-water mark. Lock held. */
  private long pop(Stream s) {
    long now = System.nanoTime();
    Batch b = s.batches.peekFirst();
    while (b != null && (b.pos == b.ids.length || now - b.expires >= 0)) {
      s.batches.pollFirst();
      s.left -= b.ids.length - b.pos;
      dropped += b.ids.length - b.pos;
      b = s.batches.peekFirst();
    }
    if (s.left < s.lowMark && !s.wanted && !s.busy && now - s.retryAt >= 0) {
      s.wanted = true;
      changed.signalAll();
    }
    if (b == null) return -1;
    served++;
    s.left--;
    return b.ids[b.pos++];
  }

  private long take(Stream s) {
    lock.lock();
    try {
      if (closed) throw new ClosedException();
      long v = pop(s);
      if (v >= 0) return v;
      long start = s.attempts;
      long deadline = System.nanoTime() + maxWaitNanos;
      while (true) {
        if (!s.wanted && !s.busy) {
          s.wanted = true;
          changed.signalAll();
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new NoServerException(
              "no ids within " + TimeUnit.NANOSECONDS.toMillis(maxWaitNanos) + " ms from "
                  + pool.names());
        }
        try {
          changed.awaitNanos(left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new SekkaException("interrupted while waiting for ids");
        }
        if (closed) throw new ClosedException();
        v = pop(s);
        if (v >= 0) return v;
        if (s.attempts > start) {
          if (s.error != null) throw s.error;
          start = s.attempts; // a refill with nothing usable: ask again
        }
      }
    } finally {
      lock.unlock();
    }
  }

  private void refillLoop() {
    while (true) {
      Stream s = null;
      int n;
      lock.lock();
      try {
        while (!closed && (s = wantedStream()) == null) changed.awaitUninterruptibly();
        if (closed) return;
        s.wanted = false;
        s.busy = true;
        long now = System.nanoTime();
        if (s.lastRefill >= 0) { // adapt: how long did the last batch last?
          long lasted = TimeUnit.NANOSECONDS.toMillis(now - s.lastRefill);
          if (lasted < o.targetRefillMs / 2) {
            s.size = Math.min(maxBatch, s.size * 2);
          } else if (lasted > o.targetRefillMs * 2) {
            s.size = Math.max(minBatch, s.size / 2);
          }
        }
        n = s.size;
        s.lowMark = (long) (o.lowWater * n);
      } finally {
        lock.unlock();
      }
      long[] got = null;
      RuntimeException error = null;
      try {
        got =
            s.tag == null
                ? pool.call(n, "ID.BATCH", Integer.toString(n))
                : pool.call(n, "SEG.NEXT", s.tag, Integer.toString(n));
      } catch (RuntimeException e) {
        error = e;
      }
      lock.lock();
      try {
        s.busy = false;
        if (error != null && learnMaxBatch(error, n)) {
          s.size = maxBatch;
          s.wanted = true; // at once, with the server's size: not a failure
          continue;
        }
        s.attempts++;
        s.error = error;
        if (error == null) {
          refills++;
          s.lastRefill = System.nanoTime();
          if (s.tag != null) { // a tag's ids stay increasing within the client
            int keep = 0;
            for (long id : got) if (id > s.high) got[keep++] = id;
            dropped += got.length - keep;
            got = java.util.Arrays.copyOf(got, keep);
          }
          if (got.length > 0) {
            s.high = Math.max(s.high, got[got.length - 1]);
            s.batches.addLast(
                new Batch(got, s.lastRefill + TimeUnit.MILLISECONDS.toNanos(o.validityMs)));
            s.left += got.length;
          }
        } else {
          s.retryAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(o.backoffMinMs);
        }
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }

  private Stream wantedStream() {
    if (ids.wanted) return ids;
    for (Stream s : streams.values()) if (s.wanted) return s;
    return null;
  }

  /**
   * A batch of {@code n} refused because the server allows fewer ("... allowed 1 to M", its
   * server.max_batch): the client keeps to M from now on. Lock held.
   */
  private boolean learnMaxBatch(RuntimeException error, int n) {
    String message = String.valueOf(error.getMessage());
    Matcher m = ALLOWED.matcher(message.substring(message.indexOf(": ") + 2));
    if (error.getClass() != SekkaException.class || !m.matches()) return false;
    if (m.group(1).length() > 9) return false; // above any batch this client asks for
    long most = Long.parseLong(m.group(1));
    if (most <= 0 || most >= n) return false;
    maxBatch = (int) most;
    minBatch = Math.min(minBatch, maxBatch);
    return true;
  }

  /**
   * The ids of a batch reply, which must be an array of exactly {@code n} distinct ids (integers,
   * or decimal bulk strings), not negative, increasing if {@code increasing} (a tag's; a
   * snowflake layout may be descending or sharded): anything else is a broken server
   * (docs/contract.md), and fails the call over like a connection error.
   */
  private static long[] batchIds(Object reply, int n, boolean increasing) throws IOException {
    if (!(reply instanceof List<?> list) || list.size() != n) {
      throw new IOException("a reply to a batch of " + n + " that is not " + n + " ids");
    }
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      Object x = list.get(i);
      long id = -1;
      if (x instanceof Long l) {
        id = l;
      } else if (x instanceof String text && text.matches("\\d{1,19}")) {
        try {
          id = Long.parseLong(text);
        } catch (NumberFormatException e) {
          id = -1; // above the largest long
        }
      }
      if (id < 0 || (increasing && i > 0 && id <= out[i - 1])) {
        throw new IOException("not an id, or not increasing, in a batch: " + x + " at " + i);
      }
      out[i] = id;
    }
    if (!increasing) {
      long[] sorted = out.clone();
      java.util.Arrays.sort(sorted);
      for (int i = 1; i < n; i++) {
        if (sorted[i] == sorted[i - 1]) throw new IOException("an id twice in a batch: " + sorted[i]);
      }
    }
    return out;
  }

  private boolean aborted() {
    synchronized (connections) {
      return aborted;
    }
  }

  /**
   * The servers, with a connection each, their backoffs and the current one. Used by one thread
   * at a time: the refill thread ({@code pool}), or the strict caller holding strictLock.
   */
  private final class Pool {
    final List<Server> servers = new ArrayList<>();
    private int current;
    private Socket connecting; // the socket connecting now, if any (guarded by connections)
    private final RespConnection.Opening opening =
        new RespConnection.Opening() {
          @Override
          public void begin(Socket socket) throws IOException {
            synchronized (connections) {
              if (aborted) throw new ClosedException();
              connecting = socket;
            }
          }

          @Override
          public void end(Socket socket) {
            synchronized (connections) {
              connecting = null;
            }
          }
        };

    Pool(List<String> names) {
      for (String name : names) servers.add(new Server(name, servers.size()));
    }

    /** Ends a blocked read or a connect in progress. Holds connections. */
    void abort() {
      for (Server s : servers) if (s.conn != null) s.conn.close();
      if (connecting != null) {
        try {
          connecting.close();
        } catch (IOException ignored) {
          // closing: nothing to do
        }
      }
    }

    String names() {
      StringBuilder sb = new StringBuilder();
      for (Server s : servers) sb.append(sb.length() > 0 ? ", " : "").append(s.name);
      return sb.toString();
    }

    /** When the first server's backoff runs out (System.nanoTime()). */
    long soonestUp() {
      long soonest = servers.get(0).downUntil;
      for (Server s : servers) if (s.downUntil - soonest < 0) soonest = s.downUntil;
      return soonest;
    }

    /**
     * {@code args} on server {@code s}. A connection made before this call that fails before
     * any byte of the reply (the server closed it while idle, or restarted) is replaced and the
     * command sent once more, without counting against the server: a command the server did run
     * costs a range, never an id.
     */
    private long[] callOn(Server s, int n, String[] args) throws IOException {
      boolean reused = s.conn != null;
      RespConnection conn = reused ? s.conn : connect(s);
      boolean increasing = INCREASING.contains(args[0]);
      try {
        return batchIds(conn.batch(n, args), n, increasing);
      } catch (RespConnection.StaleConnection e) {
        if (!reused || aborted()) throw e;
        s.drop();
        return batchIds(connect(s).batch(n, args), n, increasing);
      }
    }

    /** Server {@code s}'s new connection, authenticated; none once close() began. */
    private RespConnection connect(Server s) throws IOException {
      if (aborted()) throw new ClosedException();
      RespConnection conn =
          new RespConnection(s.host, s.port, o.connectTimeoutMs, o.timeoutMs, o.tls, opening);
      synchronized (connections) {
        if (aborted) {
          conn.close();
          throw new ClosedException();
        }
        s.conn = conn;
      }
      if (o.token != null) {
        try {
          conn.call("AUTH", o.token);
        } catch (RespConnection.ErrorReply e) {
          s.drop();
          throw new AuthException("sekka server " + s.name + " refused the token: " + e.getMessage());
        }
      }
      return conn;
    }

    /**
     * The {@code count} ids of the first server that answers batch command {@code args}, from
     * the current one.
     */
    long[] call(int count, String... args) {
      long now = System.nanoTime();
      int n = servers.size();
      List<Integer> up = new ArrayList<>();
      int soonest = current;
      for (int k = 0; k < n; k++) {
        int i = (current + k) % n;
        if (now - servers.get(i).downUntil >= 0) up.add(i);
        if (servers.get(i).downUntil - servers.get(soonest).downUntil < 0) soonest = i;
      }
      if (up.isEmpty()) up.add(soonest); // all backing off: the one that comes back first
      List<Integer> tried = new ArrayList<>();
      for (int i : up) {
        Server s = servers.get(i);
        try {
          long[] reply = callOn(s, count, args);
          s.backoff = 0;
          s.downUntil = 0;
          if (i != current) {
            countFailover();
            current = i;
          }
          return reply;
        } catch (RespConnection.ErrorReply e) {
          if (AUTH.contains(e.prefix)) {
            s.drop();
            throw new AuthException("sekka server " + s.name + ": " + e.getMessage());
          }
          if (!FAILOVER.contains(e.prefix)) {
            throw new SekkaException("sekka server " + s.name + ": " + e.getMessage());
          }
          s.lastError = e.getMessage();
        } catch (IOException e) {
          if (aborted()) throw new ClosedException();
          s.lastError = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        tried.add(i);
        s.drop();
        s.backoff = Math.min(o.backoffMaxMs, Math.max(o.backoffMinMs, s.backoff * 2));
        s.downUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(s.backoff);
      }
      // Every server, with its last error (those backing off were not tried this time).
      List<String> each = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        Server s = servers.get(i);
        each.add(s.name + " (" + s.lastError + (tried.contains(i) ? "" : "; backing off") + ")");
      }
      throw new NoServerException(
          "no sekka server could serve " + String.join(" ", args) + ": " + String.join(", ", each));
    }
  }

  private void countFailover() {
    lock.lock();
    try {
      failovers++;
    } finally {
      lock.unlock();
    }
  }
}
