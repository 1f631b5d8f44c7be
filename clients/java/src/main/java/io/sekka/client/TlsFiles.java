package io.sekka.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * An {@link SSLContext} from PEM files, as the servers' {@code server.tls_*} and the other
 * clients take them: the CA that signed the servers' certificates ({@code "system"}: the JDK's
 * CAs), and optionally a client certificate with its PKCS#8 key ({@code openssl genpkey}'s
 * {@code BEGIN PRIVATE KEY}).
 */
final class TlsFiles {
  private TlsFiles() {}

  /** @throws IllegalArgumentException naming the file that cannot be used */
  static SSLContext context(String caFile, String certFile, String keyFile) {
    if ((certFile == null) != (keyFile == null)) {
      throw new IllegalArgumentException(
          "tls client certificate and key go together: give both or neither");
    }
    try {
      TrustManagerFactory trust =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      trust.init("system".equals(caFile) ? null : store(certificates(caFile, "CA file")));
      KeyManager[] keys = null;
      if (certFile != null) keys = clientKeys(certFile, keyFile);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(keys, trust.getTrustManagers(), null);
      return context;
    } catch (GeneralSecurityException e) {
      throw new IllegalArgumentException("TLS files cannot be used: " + e.getMessage(), e);
    }
  }

  private static KeyManager[] clientKeys(String certFile, String keyFile)
      throws GeneralSecurityException {
    List<Certificate> chain = certificates(certFile, "client certificate");
    PrivateKey key = privateKey(keyFile);
    // A key that is not the certificate's would fail only at the first handshake.
    byte[] probe = "sekka".getBytes(StandardCharsets.US_ASCII);
    String algorithm = key.getAlgorithm().equals("EC") ? "SHA256withECDSA" : "SHA256withRSA";
    Signature sign = Signature.getInstance(algorithm);
    sign.initSign(key);
    sign.update(probe);
    byte[] signature = sign.sign();
    Signature verify = Signature.getInstance(algorithm);
    verify.initVerify(chain.get(0).getPublicKey());
    verify.update(probe);
    if (!verify.verify(signature)) {
      throw new IllegalArgumentException(
          "tls key file " + keyFile + " is not the key of client certificate " + certFile);
    }
    KeyStore store = store(List.of());
    store.setKeyEntry("client", key, new char[0], chain.toArray(new Certificate[0]));
    KeyManagerFactory factory =
        KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    factory.init(store, new char[0]);
    return factory.getKeyManagers();
  }

  private static List<Certificate> certificates(String file, String what)
      throws GeneralSecurityException {
    try (InputStream in = Files.newInputStream(Path.of(file))) {
      List<Certificate> found =
          new ArrayList<>(CertificateFactory.getInstance("X.509").generateCertificates(in));
      if (found.isEmpty()) {
        throw new IllegalArgumentException(what + " " + file + ": no certificate");
      }
      return found;
    } catch (IOException e) {
      throw new IllegalArgumentException(what + " " + file + " cannot be read: " + e, e);
    }
  }

  private static KeyStore store(List<Certificate> trusted) throws GeneralSecurityException {
    KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
    try {
      store.load(null, null);
    } catch (IOException e) {
      throw new GeneralSecurityException(e);
    }
    for (int i = 0; i < trusted.size(); i++) store.setCertificateEntry("ca" + i, trusted.get(i));
    return store;
  }

  private static PrivateKey privateKey(String file) throws GeneralSecurityException {
    String pem;
    try {
      pem = Files.readString(Path.of(file), StandardCharsets.US_ASCII);
    } catch (IOException e) {
      throw new IllegalArgumentException("tls key file " + file + " cannot be read: " + e, e);
    }
    int begin = pem.indexOf("-----BEGIN PRIVATE KEY-----");
    int end = pem.indexOf("-----END PRIVATE KEY-----");
    if (begin < 0 || end < begin) {
      throw new IllegalArgumentException(
          "tls key file " + file + ": allowed a PKCS#8 PEM key (BEGIN PRIVATE KEY)");
    }
    byte[] der = Base64.getMimeDecoder().decode(pem.substring(begin + 27, end));
    for (String algorithm : new String[] {"EC", "RSA", "Ed25519"}) {
      try {
        return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
      } catch (GeneralSecurityException e) {
        // try the next
      }
    }
    throw new IllegalArgumentException("tls key file " + file + ": not an EC, RSA or Ed25519 key");
  }
}
