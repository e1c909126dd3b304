package dev.geofence.state.ledger;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.readiness.BucketFingerprints;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The ledger alone, against a store and a clock of the test's: the edit path's decisions. */
class FenceLedgerTest {

  private static final FenceGeometry SQUARE = FenceGeometry.fromArrays(
      new double[] {0, 0, 10, 0, 10, 10, 0, 10, 0, 0}, new int[] {0, 5}, new int[] {0, 1});

  private final Store store = new Store();
  private final TestClock clock = new TestClock();
  private final List<String> told = new ArrayList<>();
  private final Schedule schedule = new Schedule();
  private final BucketFingerprints fingerprints = new BucketFingerprints(128, 0, 127);
  private final FenceLedger ledger = new FenceLedger(new FenceSet(new FenceIndex()), fingerprints, schedule, store, clock,
      new FenceLedger.Listener() {
        @Override
        public void gap(String reason) {
          told.add("gap: " + reason);
        }

        @Override
        public void exitMembers(String fenceId, long deletedAt, long seq) {
          told.add("exit " + fenceId + " at " + deletedAt);
        }
      });

  /**
   * While the index warms up, an edit behind no queued edit of its fence applies at once, and its
   * transaction's fingerprint with it, although an older fingerprint of the bucket still waits (as
   * a restore of a savepoint leaves one): the bucket matches at once. Before, the fingerprint waited
   * behind the older one for the clock, and the bucket looked as if it had lost an edit.
   */
  @Test
  void aFingerprintGoesAsItsTransactionsEditsWent() throws Exception {
    String other = otherFenceOfTheBucketOf("a");
    int bucket = FenceBuckets.of("a");
    // State restored with fence a@1, its fingerprint, and the next transaction (b@1) still queued.
    ledger.read(Queued.of(FenceEdit.upsert("a", 1, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.SNAPSHOT, 0, 0)));
    hearAll(bucket, fingerprint(bucket, 1, "a@1"));
    ledger.restoreQueued(List.of(Queued.of(FenceEdit.upsert(other, 1, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 10, 100))), false);
    ledger.restoreQueued(List.of(Queued.of(fingerprint(bucket, 2, 100, "a@1", other + "@1"))), false);
    clock.time = 50;
    // The stream: a reshaped, applied at once while warming up, then its fingerprint.
    ledger.receive(Queued.of(FenceEdit.upsert("a", 2, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 20, 200)));
    ledger.receive(Queued.of(fingerprint(bucket, 3, 200, "a@2", other + "@1")));
    assertThat(ledger.fences().seqOf("a")).isEqualTo(2);
    assertThat(fingerprints.unmatchedBuckets()).as("the queued edit of %s is counted, not yet held", other).containsExactly(bucket);
    ledger.release(other, 100);
    ledger.release(FenceBuckets.key(bucket), 100);
    assertThat(fingerprints.ready()).as("matched once the older transaction is released; its fingerprint, older, ignored").isTrue();
  }

  /**
   * When ready, an edit committed after the clock with an older location held waits for it, and so
   * does its transaction's fingerprint: the bucket never looks mismatched meanwhile.
   */
  @Test
  void aFingerprintWaitsWithTheEditItCounts() throws Exception {
    int bucket = FenceBuckets.of("a");
    ledger.read(Queued.of(FenceEdit.upsert("a", 1, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.SNAPSHOT, 0, 0)));
    hearAll(bucket, fingerprint(bucket, 1, "a@1"));
    clock.warmingUp = false;
    clock.time = 50;
    clock.oldestUnevaluated = 150;
    ledger.receive(Queued.of(FenceEdit.upsert("a", 2, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 20, 200)));
    ledger.receive(Queued.of(fingerprint(bucket, 2, 200, "a@2")));
    assertThat(ledger.fences().seqOf("a")).as("waits for the location at 150").isEqualTo(1);
    assertThat(fingerprints.ready()).as("its fingerprint waits with it").isTrue();
    ledger.release("a", 200);
    ledger.release(FenceBuckets.key(bucket), 200);
    assertThat(ledger.fences().seqOf("a")).isEqualTo(2);
    assertThat(fingerprints.ready()).isTrue();
  }

