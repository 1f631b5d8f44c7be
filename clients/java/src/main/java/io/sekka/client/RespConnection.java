package io.sekka.client;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * One blocking RESP2 connection; used by one thread (the client's refill thread), except {@link
 * #close}, which any thread may call to end a call in flight at once.
 */
final class RespConnection implements AutoCloseable {
  /** An error reply ({@code -PREFIX message}). */
  static final class ErrorReply extends IOException {
    private static final long serialVersionUID = 1L;
    final String prefix;

    ErrorReply(String message) {
      super(message);
      int space = message.indexOf(' ');
      this.prefix = space < 0 ? message : message.substring(0, space);
    }
  }

  /**
   * The connection failed before any byte of the reply came (the server had closed it, or
   * restarted): the command can be sent once more on a new connection.
   */
  static final class StaleConnection extends IOException {
    private static final long serialVersionUID = 1L;

    StaleConnection(IOException cause) {
      super(cause.getClass().getSimpleName() + ": " + cause.getMessage(), cause);
    }
  }

  /** The most elements an array may have: the server's largest server.max_batch. */
  static final int MAX_ARRAY = 10_000_000;

  /**
   * Told of each socket while it connects, so that another thread (the client closing) can close
   * it and end the connect at once.
   */
  interface Opening {
    /** Before the connect; throws if the client is closed. */
    void begin(Socket socket) throws IOException;

    void end(Socket socket);
  }

  private final Socket socket;
  private final InputStream in;
  private final OutputStream out;
  private final int timeoutMs;
  private long deadline; // System.nanoTime(): the current command's whole reply is due by then
  private boolean received; // a byte of the current command's reply came
  private int expect; // the current command's batch size, or -1

  /**
   * Connects to one of {@code host}'s addresses, each tried in turn, and over TLS with {@code
   * tls} unless it is null, all within the timeout.
   */
  RespConnection(
      String host, int port, int connectTimeoutMs, int timeoutMs, SSLContext tls, Opening opening)
      throws IOException {
    long connectBy = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(connectTimeoutMs);
    IOException last = null;
    Socket connected = null;
    for (InetAddress address : resolve(host, connectTimeoutMs)) {
      long left = TimeUnit.NANOSECONDS.toMillis(connectBy - System.nanoTime());
      if (left <= 0) break;
      Socket attempt = new Socket();
      opening.begin(attempt);
      try {
        attempt.connect(new InetSocketAddress(address, port), (int) left);
        connected = attempt;
        break;
      } catch (IOException e) {
        attempt.close();
        last = e;
      } finally {
        opening.end(attempt);
      }
    }
    if (connected == null) {
      throw last != null ? last : new SocketTimeoutException("connect timed out");
    }
    socket = tls == null ? connected : secure(tls, connected, host, port, connectBy, opening);
    this.timeoutMs = timeoutMs;
    try {
      socket.setTcpNoDelay(true);
      in = new BufferedInputStream(new DeadlineInput(socket.getInputStream()), 1 << 16);
      out = socket.getOutputStream();
    } catch (IOException e) {
      socket.close();
      throw e;
    }
  }

  /** The TLS handshake over {@code plain}, by {@code connectBy}; the host name is checked. */
  private static Socket secure(
      SSLContext tls, Socket plain, String host, int port, long connectBy, Opening opening)
      throws IOException {
    try {
      opening.begin(plain); // throws once the client is closing
      long left = TimeUnit.NANOSECONDS.toMillis(connectBy - System.nanoTime());
      if (left <= 0) throw new SocketTimeoutException("connect timed out before the TLS handshake");
      SSLSocket ssl = (SSLSocket) tls.getSocketFactory().createSocket(plain, host, port, true);
      SSLParameters parameters = ssl.getSSLParameters();
      parameters.setEndpointIdentificationAlgorithm("HTTPS");
      parameters.setProtocols(new String[] {"TLSv1.3", "TLSv1.2"});
      ssl.setSSLParameters(parameters);
      ssl.setSoTimeout((int) left);
      ssl.startHandshake();
      return ssl;
    } catch (IOException e) {
      plain.close();
      throw e;
    } finally {
      opening.end(plain);
    }
  }

  /**
   * {@code host}'s addresses within {@code timeoutMs}: the JDK's lookup has no timeout, so it
   * runs on a pool thread that may outlive this call.
   */
  private static InetAddress[] resolve(String host, int timeoutMs) throws IOException {
    CompletableFuture<InetAddress[]> lookup =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return InetAddress.getAllByName(host);
              } catch (UnknownHostException e) {
                throw new java.util.concurrent.CompletionException(e);
              }
            });
    try {
      return lookup.get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      throw new SocketTimeoutException("looking up " + host + " took over " + timeoutMs + " ms");
    } catch (ExecutionException e) {
      throw e.getCause() instanceof IOException io ? io : new IOException(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while looking up " + host);
    }
  }

  /**
   * The socket's bytes, each read bounded by what is left of the command's deadline: a server
   * that drips one byte at a time cannot hold a call past the timeout.
   */
  private final class DeadlineInput extends InputStream {
    private final InputStream raw;

    DeadlineInput(InputStream raw) {
      this.raw = raw;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
      if (left <= 0) throw new SocketTimeoutException("no reply within " + timeoutMs + " ms");
      socket.setSoTimeout((int) Math.min(left, Integer.MAX_VALUE));
      return raw.read(b, off, len);
    }
  }

  @Override
  public void close() {
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing: nothing to do
    }
  }

  Object call(String... args) throws IOException {
    return batch(-1, args);
  }

  /**
   * Sends a command whose reply is a batch of {@code expect} ids (-1: any reply): a reply that is
   * not an array, or a longer one, is refused at its first line, before more is read.
   */
  Object batch(int expect, String... args) throws IOException {
    this.expect = expect;
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    b.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
    for (String a : args) {
      byte[] data = a.getBytes(StandardCharsets.UTF_8);
      b.write(("$" + data.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
      b.write(data);
      b.write('\r');
      b.write('\n');
    }
    received = false;
    deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    try {
      out.write(b.toByteArray());
      out.flush();
      return read(true);
    } catch (SocketTimeoutException | ErrorReply e) {
      throw e;
    } catch (IOException e) {
      if (received) throw e;
      throw new StaleConnection(e);
    }
  }

  private String line() throws IOException {
    StringBuilder sb = new StringBuilder();
    while (true) {
      int c = in.read();
      if (c < 0) throw new EOFException("the server closed the connection");
      received = true;
      if (c == '\r') {
        if (in.read() != '\n') throw new IOException("a reply line without \\r\\n");
        return sb.toString();
      }
      if (sb.length() > (1 << 20)) throw new IOException("a reply line over 1 MiB");
      sb.append((char) c);
    }
  }

  /**
   * Integers as Long, bulk strings as String, arrays as List; error replies are thrown. {@code
   * top}: an array may come here (not inside another).
   */
  private Object read(boolean top) throws IOException {
    String l = line();
    if (l.isEmpty()) throw new IOException("an empty reply line");
    String rest = l.substring(1);
    if (top && expect >= 0 && l.charAt(0) != '*' && l.charAt(0) != '-') {
      throw new IOException("a reply to a batch that is not an array: " + l);
    }
    switch (l.charAt(0)) {
      case ':':
        return integer(rest);
      case '+':
        return rest;
      case '-':
        throw new ErrorReply(rest);
      case '$': {
        long n = integer(rest);
        if (n < 0) return null;
        if (n > (top ? 64 << 20 : 20)) { // an id in an array: at most 20 characters
          throw new IOException("a bulk reply of " + n + " bytes");
        }
        byte[] data = in.readNBytes((int) n + 2);
        if (data.length != n + 2) throw new EOFException("the server closed the connection");
        return new String(data, 0, (int) n, StandardCharsets.UTF_8);
      }
      case '*': {
        if (!top) throw new IOException("an array inside an array"); // sekka sends none
        long n = integer(rest);
        if (n < 0) return null;
        if (n > (expect >= 0 ? expect : MAX_ARRAY)) {
          throw new IOException("an array of " + n + " elements where " + expect + " were asked for");
        }
        List<Object> items = new ArrayList<>((int) Math.min(n, 1024));
        for (int i = 0; i < n; i++) {
          try {
            items.add(read(false));
          } catch (ErrorReply e) { // no reply of sekka's has one: the server is broken
            throw new IOException("an error inside an array: " + e.getMessage());
          }
        }
        return items;
      }
      default:
        throw new IOException("a reply starting with '" + l.charAt(0) + "'");
    }
  }

  /** A RESP integer: an optional minus and decimal digits only (parseLong would take a '+'). */
  private static long integer(String text) throws IOException {
    try {
      if (!text.matches("-?\\d{1,19}")) throw new NumberFormatException();
      return Long.parseLong(text);
    } catch (NumberFormatException e) {
      throw new IOException("\"" + text.substring(0, Math.min(40, text.length())) + "\" is not an integer");
    }
  }
}
