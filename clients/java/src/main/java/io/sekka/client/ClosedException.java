package io.sekka.client;

/** The client was closed: a call after {@link SekkaClient#close}, or one it woke. */
public class ClosedException extends SekkaException {
  private static final long serialVersionUID = 1L;

  public ClosedException() {
    super("the client is closed");
  }
}
