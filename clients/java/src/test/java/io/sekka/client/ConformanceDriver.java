package io.sekka.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Java client's conformance driver (tests/conformance/PROTOCOL.md): JSON requests on stdin,
 * one JSON reply a line on stdout. The JDK has no JSON parser; requests are small flat objects,
 * read by {@link Json}.
 */
public final class ConformanceDriver {
  private SekkaClient client;

  public static void main(String[] args) throws Exception {
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    ConformanceDriver d = new ConformanceDriver();
    for (String line; (line = in.readLine()) != null; ) {
      Map<String, Object> req = Json.object(line);
      long start = System.nanoTime();
      StringBuilder reply = new StringBuilder("{");
      try {
        d.handle(req, reply);
      } catch (RuntimeException e) {
        reply.setLength(1);
        error(reply, e, "open".equals(req.get("op")));
      }
      reply.append(reply.length() > 1 ? "," : "");
      reply.append("\"ms\":").append((System.nanoTime() - start) / 1e6).append('}');
      out.println(reply);
      if ("exit".equals(req.get("op"))) return;
    }
  }

  private void handle(Map<String, Object> req, StringBuilder reply) {
    String op = (String) req.get("op");
    switch (op) {
      case "open" -> {
        client = open((String) req.get("servers"), Json.map(req.get("options")));
        reply.append("\"ok\":true");
      }
      case "ids", "tag" -> {
        int n = ((Number) req.get("n")).intValue();
        List<Long> ids = new ArrayList<>();
        try {
          for (int i = 0; i < n; i++) {
            ids.add(op.equals("ids") ? client.nextId() : client.next((String) req.get("tag")));
          }
          appendIds(reply, ids);
        } catch (RuntimeException e) {
          appendIds(reply, ids);
          reply.append(',');
          error(reply, e, false);
        }
      }
      case "strict" -> {
        List<Long> ids = new ArrayList<>();
        try {
          int n = count(req);
          for (int i = 0; i < n; i++) ids.add(client.strict((String) req.get("tag")));
          appendIds(reply, ids);
        } catch (RuntimeException e) {
          appendIds(reply, ids);
          reply.append(',');
          error(reply, e, true);
        }
      }
      case "strict_batch" -> {
        List<Long> ids = new ArrayList<>();
        try {
          for (long id : client.strictBatch((String) req.get("tag"), count(req))) {
            ids.add(id);
          }
          appendIds(reply, ids);
        } catch (RuntimeException e) {
          error(reply, e, true);
        }
      }
      case "batch" -> {
        List<Long> ids = new ArrayList<>();
        for (long id : client.nextIds(((Number) req.get("n")).intValue())) ids.add(id);
        appendIds(reply, ids);
      }
      case "stats" -> {
        SekkaClient.Stats s = client.stats();
        reply.append(String.format(
            "\"stats\":{\"served\":%d,\"refills\":%d,\"failovers\":%d,\"buffered\":%d,\"dropped\":%d}",
            s.served(), s.refills(), s.failovers(), s.buffered(), s.dropped()));
      }
      case "close" -> {
        client.close();
        reply.append("\"ok\":true");
      }
      case "exit" -> reply.append("\"ok\":true");
      default -> throw new IllegalStateException("unknown op " + op);
    }
  }

  /** The request's n; one an int cannot hold is refused here, as javac would refuse it. */
  private static int count(Map<String, Object> req) {
    Object v = req.get("n");
    if (!(v instanceof Long l) || l != (int) (long) l) {
      throw new IllegalArgumentException("n = " + v + ": not an int");
    }
    return (int) (long) l;
  }

  private static SekkaClient open(String servers, Map<String, Object> o) {
    SekkaClient.Builder b = SekkaClient.builder(servers);
    if (o.containsKey("token")) b.token((String) o.get("token"));
    if (o.containsKey("connect_timeout_ms")) b.connectTimeoutMs(num(o, "connect_timeout_ms", 0));
    if (o.containsKey("timeout_ms")) b.timeoutMs(num(o, "timeout_ms", 0));
    if (o.containsKey("batch") || o.containsKey("min_batch") || o.containsKey("max_batch")) {
      b.batch(num(o, "batch", 1000), num(o, "min_batch", 100), num(o, "max_batch", 100_000));
    }
    if (o.containsKey("target_refill_ms")) b.targetRefillMs(whole(o, "target_refill_ms"));
    if (o.containsKey("low_water")) b.lowWater(((Number) o.get("low_water")).doubleValue());
    if (o.containsKey("validity_ms")) b.validityMs(whole(o, "validity_ms"));
    if (o.containsKey("backoff_min_ms") || o.containsKey("backoff_max_ms")) {
      b.backoffMs(
          o.containsKey("backoff_min_ms") ? whole(o, "backoff_min_ms") : 100,
          o.containsKey("backoff_max_ms") ? whole(o, "backoff_max_ms") : 5000);
    }
    if (o.containsKey("strict_wait_ms")) b.strictWaitMs(whole(o, "strict_wait_ms"));
    if (o.containsKey("tls_ca_file") || o.containsKey("tls_cert_file")
        || o.containsKey("tls_key_file")) {
      b.tlsFiles(
          (String) o.getOrDefault("tls_ca_file", "system"),
          (String) o.get("tls_cert_file"),
          (String) o.get("tls_key_file"));
    }
    return b.build();
  }

