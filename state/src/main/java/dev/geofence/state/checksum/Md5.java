package dev.geofence.state.checksum;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/** The leading bytes of an MD5 digest as a big-endian number, as PostgreSQL's {@code md5()} hex reads. */
final class Md5 {

  private static final ThreadLocal<MessageDigest> DIGEST =
      ThreadLocal.withInitial(
          () -> {
            try {
              return MessageDigest.getInstance("MD5");
            } catch (NoSuchAlgorithmException e) {
              throw new IllegalStateException("every Java platform must provide MD5", e);
            }
          });

  private Md5() {}

  /** The first {@code bytes} (at most 8) of md5 of the text's UTF-8 bytes, big-endian, signed. */
  static long firstBytes(String text, int bytes) {
    byte[] digest = DIGEST.get().digest(text.getBytes(StandardCharsets.UTF_8));
    long value = 0;
    for (int i = 0; i < bytes; i++) {
      value = (value << 8) | (digest[i] & 0xFF);
    }
    return value;
  }
}
