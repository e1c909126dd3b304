package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The warm-up's phases and the ready rule, for a subtask owning all 4096 buckets. */
class ReadinessTest {

  private static final int MAX_PARALLELISM = 128;

  @Test
  void aFreshStartIsReadyOnceEveryBucketMatches() {
    Readiness readiness = readiness();
    readiness.nothingToProve();
    assertThat(readiness.phase()).isEqualTo(LoadPhase.VERIFYING);
    readiness.fingerprints().add("a", 1);
    hearAllBuckets(readiness, "a", 1);
    assertThat(readiness.phase()).isEqualTo(LoadPhase.READY);
    assertThat(readiness.ready()).isTrue();
  }

  @Test
  void aRestoreWaitsForTheGapCheckThenForTheStreamToPassTheTarget() {
    Readiness readiness = restored();
    assertThat(readiness.phase()).isEqualTo(LoadPhase.GAP_CHECK);
    readiness.coveredUpTo(500, noneToProve());
    assertThat(readiness.phase()).isEqualTo(LoadPhase.CATCHING_UP);
    readiness.streamed(499, 10);
    assertThat(readiness.ready()).isFalse();
    readiness.streamed(500, 11);
    assertThat(readiness.proveVersionsOnceCaughtUp()).isFalse();
    assertThat(readiness.phase()).isEqualTo(LoadPhase.READY);
  }

  @Test
  void aCatchUpByReadIsNotReadyUntilTheReadIsDoneAndTheStreamPassesIt() {
    Readiness readiness = restored();
    // A version at the target that the stream will not bring (the slot moved past it): the read proves the bucket instead.
    long[] target = noneToProve();
    target[7] = 3;
    readiness.coveredUpTo(500, target);
    readiness.readingChanged();
    // The stream passing the gap check's target is not enough while the read is under way.
    readiness.streamed(600, 10);
    assertThat(readiness.proveVersionsOnceCaughtUp()).as("not distrusted for a version the read holds").isFalse();
    assertThat(readiness.distrust()).isNull();
    assertThat(readiness.ready()).isFalse();
    assertThat(readiness.phase()).isEqualTo(LoadPhase.CATCHING_UP);
    readiness.readChanged(700);
    assertThat(readiness.isReadingChanged()).isFalse();
    assertThat(readiness.ready()).as("the stream has not passed the read's position").isFalse();
    readiness.streamed(700, 11);
    assertThat(readiness.phase()).isEqualTo(LoadPhase.READY);
  }

  @Test
  void aVersionMissingWhenTheStreamPassesTheTargetDistrustsUntilARebuild() {
    Readiness readiness = restored();
    long[] target = noneToProve();
    int bucket = FenceBuckets.of("a");
    target[bucket] = 3;
    readiness.coveredUpTo(500, target);
    readiness.streamed(600, 20);
    assertThat(readiness.proveVersionsOnceCaughtUp()).as("version 3 of bucket %d never came", bucket).isTrue();
    assertThat(readiness.phase()).isEqualTo(LoadPhase.REBUILDING);
    assertThat(readiness.distrust("another reason")).as("distrust is kept, not replaced").isFalse();
    assertThat(readiness.distrust()).contains("never received their versions");

    readiness.rebuilt(700);
    assertThat(readiness.phase()).isEqualTo(LoadPhase.CATCHING_UP);
    readiness.streamed(700, 30);
    assertThat(readiness.phase()).isEqualTo(LoadPhase.READY);
  }

  @Test
  void aMismatchedBucketHoldsReadinessWhateverElseHolds() {
    Readiness readiness = restored();
    readiness.coveredUpTo(0, noneToProve());
    assertThat(readiness.proveVersionsOnceCaughtUp()).isFalse();
    assertThat(readiness.phase()).isEqualTo(LoadPhase.READY);
    readiness.fingerprints().add("b", 2);
    assertThat(readiness.phase()).as("b@2 is held, the source says a@1").isEqualTo(LoadPhase.VERIFYING);
    readiness.rereading(true);
    assertThat(readiness.phase()).as("its bucket read again from the source").isEqualTo(LoadPhase.REREADING);
    assertThat(readiness.ready()).isFalse();
    readiness.fingerprints().remove("b", 2);
    assertThat(readiness.phase()).as("matched again, whatever the re-reads").isEqualTo(LoadPhase.READY);
  }

  /** Readiness says when it becomes ready, and when it is distrusted, once each: callers need not compare. */
  @Test
  void itSaysWhenItBecomesReadyAndWhenItIsDistrusted() {
    List<String> said = new ArrayList<>();
    Readiness readiness = new Readiness(new BucketFingerprints(MAX_PARALLELISM, 0, MAX_PARALLELISM - 1), new Readiness.Listener() {
      @Override
      public void becameReady() {
        said.add("ready");
      }

      @Override
      public void distrusted(String reason) {
        said.add("distrusted: " + reason);
      }
    });
    readiness.fingerprints().add("a", 1);
    readiness.coveredUpTo(500, noneToProve());
    hearAllBuckets(readiness, "a", 1);
    assertThat(said).as("matched, not caught up").isEmpty();
    readiness.streamed(500, 10);
    readiness.proveVersionsOnceCaughtUp();
    assertThat(said).containsExactly("ready");
    readiness.streamed(600, 11);
    readiness.fingerprints().add("b", 1);
    readiness.fingerprints().remove("b", 1);
    assertThat(said).as("unmatched and matched again: ready again").containsExactly("ready", "ready");
    readiness.distrust("a gap");
    readiness.distrust("another gap");
    assertThat(said).containsExactly("ready", "ready", "distrusted: a gap");
    readiness.rebuilt(700);
    readiness.streamed(700, 12);
    assertThat(said).containsExactly("ready", "ready", "distrusted: a gap", "ready");
  }

  private static Readiness readiness() {
    return new Readiness(new BucketFingerprints(MAX_PARALLELISM, 0, MAX_PARALLELISM - 1), new Readiness.Listener() {
      @Override
      public void becameReady() {}

      @Override
      public void distrusted(String reason) {}
    });
  }

  /** Restored state: one fence a@1 and every bucket's fingerprint of it. */
  private static Readiness restored() {
    Readiness readiness = readiness();
    readiness.fingerprints().add("a", 1);
    hearAllBuckets(readiness, "a", 1);
    return readiness;
  }

  private static void hearAllBuckets(Readiness readiness, String fence, long seq) {
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      boolean holds = b == FenceBuckets.of(fence);
      readiness.fingerprints().expect(b, holds ? 1 : 0, holds ? FenceChecksum.hash(fence, seq) : 0, 1);
    }
  }

  private static long[] noneToProve() {
    long[] versions = new long[FenceBuckets.COUNT];
    Arrays.fill(versions, -1);
    return versions;
  }
}