  /** A seq the stream skipped is a gap, told; a delete EXITs at once, or, with an older location held, waits for it. */
  @Test
  void aGapIsToldAndADeleteExitsAtOnceOrAfterTheOlderLocations() throws Exception {
    clock.time = 1_000;
    ledger.receive(Queued.of(FenceEdit.upsert("a", 1, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 1, 100)));
    ledger.receive(Queued.of(FenceEdit.upsert("a", 3, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 2, 200)));
    assertThat(told).singleElement().asString().startsWith("gap: seq gap on fence a: seq 3 arrived after 1");
    clock.warmingUp = false;
    ledger.receive(Queued.of(FenceEdit.delete("a", 4, EditOrigin.STREAM, 3, 300)));
    assertThat(told).last().isEqualTo("exit a at 300");
    ledger.receive(Queued.of(FenceEdit.upsert("b", 1, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 4, 400)));
    clock.oldestHeld = 450;
    ledger.receive(Queued.of(FenceEdit.delete("b", 2, EditOrigin.STREAM, 5, 500)));
    assertThat(told).as("the EXITs wait for the location at 450").hasSize(2);
    assertThat(schedule.hasExit("b")).isTrue();
    ledger.releaseExit("b");
    assertThat(told).last().isEqualTo("exit b at 500");
  }

  /** A creation's and a reshape's superseded versions are kept for late locations, and written at a checkpoint with the fences held back. */
  @Test
  void aCheckpointWritesTheHistoryAndFlushesTheStore() throws Exception {
    clock.time = 1_000;
    ledger.receive(Queued.of(FenceEdit.upsert("a", 1, SQUARE, "t", StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 1, 100)));
    ledger.receive(Queued.of(FenceEdit.upsert("a", 2, SQUARE, "t", StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 2, 200)));
    assertThat(ledger.history().versionAt("a", 150).seq()).isEqualTo(1);
    assertThat(store.versions).isEmpty();
    ledger.checkpoint();
    assertThat(store.versions).as("no fence before 100, a@1 before 200").containsOnlyKeys("a@100", "a@200");
    assertThat(store.versions.get("a@100").deleted()).isTrue();
    assertThat(store.flushes).isEqualTo(1);
    assertThat(store.fences.get("a").seq()).isEqualTo(2);
  }