  /** An int option; a value an int cannot hold is refused here, as javac would refuse it. */
  private static int num(Map<String, Object> o, String key, int otherwise) {
    Object v = o.get(key);
    if (v == null) return otherwise;
    if (!(v instanceof Long l) || l != (int) (long) l) {
      throw new IllegalArgumentException(key + " = " + v + ": not an int");
    }
    return (int) (long) l;
  }

  /** A long option; a fraction is refused here. */
  private static long whole(Map<String, Object> o, String key) {
    Object v = o.get(key);
    if (!(v instanceof Long l)) throw new IllegalArgumentException(key + " = " + v + ": not a long");
    return l;
  }

  private static void appendIds(StringBuilder reply, List<Long> ids) {
    reply.append("\"ids\":[");
    for (int i = 0; i < ids.size(); i++) reply.append(i > 0 ? ",\"" : "\"").append(ids.get(i)).append('"');
    reply.append(']');
  }

  private static void error(StringBuilder reply, RuntimeException e, boolean argument) {
    String kind;
    if (e.getClass().getSimpleName().equals("ClosedException")) {
      kind = "closed";
    } else if (e instanceof AuthException) {
      kind = "auth";
    } else if (e instanceof NoServerException) {
      kind = "no_server";
    } else if (e instanceof SekkaException) {
      kind = "refused";
    } else if (argument && e instanceof IllegalArgumentException) {
      kind = "invalid_argument";
    } else {
      kind = "other:" + e.getClass().getName();
    }
    reply.append("\"error\":").append(Json.quote(kind));
    reply.append(",\"message\":").append(Json.quote(String.valueOf(e.getMessage())));
  }

  /** Just enough JSON for the requests: objects, strings, numbers, true, false, null. */
  static final class Json {
    private final String s;
    private int at;

    private Json(String s) {
      this.s = s;
    }

    static Map<String, Object> object(String text) {
      return map(new Json(text).value());
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> map(Object v) {
      return v == null ? Map.of() : (Map<String, Object>) v;
    }

    static String quote(String text) {
      StringBuilder b = new StringBuilder("\"");
      for (char c : text.toCharArray()) {
        if (c == '"' || c == '\\') b.append('\\').append(c);
        else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
        else b.append(c);
      }
      return b.append('"').toString();
    }

    private Object value() {
      skip();
      char c = s.charAt(at);
      if (c == '{') return parseObject();
      if (c == '"') return parseString();
      if (s.startsWith("true", at)) return literal(4, Boolean.TRUE);
      if (s.startsWith("false", at)) return literal(5, Boolean.FALSE);
      if (s.startsWith("null", at)) return literal(4, null);
      int end = at;
      while (end < s.length() && "+-0123456789.eE".indexOf(s.charAt(end)) >= 0) end++;
      String number = s.substring(at, end);
      at = end;
      if (!number.matches("-?\\d+")) return Double.parseDouble(number);
      try {
        return Long.parseLong(number);
      } catch (NumberFormatException e) {
        return new java.math.BigInteger(number); // beyond a long: no option or count holds it
      }
    }

    private Object literal(int length, Object v) {
      at += length;
      return v;
    }

    private Map<String, Object> parseObject() {
      Map<String, Object> out = new LinkedHashMap<>();
      at++;
      skip();
      if (s.charAt(at) == '}') {
        at++;
        return out;
      }
      while (true) {
        skip();
        String key = parseString();
        skip();
        at++; // ':'
        out.put(key, value());
        skip();
        if (s.charAt(at++) == '}') return out;
      }
    }

    private String parseString() {
      StringBuilder b = new StringBuilder();
      at++;
      while (s.charAt(at) != '"') {
        char c = s.charAt(at++);
        if (c == '\\') {
          char e = s.charAt(at++);
          if (e == 'u') {
            b.append((char) Integer.parseInt(s.substring(at, at + 4), 16));
            at += 4;
          } else {
            b.append(switch (e) {
              case 'n' -> '\n';
              case 't' -> '\t';
              case 'r' -> '\r';
              default -> e;
            });
          }
        } else {
          b.append(c);
        }
      }
      at++;
      return b.toString();
    }

    private void skip() {
      while (at < s.length() && Character.isWhitespace(s.charAt(at))) at++;
    }
  }
}
