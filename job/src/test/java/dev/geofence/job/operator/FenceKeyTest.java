package dev.geofence.job.operator;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.checksum.FenceBuckets;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.util.MathUtils;
import org.junit.jupiter.api.Test;

class FenceKeyTest {

  @Test
  void flinkPutsEveryFenceInTheKeyGroupOfItsBucket() {
    SplittableRandom random = new SplittableRandom(3);
    Set<Integer> hashes = new HashSet<>();
    for (int i = 0; i < 100_000; i++) {
      String id = i % 3 == 0 ? "fence-" + i : Long.toHexString(random.nextLong()) + "-ü";
      FenceKey key = new FenceKey(id);
      int bucket = FenceBuckets.of(id);
      for (int maxParallelism : new int[] {1, 2, 8, 128, 1024, 4096}) {
        assertThat(KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism))
            .as("%s with max parallelism %d", id, maxParallelism)
            .isEqualTo(bucket % maxParallelism);
      }
      hashes.add(key.hashCode());
    }
    assertThat(hashes).as("fences of one bucket still spread over hash tables").hasSizeGreaterThan(99_000);
  }

  @Test
  void preimageRunsFlinksMurmurHashBackwards() {
    SplittableRandom random = new SplittableRandom(5);
    for (int i = 0; i < 100_000; i++) {
      int target = random.nextInt() & 0x7FFFFFFF;
      assertThat(MathUtils.murmurHash(FenceKey.murmurPreimage(target))).isEqualTo(target);
    }
  }

  @Test
  void aBucketsFingerprintKeyLandsWithItsFences() {
    for (int bucket = 0; bucket < FenceBuckets.COUNT; bucket++) {
      FenceKey key = FenceKey.ofBucket(bucket);
      assertThat(key.isBucket()).isTrue();
      assertThat(KeyGroupRangeAssignment.assignToKeyGroup(key, 128)).isEqualTo(bucket % 128);
    }
    assertThat(new FenceKey("fence-1").isBucket()).isFalse();
  }

  @Test
  void equalityIsTheId() {
    assertThat(new FenceKey("a")).isEqualTo(new FenceKey("a")).hasSameHashCodeAs(new FenceKey("a"));
    assertThat(new FenceKey("a")).isNotEqualTo(new FenceKey("b"));
  }
}
