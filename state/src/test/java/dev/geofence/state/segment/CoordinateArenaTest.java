package dev.geofence.state.segment;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.IdentityHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Room handed out never overlaps, chunks grow to the humongous size and stay there, and a request beyond it gets its own array. */
class CoordinateArenaTest {

  @Test
  void roomNeverOverlapsAndChunksGrowToTheirLargestSize() {
    CoordinateArena arena = new CoordinateArena();
    SplittableRandom random = new SplittableRandom(7);
    Map<double[], Boolean> chunks = new IdentityHashMap<>();
    int largest = 0;
    double marker = 0;
    for (int k = 0; k < 400; k++) {
      int count = 2 * (1 + random.nextInt(30_000));
      double[] array = arena.take(count);
      int at = arena.lastOffset();
      chunks.put(array, true);
      largest = Math.max(largest, array.length);
      for (int i = at; i < at + count; i++) {
        assertThat(array[i]).as("room handed out twice").isZero();
        array[i] = ++marker;
      }
    }
    assertThat(largest).isEqualTo(CoordinateArena.CHUNK);
    assertThat(chunks.keySet()).anyMatch(c -> c.length < CoordinateArena.CHUNK);
    double[] own = arena.take(CoordinateArena.CHUNK + 2);
    assertThat(own).hasSize(CoordinateArena.CHUNK + 2);
    assertThat(arena.lastOffset()).isZero();
  }
}
