package io.sekka.client;

/** The servers refused the token, or need one and none was given. */
public class AuthException extends SekkaException {
  private static final long serialVersionUID = 1L;

  public AuthException(String message) {
    super(message);
  }
}
