package dev.geofence.state.readiness;

/** PostgreSQL log sequence numbers: 64-bit WAL positions, written {@code X/Y} in hexadecimal. */
public final class Lsn {

  private Lsn() {}

  /** Parses {@code X/Y} (as {@code pg_lsn} prints it). */
  public static long parse(String text) {
    int slash = text == null ? -1 : text.indexOf('/');
    if (slash <= 0 || slash == text.length() - 1) {
      throw new IllegalArgumentException("not an LSN (X/Y in hexadecimal): " + text);
    }
    try {
      return (Long.parseLong(text.substring(0, slash), 16) << 32) | Long.parseLong(text.substring(slash + 1), 16);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("not an LSN (X/Y in hexadecimal): " + text, e);
    }
  }

  public static String format(long lsn) {
    return Long.toHexString(lsn >>> 32).toUpperCase() + "/" + Long.toHexString(lsn & 0xFFFFFFFFL).toUpperCase();
  }
}