  /**
   * A bucket restored as one segment counts in its fingerprint as its fences restored one by one
   * do (tombstones and refused fences as the source counts them), and its fences take edits after.
   */
  @Test
  void aBucketRestoredAsASegmentMatchesItsFingerprint() throws Exception {
    String other = otherFenceOfTheBucketOf("a");
    int bucket = FenceBuckets.of("a");
    String third = "f0";
    for (int i = 0; FenceBuckets.of(third) != bucket || third.equals(other); i++) {
      third = "g" + i;
    }
    Map<String, StoredFence> fences = new HashMap<>();
    fences.put("a", StoredFence.of(3, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    fences.put(other, StoredFence.of(1, false, null, "t", StayRules.NO_FENCE_DELAY, 0));
    fences.put(third, StoredFence.of(2, true, null, null, StayRules.NO_FENCE_DELAY, 0));
    ledger.restore(bucket, FenceSegment.read(StoredFence.segment(fences)));
    hearAll(bucket, fingerprint(bucket, 1, "a@3", other + "@1"));
    assertThat(fingerprints.ready()).isTrue();
    assertThat(ledger.fences().liveCount()).isEqualTo(2);
    assertThat(ledger.fences().index().covering(5, 5, null)).containsExactly("a");
    ledger.receive(Queued.of(FenceEdit.delete("a", 4, EditOrigin.STREAM, 30, 300)));
    ledger.receive(Queued.of(fingerprint(bucket, 2, 300, other + "@1")));
    assertThat(fingerprints.ready()).isTrue();
    assertThat(ledger.fences().index().covering(5, 5, null)).isEmpty();
  }

  /**
   * The fences stored since a bucket's segment was written (its overlay), read back over it:
   * each replaces its segment's version in the index and in the bucket's fingerprint, and a
   * version older than the segment's changes nothing.
   */
  @Test
  void anOverlayReadBackOverItsSegmentReplacesItsVersions() throws Exception {
    String other = otherFenceOfTheBucketOf("a");
    int bucket = FenceBuckets.of("a");
    FenceGeometry moved = FenceGeometry.fromArrays(new double[] {20, 20, 30, 20, 30, 30, 20, 30, 20, 20}, new int[] {0, 5},
        new int[] {0, 1});
    Map<String, StoredFence> segment = new HashMap<>();
    segment.put("a", StoredFence.of(3, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    segment.put(other, StoredFence.of(1, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    ledger.restore(bucket, FenceSegment.read(StoredFence.segment(segment)));
    ledger.restore(bucket, "a", StoredFence.of(5, false, moved, null, StayRules.NO_FENCE_DELAY, 0));
    ledger.restore(bucket, other, StoredFence.of(2, true, null, null, StayRules.NO_FENCE_DELAY, 0));
    ledger.restore(bucket, "a", StoredFence.of(4, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    hearAll(bucket, fingerprint(bucket, 1, "a@5"));
    assertThat(fingerprints.ready()).isTrue();
    assertThat(ledger.fences().liveCount()).isEqualTo(1);
    assertThat(ledger.fences().seqOf(other)).isEqualTo(2);
    assertThat(ledger.fences().index().covering(5, 5, null)).isEmpty();
    assertThat(ledger.fences().index().covering(25, 25, null)).containsExactly("a");
  }

  /**
   * A bucket's segment read after edits of its fences applied (a rebuild reads the buckets a load
   * decided before the restore left unread, after the stream or the queue applied edits of them):
   * the newer versions stay, in the index, the count and the bucket's fingerprint, and the
   * segment's versions of them are not indexed. Red when the segment was loaded over them.
   */
  @Test
  void aSegmentReadAfterEditsOfItsFencesKeepsTheirNewerVersions() throws Exception {
    int bucket = FenceBuckets.of("a");
    String reshaped = otherFenceOfTheBucketOf("a");
    String deleted = "g0";
    for (int i = 1; FenceBuckets.of(deleted) != bucket || deleted.equals(reshaped); i++) {
      deleted = "g" + i;
    }
    FenceGeometry moved = FenceGeometry.fromArrays(new double[] {20, 20, 30, 20, 30, 30, 20, 30, 20, 20}, new int[] {0, 5},
        new int[] {0, 1});
    Map<String, StoredFence> segment = new HashMap<>();
    segment.put("a", StoredFence.of(3, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    segment.put(reshaped, StoredFence.of(10, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    segment.put(deleted, StoredFence.of(7, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    ledger.receive(Queued.of(FenceEdit.upsert(reshaped, 11, moved, null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 1, 100)));
    ledger.receive(Queued.of(FenceEdit.delete(deleted, 8, EditOrigin.STREAM, 2, 200)));
    ledger.restore(bucket, FenceSegment.read(StoredFence.segment(segment)));
    hearAll(bucket, fingerprint(bucket, 1, "a@3", reshaped + "@11"));
    assertThat(fingerprints.ready()).isTrue();
    assertThat(ledger.fences().liveCount()).isEqualTo(2);
    assertThat(ledger.fences().seqOf(reshaped)).isEqualTo(11);
    assertThat(ledger.fences().seqOf(deleted)).isEqualTo(8);
    assertThat(ledger.fences().isLive(deleted)).isFalse();
    assertThat(ledger.fences().index().covering(5, 5, null)).containsExactly("a");
    assertThat(ledger.fences().index().covering(25, 25, null)).containsExactly(reshaped);
  }

  /**
   * A catch-up's load sets every fence aside (a segment's and an overlay's, live and tombstones):
   * the index answers nothing, the store holds nothing, the bucket no longer matches; the fences
   * read anew then match the source's fingerprint as a fresh start's would, and a version older
   * than one set aside applies (nothing of the set-aside state is left to refuse it).
   */
  @Test
  void fencesClearedForALoadAreReadAsIntoAFreshStart() throws Exception {
    String other = otherFenceOfTheBucketOf("a");
    int bucket = FenceBuckets.of("a");
    Map<String, StoredFence> segment = new HashMap<>();
    segment.put("a", StoredFence.of(3, false, SQUARE, null, StayRules.NO_FENCE_DELAY, 0));
    segment.put(other, StoredFence.of(2, true, null, null, StayRules.NO_FENCE_DELAY, 0));
    ledger.restore(bucket, FenceSegment.read(StoredFence.segment(segment)));
    ledger.read(Queued.of(FenceEdit.upsert("b", 1, SQUARE, null, 4_000, EditOrigin.SNAPSHOT, 0, 0)));
    hearAll(bucket, fingerprint(bucket, 1, "a@3"));
    assertThat(store.fences).isNotEmpty();

    ledger.clearFences();
    assertThat(ledger.fences().liveCount()).isZero();
    assertThat(ledger.fences().seqOf("a")).isZero();
    assertThat(ledger.fences().seqOf(other)).as("a tombstone set aside too").isZero();
    assertThat(ledger.fences().index().size()).isZero();
    assertThat(ledger.fences().index().covering(5, 5, null)).isEmpty();
    assertThat(ledger.fences().index().dwellDelayOf("b")).isEqualTo(StayRules.NO_FENCE_DELAY);
    assertThat(store.fences).isEmpty();
    assertThat(fingerprints.ready()).as("a@3 and b@1 no longer held").isFalse();

    ledger.read(Queued.of(FenceEdit.upsert("a", 2, SQUARE, null, StayRules.NO_FENCE_DELAY, EditOrigin.SNAPSHOT, 0, 0)));
    ledger.read(Queued.of(FenceEdit.upsert(other, 4, SQUARE, "t", 700, EditOrigin.SNAPSHOT, 0, 0)));
    hearAll(bucket, fingerprint(bucket, 2, "a@2", other + "@4"));
    assertThat(fingerprints.ready()).isTrue();
    assertThat(ledger.fences().liveCount()).isEqualTo(2);
    assertThat(ledger.fences().index().covering(5, 5, null)).containsExactlyInAnyOrder("a", other);
    assertThat(ledger.fences().index().covering(5, 5, "t")).containsExactly(other);
    assertThat(ledger.fences().index().dwellDelayOf(other)).isEqualTo(700);
    assertThat(store.fences).containsOnlyKeys("a", other);
    assertThat(told).as("nothing deleted, nothing exited").isEmpty();

    // b, held at seq 1 before the load set it aside, has no row at the source: deleted as its
    // version 2, after the one its members entered (not as version 1 of a fence never seen).
    ledger.deleteGone("b", 1, 900);
    assertThat(ledger.fences().seqOf("b")).isEqualTo(2);
    assertThat(ledger.fences().isLive("b")).isFalse();
    assertThat(told).containsExactly("exit b at 900");
  }

  private void hearAll(int bucket, BucketFingerprint fingerprint) throws Exception {
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      ledger.read(Queued.of(b == bucket ? fingerprint : new BucketFingerprint(b, 0, 0, 1, 0, 0)));
    }
  }

  private static BucketFingerprint fingerprint(int bucket, long version, String... live) {
    return fingerprint(bucket, version, 0, live);
  }

  private static BucketFingerprint fingerprint(int bucket, long version, long commitTime, String... live) {
    long checksum = 0;
    for (String fence : live) {
      String[] idSeq = fence.split("@");
      checksum ^= FenceChecksum.hash(idSeq[0], Long.parseLong(idSeq[1]));
    }
    return new BucketFingerprint(bucket, live.length, checksum, version, 0, commitTime);
  }

  private static String otherFenceOfTheBucketOf(String fenceId) {
    for (int i = 0; ; i++) {
      if (FenceBuckets.of("f" + i) == FenceBuckets.of(fenceId)) {
        return "f" + i;
      }
    }
  }

  private final class TestClock implements FenceLedger.Clock {
    long time = Long.MIN_VALUE;
    long oldestHeld = Long.MAX_VALUE;
    long oldestUnevaluated = Long.MIN_VALUE;
    boolean warmingUp = true;

    @Override
    public long time() {
      return time;
    }

    @Override
    public long oldestHeld() {
      return oldestHeld;
    }

    @Override
    public boolean appliesAtOnce(long commitTime, String key) {
      return commitTime <= time || ((warmingUp || commitTime <= Math.min(oldestUnevaluated, oldestHeld)) && !schedule.hasEdits(key));
    }

    @Override
    public boolean warmingUp() {
      return warmingUp;
    }

    @Override
    public long historyHorizon() {
      return Math.min(time - 60_000, oldestHeld);
    }
  }

  private static final class Store implements LedgerStore {
    final Map<String, StoredFence> fences = new HashMap<>();
    final Map<String, StoredFence> versions = new HashMap<>();
    int flushes;

    @Override
    public void fence(String fenceId, StoredFence version) {
      fences.put(fenceId, version);
    }

    @Override
    public void removeFence(String fenceId) {
      fences.remove(fenceId);
    }

    @Override
    public void clearFences() {
      fences.clear();
    }

    @Override
    public String storedTenant(String fenceId) {
      StoredFence stored = fences.get(fenceId);
      return stored == null ? null : stored.tenant();
    }

    @Override
    public void fingerprint(BucketFingerprint fingerprint) {}

    @Override
    public void keepVersion(String fenceId, long until, StoredFence version) {
      versions.put(fenceId + "@" + until, version);
    }

    @Override
    public void forgetVersionsUpTo(String fenceId, long horizon) {
      versions.keySet().removeIf(k -> k.startsWith(fenceId + "@") && Long.parseLong(k.substring(fenceId.length() + 1)) <= horizon);
    }

    @Override
    public void flush() {
      flushes++;
    }

    @Override
    public void queued(String key, List<Queued> changes) {}

    @Override
    public void waitingExits(String fenceId, Map<Long, Long> exits) {}
  }
}
