package io.sekka.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** SekkaClient against real `sekka serve` processes on 127.0.0.1. */
class SekkaClientTest {
  private Path root;
  private final List<SekkaServer> servers = new ArrayList<>();
  private final List<SekkaClient> clients = new ArrayList<>();

  @BeforeEach
  void setUp() throws IOException {
    root = Files.createTempDirectory("sekka-java-");
  }

  @AfterEach
  void tearDown() throws Exception {
    for (SekkaClient c : clients) c.close();
    for (SekkaServer s : servers) s.close();
    SekkaServer.deleteTree(root);
  }

  private SekkaServer server(String name, int workerId, String... flags) throws IOException {
    SekkaServer s = SekkaServer.start(root.resolve(name), workerId, flags);
    servers.add(s);
    return s;
  }

  private SekkaClient client(SekkaClient.Builder b) {
    SekkaClient c = b.build();
    clients.add(c);
    return c;
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  @Test
  void eightThreadsTwoClientsTwoServersGiveDistinctIds() throws Exception {
    SekkaServer a = server("a", 1);
    SekkaServer b = server("b", 2);
    // A 10 s timeout: with both servers up no refill may fail over, but on a loaded 2-core
    // machine (the suite runs two tests at once) one can wait past the 1 s default.
    SekkaClient[] cs = {
      client(SekkaClient.builder(a.resp + "," + b.resp).timeoutMs(10_000)),
      client(SekkaClient.builder(b.resp + "," + a.resp).timeoutMs(10_000))
    };
    long[][] perThread = new long[8][100_000];
    List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = new ArrayList<>();
    for (int k = 0; k < 8; k++) {
      final int t = k;
      threads.add(new Thread(() -> {
        try {
          for (int i = 0; i < 100_000; i++) perThread[t][i] = cs[t % 2].nextId();
        } catch (Throwable e) {
          errors.add(e);
        }
      }));
    }
    for (Thread t : threads) t.start();
    for (Thread t : threads) t.join();
    assertEquals(List.of(), errors);
    Set<Long> all = new HashSet<>();
    for (long[] ids : perThread) {
      for (int i = 0; i < ids.length; i++) {
        if (i > 0) assertTrue(ids[i - 1] < ids[i], "ids from one client increase");
        all.add(ids[i]);
      }
    }
    assertEquals(800_000, all.size());
    assertEquals(1, SekkaServer.workerOf(perThread[0][0]));
    assertEquals(2, SekkaServer.workerOf(perThread[1][0]));
    assertEquals(0, cs[0].stats().failovers());
    assertEquals(5, cs[0].nextIds(5).length);
  }

  @Test
  void killNineWhileDrawing() throws Exception {
    SekkaServer a = server("a", 1);
    SekkaServer b = server("b", 2);
    long validityMs = 1000;
    // Fixed batches lasting ~2.5 s at ~400 ids/s: the dead server's ids would still be
    // buffered after the validity period if the client did not drop them.
    SekkaClient c = client(SekkaClient.builder(a.resp + "," + b.resp)
        .validityMs(validityMs).timeoutMs(500).batch(1000, 1000, 1000));
    ConcurrentLinkedQueue<long[]> got = new ConcurrentLinkedQueue<>(); // {nanoTime, id}
    List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
    AtomicBoolean stop = new AtomicBoolean();
    List<Thread> threads = new ArrayList<>();
    for (int k = 0; k < 4; k++) {
      threads.add(new Thread(() -> {
        try {
          while (!stop.get()) {
            got.add(new long[] {System.nanoTime(), c.nextId()});
            Thread.sleep(10);
          }
        } catch (Throwable e) {
          errors.add(e);
        }
      }));
    }
    for (Thread t : threads) t.start();
    Thread.sleep(500);
    long killedAt = System.nanoTime();
    a.kill9();
    Thread.sleep(validityMs + 1500);
    stop.set(true);
    for (Thread t : threads) t.join();
    assertEquals(List.of(), errors);
    Set<Long> ids = new HashSet<>();
    Set<Integer> lateWorkers = new HashSet<>();
    boolean sawDead = false;
    for (long[] g : got) {
      assertTrue(ids.add(g[1]), "an id repeated");
      if (g[0] < killedAt && SekkaServer.workerOf(g[1]) == 1) sawDead = true;
      if (g[0] > killedAt + (validityMs + 200) * 1_000_000) lateWorkers.add(SekkaServer.workerOf(g[1]));
    }
    assertTrue(sawDead);
    assertEquals(Set.of(2), lateWorkers);
    assertTrue(c.stats().failovers() >= 1);
  }

  @Test
  void allDownThenBack() throws Exception {
    String ra = "127.0.0.1:" + freePort();
    String rb = "127.0.0.1:" + freePort();
    SekkaServer a = SekkaServer.startOn(root.resolve("a"), ra, 1);
    SekkaServer b = SekkaServer.startOn(root.resolve("b"), rb, 2);
    servers.add(a);
    servers.add(b);
    SekkaClient c = client(SekkaClient.builder(ra + "," + rb).batch(100, 100, 100)
        .validityMs(60_000).backoffMs(100, 500).timeoutMs(500).connectTimeoutMs(500));
    List<Long> drawn = new ArrayList<>(List.of(c.nextId()));
    a.kill9();
    b.kill9();
    NoServerException e = assertThrows(NoServerException.class, () -> {
      for (int i = 0; i < 10_000; i++) drawn.add(c.nextId());
    });
    assertTrue(e.getMessage().contains(ra) && e.getMessage().contains(rb), e.getMessage());
    assertTrue(drawn.size() <= 201);
    servers.add(SekkaServer.startOn(root.resolve("a"), ra, 1));
    long deadline = System.nanoTime() + 10_000_000_000L;
    long more;
    while (true) {
      try {
        more = c.nextId();
        break;
      } catch (NoServerException again) {
        assertTrue(System.nanoTime() < deadline, "the client did not recover");
        Thread.sleep(100);
      }
    }
    assertFalse(drawn.contains(more));
    assertTrue(more > Collections.max(drawn));
  }

  @Test
  void aClientKeepsTheOptionsItWasBuiltWith() throws Exception {
    SekkaServer a = server("a", 1);
    SekkaClient.Builder b = SekkaClient.builder(a.resp).batch(100, 100, 100);
    SekkaClient c = client(b);
    b.validityMs(-1).batch(1, 1, 1); // build() would refuse these; the client never sees them
    for (int i = 0; i < 1000; i++) assertTrue(c.nextId() > 0);
    assertEquals(0, c.stats().dropped());
    assertTrue(c.stats().refills() <= 11, c.stats().toString());
  }

  @Test
  void aWrongTokenFailsAtTheFirstCall() throws Exception {
    SekkaServer a = server("a", 1, "--auth-token", "right-token-0123456");
    assertTrue(client(SekkaClient.builder(a.resp).token("right-token-0123456")).nextId() > 0);
    long t0 = System.nanoTime();
    AuthException e = assertThrows(AuthException.class,
        () -> client(SekkaClient.builder(a.resp).token("wrong-token-0123456")).nextId());
    assertTrue(System.nanoTime() - t0 < 2_000_000_000L);
    assertTrue(e.getMessage().contains("token"), e.getMessage());
    assertThrows(AuthException.class, () -> client(SekkaClient.builder(a.resp)).nextId());
  }

  @Test
  void aTagsIdsIncreaseAcrossAFailover() throws Exception {
    String store = "sqlite:" + root.resolve("segments.db");
    Process create = new ProcessBuilder(SekkaServer.SEKKA, "segment", "create", "order", "--step",
        "50", "--segment-store", store).start();
    assertEquals(0, create.waitFor());
    SekkaServer a = server("a", 1, "--segment-store", store);
    SekkaServer b = server("b", 2, "--segment-store", store);
    SekkaClient c = client(SekkaClient.builder(a.resp + "," + b.resp).batch(20, 20, 20));
    SekkaClient other = client(SekkaClient.builder(b.resp).batch(20, 20, 20));
    assertTrue(other.next("order") > 0);
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 300; i++) ids.add(c.next("order"));
    a.kill9();
    for (int i = 0; i < 300; i++) ids.add(c.next("order"));
    for (int i = 1; i < ids.size(); i++) assertTrue(ids.get(i - 1) < ids.get(i));
    SekkaException e = assertThrows(SekkaException.class, () -> c.next("no-such-tag"));
    assertTrue(e.getMessage().contains("no-such-tag"), e.getMessage());
  }

  /**
   * Issue 23's finding 2: a connection the server closed (its idle timeout, a restart) failed
   * the next refill and counted against a healthy server. A reused connection that fails before
   * any byte of the reply is tried once more on a fresh one.
   */
  @Test
  void aConnectionTheServerClosedWhileIdleIsReplaced() throws Exception {
    SekkaServer s = server("a", 6, "--idle-timeout", "1s");
    // lowWater 0.01: each batch of 20 is used up before the next refill, which then meets the
    // closed connection with nothing buffered.
    SekkaClient c =
        client(SekkaClient.builder(s.resp).batch(20, 20, 20).lowWater(0.01).validityMs(60_000));
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 20; i++) assertEquals(6, SekkaServer.workerOf(c.nextId()));
      Thread.sleep(1500); // past the server's idle timeout: it closes the connection
    }
    assertEquals("", c.lastErrorOf(0), "a closed idle connection counted as a server failure");
  }
}
