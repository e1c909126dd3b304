package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.checksum.FenceBuckets;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class BucketVersionsTest {

  @Test
  void aJumpInTheStreamIsALoss() {
    BucketVersions versions = new BucketVersions();
    assertThat(versions.streamed(7, 5)).as("nothing known yet: the first version is taken").isNull();
    assertThat(versions.streamed(7, 6)).isNull();
    assertThat(versions.streamed(7, 6)).as("redelivered").isNull();
    assertThat(versions.streamed(7, 4)).as("older, as after a rebuild read past it").isNull();
    assertThat(versions.streamed(7, 8)).contains("bucket 7", "version 6 to 8");
    versions.known(9, 10);
    assertThat(versions.streamed(9, 11)).isNull();
    assertThat(versions.streamed(9, 13)).isNotNull();
  }

  /**
   * Random histories of edits to buckets, a restore at some position, and a slot ahead of it at
   * another: the proof fails exactly when an edit of a proved bucket lies between the two.
   */
  @Test
  void theTargetIsReachedOnlyWhenNothingBetweenRestoreAndSlotWasSkipped() {
    SplittableRandom random = new SplittableRandom(3);
    for (int history = 0; history < 500; history++) {
      int edits = 1 + random.nextInt(200);
      int[] bucketOfEdit = new int[edits];
      for (int i = 0; i < edits; i++) {
        bucketOfEdit[i] = random.nextInt(8);
      }
      int restoredAt = random.nextInt(edits + 1);
      int slotAt = restoredAt + random.nextInt(edits - restoredAt + 1);
      long[] version = new long[FenceBuckets.COUNT];
      BucketVersions versions = new BucketVersions();
      boolean skipped = false;
      for (int i = 0; i < edits; i++) {
        int b = bucketOfEdit[i];
        version[b]++;
        if (i == restoredAt - 1) {
          for (int r = 0; r < 8; r++) {
            versions.known(r, version[r]); // the state restored, as of its snapshot
          }
        } else if (i >= restoredAt && i < slotAt) {
          skipped = true;
        }
      }
      if (restoredAt == 0) {
        for (int r = 0; r < 8; r++) {
          versions.known(r, 0);
        }
      }
      // The stream may deliver the first edits after the snapshot before the gap check sets the
      // target: they are part of the backlog all the same.
      int early = slotAt == restoredAt ? random.nextInt(edits - restoredAt + 1) : 0;
      long[] streamed = new long[FenceBuckets.COUNT];
      for (int i = 0; i < restoredAt + early; i++) {
        streamed[bucketOfEdit[i]]++;
        if (i >= restoredAt) {
          assertThat(versions.streamed(bucketOfEdit[i], streamed[bucketOfEdit[i]])).isNull();
        }
      }
      long[] target = new long[FenceBuckets.COUNT];
      Arrays.fill(target, -1);
      System.arraycopy(version, 0, target, 0, 8);
      versions.expectAtTarget(target);
      assertThat(versions.backlog()).as("history %d: the transactions after the restored position", history).isEqualTo(edits - restoredAt);
      boolean jump = false;
      Arrays.fill(version, 0);
      for (int i = 0; i < edits; i++) {
        int b = bucketOfEdit[i];
        version[b]++;
        if (i >= Math.max(slotAt, restoredAt + early)) {
          jump |= versions.streamed(b, version[b]) != null;
        }
      }
      String reached = versions.targetReached();
      assertThat(jump || reached != null).as("history %d: skipped %s", history, skipped).isEqualTo(skipped);
      assertThat(versions.proofPending()).isFalse();
    }
  }
}
