package dev.geofence.state.geom;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Applies {@link RingCheck} to the rings of a WKB or EWKB geometry as they are encoded. JTS's
 * {@code WKBReader} is lenient and closes open rings or pads short ones without a word, which would
 * hide exactly the defects a dead-letter row must name.
 *
 * <p>Understands ISO WKB dimension codes (1000s, 2000s, 3000s) and PostGIS EWKB flags (Z, M,
 * SRID). Truncated or unknown input is left for the reader itself to refuse as unparseable.
 */
final class WkbRingCheck {

  private static final int EWKB_Z = 0x80000000;
  private static final int EWKB_M = 0x40000000;
  private static final int EWKB_SRID = 0x20000000;

  private final ByteBuffer buffer;

  private WkbRingCheck(byte[] wkb) {
    this.buffer = ByteBuffer.wrap(wkb);
  }

  static void check(byte[] wkb) throws BadGeometryException {
    try {
      new WkbRingCheck(wkb).geometry();
    } catch (BufferUnderflowException | IndexOutOfBoundsException | IllegalArgumentException e) {
      // Malformed: WKBReader reports it with its own message.
    }
  }

  private void geometry() throws BadGeometryException {
    buffer.order(buffer.get() == 0 ? ByteOrder.BIG_ENDIAN : ByteOrder.LITTLE_ENDIAN);
    int type = buffer.getInt();
    int iso = (type & 0xFFFF) / 1000;
    int dimensions =
        2 + ((type & EWKB_Z) != 0 || iso == 1 || iso == 3 ? 1 : 0)
            + ((type & EWKB_M) != 0 || iso == 2 || iso == 3 ? 1 : 0);
    if ((type & EWKB_SRID) != 0) {
      buffer.getInt();
    }
    switch ((type & 0xFFFF) % 1000) {
      case 1:
        skipPoints(1, dimensions);
        break;
      case 2:
        skipPoints(count(dimensions * 8), dimensions);
        break;
      case 3:
        polygon(dimensions);
        break;
      case 4:
      case 5:
      case 6:
      case 7:
        int parts = count(5);
        for (int i = 0; i < parts; i++) {
          geometry();
        }
        break;
      default:
        throw new IllegalArgumentException("unknown WKB type");
    }
  }

  private void polygon(int dimensions) throws BadGeometryException {
    int rings = count(4);
    for (int r = 0; r < rings; r++) {
      int points = count(dimensions * 8);
      double[] xy = new double[2 * points];
      for (int i = 0; i < points; i++) {
        xy[2 * i] = buffer.getDouble();
        xy[2 * i + 1] = buffer.getDouble();
        buffer.position(buffer.position() + 8 * (dimensions - 2));
      }
      RingCheck.check(xy, points);
    }
  }

  /** Reads an element count, refusing one the remaining bytes cannot hold. */
  private int count(int minBytesEach) {
    int n = buffer.getInt();
    if (n < 0 || (long) n * minBytesEach > buffer.remaining()) {
      throw new IllegalArgumentException("count beyond the input");
    }
    return n;
  }

  private void skipPoints(int points, int dimensions) {
    buffer.position(buffer.position() + points * dimensions * 8);
  }
}
