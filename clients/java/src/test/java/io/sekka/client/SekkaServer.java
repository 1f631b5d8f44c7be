package io.sekka.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** A real `sekka serve` on 127.0.0.1 for the tests ($SEKKA_BIN), stopped by its PID. */
final class SekkaServer implements AutoCloseable {
  static final String SEKKA = System.getenv().getOrDefault("SEKKA_BIN", "../../build/cli/sekka");
  private static final Pattern LISTEN =
      Pattern.compile("Redis protocol on (\\S+?)(?:, Thrift on \\S+)? \\(worker id (\\d+)");

  final Process process;
  final String resp;
  final Path dir;

  SekkaServer(Path dir, String resp, String... flags) throws IOException {
    this.dir = dir;
    List<String> args = new ArrayList<>(List.of(SEKKA, "serve", "--http", "127.0.0.1:0", "--resp",
        resp, "--data-dir", dir.toString()));
    args.addAll(List.of(flags));
    ProcessBuilder builder = new ProcessBuilder(args);
    // Each server is a host of its own (its own worker lock dir).
    builder.environment().put("SEKKA_WORKER_LOCK_DIR", dir.resolve("host-locks").toString());
    process = builder
        .redirectError(dir.resolveSibling(dir.getFileName() + ".log").toFile())
        .start();
    BufferedReader out = new BufferedReader(
        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    String first = out.readLine();
    Matcher m = first == null ? null : LISTEN.matcher(first);
    if (m == null || !m.find()) throw new IOException("sekka serve did not start: " + first);
    this.resp = m.group(1);
  }

  static SekkaServer start(Path dir, int workerId, String... flags) throws IOException {
    return startOn(dir, "127.0.0.1:0", workerId, flags);
  }

  static SekkaServer startOn(Path dir, String resp, int workerId, String... flags)
      throws IOException {
    List<String> all = new ArrayList<>(
        List.of("--worker-source", "static", "--worker-id", Integer.toString(workerId)));
    all.addAll(List.of(flags));
    return new SekkaServer(dir, resp, all.toArray(new String[0]));
  }

  void kill9() {
    process.destroyForcibly();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    if (!process.isAlive()) return;
    process.destroy();
    try {
      if (process.waitFor(15, TimeUnit.SECONDS)) return;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    kill9();
  }

  static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) return;
    try (var walk = Files.walk(root)) {
      for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
    }
  }

  /** The sekka layout: worker id in bits 12..21. */
  static int workerOf(long id) {
    return (int) ((id >>> 12) & 1023);
  }
}
