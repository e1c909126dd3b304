package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class BucketFingerprintsTest {

  @Test
  void readyOnlyWhenEveryOwnedBucketIsHeardFromAndMatches() {
    // Key groups 0..63 of 128: buckets whose number mod 128 is below 64, half of all.
    BucketFingerprints readiness = new BucketFingerprints(128, 0, 63);
    assertThat(readiness.ownedBuckets()).isEqualTo(FenceBuckets.COUNT / 2);
    Map<String, Long> source = new HashMap<>();
    for (int i = 0; i < 2000; i++) {
      source.put("fence-" + i, 1L + i % 3);
    }
    source.forEach((id, seq) -> {
      if (FenceBuckets.of(id) % 128 < 64) {
        readiness.add(id, seq);
      }
    });
    assertThat(readiness.ready()).as("nothing heard from the source yet").isFalse();
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      FenceChecksum fingerprint = fingerprint(source, b);
      readiness.expect(b, fingerprint.count(), fingerprint.checksum(), 0);
    }
    assertThat(readiness.ready()).isTrue();
    assertThat(readiness.completeness()).isEqualTo(1.0);

    // A fence edited at the source: its bucket mismatches until the edit arrives.
    String edited = source.keySet().stream().filter(id -> FenceBuckets.of(id) % 128 < 64).findFirst().orElseThrow();
    long oldSeq = source.put(edited, source.get(edited) + 1);
    int bucket = FenceBuckets.of(edited);
    assertThat(readiness.expect(bucket, fingerprint(source, bucket).count(), fingerprint(source, bucket).checksum(), 1)).isTrue();
    assertThat(readiness.ready()).isFalse();
    assertThat(readiness.unmatched()).isEqualTo(1);
    readiness.remove(edited, oldSeq);
    readiness.add(edited, source.get(edited));
    assertThat(readiness.ready()).isTrue();

    // The stream redelivering the bucket's older row (as after a rebuild read past it) changes nothing.
    source.put(edited, oldSeq);
    assertThat(readiness.expect(bucket, fingerprint(source, bucket).count(), fingerprint(source, bucket).checksum(), 0)).isFalse();
    assertThat(readiness.ready()).isTrue();

    // A bucket another subtask owns does not matter here.
    int foreign = 64;
    readiness.expect(foreign, 99, 12345, 7);
    assertThat(readiness.ready()).isTrue();
  }

  @Test
  void maxParallelismMustDivideTheBuckets() {
    assertThatThrownBy(() -> new BucketFingerprints(96, 0, 95)).hasMessageContaining("must divide 4096");
  }

  private static FenceChecksum fingerprint(Map<String, Long> source, int bucket) {
    FenceChecksum fingerprint = new FenceChecksum();
    source.forEach((id, seq) -> {
      if (FenceBuckets.of(id) == bucket) {
        fingerprint.add(id, seq);
      }
    });
    return fingerprint;
  }
}
