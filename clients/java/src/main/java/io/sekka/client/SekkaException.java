package io.sekka.client;

/**
 * A request the servers refused (an unknown tag, a bad argument), not retried. Subclasses:
 * {@link AuthException} (the token was refused or is missing) and {@link NoServerException} (no
 * server could serve and the buffer is empty).
 */
public class SekkaException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public SekkaException(String message) {
    super(message);
  }
}
