package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.checksum.FenceBuckets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class SourceReadTest {

  @Test
  void aRebuildDeletesWhatNeitherTheReadNorTheStreamBrought() {
    SourceRead rebuild = SourceRead.ofAllBuckets();
    rebuild.read("a");
    rebuild.read("b"); // a tombstone: found, so not gone (its delete comes as a row)
    rebuild.streamed("c");
    assertThat(rebuild.ofAll()).isTrue();
    assertThat(rebuild.buckets()).isEmpty();
    assertThat(rebuild.gone(List.of("a", "b", "c", "d", "e"))).containsExactly("d", "e");
  }

  /**
   * Generated fences, some read, some streamed, a re-read of random buckets: gone are exactly the
   * held fences of those buckets that came by neither, in the order they were held.
   */
  @Test
  void aRereadTakesAwayOnlyFencesOfItsOwnBuckets() {
    SplittableRandom random = new SplittableRandom(11);
    for (int round = 0; round < 200; round++) {
      int[] buckets = random.ints(1 + random.nextInt(40), 0, FenceBuckets.COUNT).toArray();
      Set<Integer> chosen = new HashSet<>();
      for (int b : buckets) {
        chosen.add(b);
      }
      SourceRead reread = SourceRead.ofBuckets(buckets);
      List<String> held = new ArrayList<>();
      List<String> expected = new ArrayList<>();
      for (int i = 0; i < 3000; i++) {
        String id = "fence-" + round + "-" + i;
        held.add(id);
        int fate = random.nextInt(3);
        if (fate == 0) {
          reread.read(id);
        } else if (fate == 1) {
          reread.streamed(id);
        } else if (chosen.contains(FenceBuckets.of(id))) {
          expected.add(id);
        }
      }
      assertThat(reread.ofAll()).isFalse();
      assertThat(reread.gone(held)).containsExactlyElementsOf(expected);
    }
  }

  @Test
  void aRereadKeepsItsOwnSortedCopyOfItsBuckets() {
    int[] buckets = {900, 3, 4095};
    SourceRead reread = SourceRead.ofBuckets(buckets);
    buckets[0] = 1;
    assertThat(reread.buckets()).containsExactly(3, 900, 4095);
    reread.buckets()[0] = 7;
    assertThat(reread.buckets()).containsExactly(3, 900, 4095);
    assertThatThrownBy(SourceRead::ofBuckets).hasMessage("a re-read reads at least one bucket");
  }
}
