package io.sekka.client;

/** No server could serve and the buffer is empty; the message names each server tried. */
public class NoServerException extends SekkaException {
  private static final long serialVersionUID = 1L;

  public NoServerException(String message) {
    super(message);
  }
}
