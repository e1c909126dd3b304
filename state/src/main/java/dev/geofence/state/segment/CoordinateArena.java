package dev.geofence.state.segment;

/**
 * Where a subtask's segments keep their coordinates: a few big arrays, filled one segment after
 * another. Each chunk is twice the one before, from 1 MB up to {@value #CHUNK} doubles (32 MB,
 * above half of G1's largest region, so every JVM allocates them as humongous objects straight into
 * the old generation): a restore of a million fences puts gigabytes of coordinates where no young
 * collection copies them (per-segment arrays of half a megabyte each were copied at least once,
 * most of a restore's pauses), and a small fence set wastes no more than it holds.
 *
 * <p>Space of a segment that is dropped stays taken until every segment of its chunk is; a
 * rewrite of all segments (a restore) starts a new arena. Not thread-safe: one per subtask.
 */
public final class CoordinateArena {

  /**
   * Doubles of the largest chunk: 32 MB with the array's 16-byte header, so that a humongous chunk
   * fills its regions exactly (G1's regions are powers of two; 1 << 22 doubles and a header took
   * one region more, an eighth of the coordinates' heap wasted).
   */
  static final int CHUNK = (1 << 22) - 2;
  /** A double array's header, in doubles. */
  private static final int HEADER_DOUBLES = 2;
  private static final int FIRST_CHUNK = (1 << 17) - HEADER_DOUBLES;

  private double[] chunk;
  private int nextChunk = FIRST_CHUNK;
  private int used;
  private int lastOffset;

  /** Room for {@code count} doubles: the array they go in, at {@link #lastOffset()}. */
  double[] take(int count) {
    if (count > CHUNK) {
      lastOffset = 0;
      return new double[count];
    }
    if (chunk == null || chunk.length - used < count) {
      chunk = new double[Math.max(count, nextChunk)];
      nextChunk = Math.min(CHUNK, 2 * (nextChunk + HEADER_DOUBLES) - HEADER_DOUBLES);
      used = 0;
    }
    lastOffset = used;
    used += count;
    return chunk;
  }

  /** Where the room {@link #take} gave last starts. */
  int lastOffset() {
    return lastOffset;
  }
}
