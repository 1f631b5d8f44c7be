package io.sekka.client;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** One blocking RESP2 connection; used by one thread (the client's refill thread). */
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

  private final Socket socket;
  private final InputStream in;
  private final OutputStream out;
  private boolean received; // a byte of the current command's reply came

  RespConnection(String host, int port, int connectTimeoutMs, int timeoutMs) throws IOException {
    socket = new Socket();
    try {
      socket.connect(new InetSocketAddress(host, port), connectTimeoutMs);
      socket.setSoTimeout(timeoutMs);
      socket.setTcpNoDelay(true);
      in = new BufferedInputStream(socket.getInputStream(), 1 << 16);
      out = socket.getOutputStream();
    } catch (IOException e) {
      socket.close();
      throw e;
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
    try {
      out.write(b.toByteArray());
      out.flush();
      return read();
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

  /** Integers as Long, bulk strings as String, arrays as List; error replies are thrown. */
  private Object read() throws IOException {
    String l = line();
    if (l.isEmpty()) throw new IOException("an empty reply line");
    String rest = l.substring(1);
    switch (l.charAt(0)) {
      case ':':
        return Long.parseLong(rest);
      case '+':
        return rest;
      case '-':
        throw new ErrorReply(rest);
      case '$': {
        int n = Integer.parseInt(rest);
        if (n < 0) return null;
        byte[] data = in.readNBytes(n + 2);
        if (data.length != n + 2) throw new EOFException("the server closed the connection");
        return new String(data, 0, n, StandardCharsets.UTF_8);
      }
      case '*': {
        int n = Integer.parseInt(rest);
        if (n < 0) return null;
        List<Object> items = new ArrayList<>(n);
        for (int i = 0; i < n; i++) items.add(read());
        return items;
      }
      default:
        throw new IOException("a reply starting with '" + l.charAt(0) + "'");
    }
  }
}
