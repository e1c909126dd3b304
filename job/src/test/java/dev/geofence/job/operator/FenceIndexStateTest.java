package dev.geofence.job.operator;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.ledger.Queued;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.readiness.StreamPosition;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.contrib.streaming.state.EmbeddedRocksDBStateBackend;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class FenceIndexStateTest {

  /**
   * Changes queued for the clock reach keyed state as the schedule writes them at a checkpoint, in
   * this release's form, and a restore reads them back in order; a key left with none has none.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void queuedChangesAndWaitingExitsAreReadBackAsWritten(String backend) throws Exception {
    FenceGeometry square = square();
    Queued reshape = Queued.of(FenceEdit.upsert("a", 2, square, "t", StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 7, 100));
    Queued delete = Queued.of(FenceEdit.delete("a", 3, EditOrigin.STREAM, 8, 200));
    Queued stats = Queued.of(new BucketFingerprint(FenceBuckets.of("a"), 1, 42, 9, 8, 200));
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0, backend, false)) {
      harness.open();
      FenceIndexState state = state(harness);
      state.queued("a", List.of(reshape, delete));
      state.queued(stats.key(), List.of(stats));
      state.queued("b", List.of(Queued.of(FenceEdit.delete("b", 2, EditOrigin.STREAM, 1, 1))));
      state.queued("b", List.of());
      state.waitingExits("c", Map.of(500L, 4L, 200L, 2L));
      snapshot = harness.snapshot(1, 1);
    }
    try (var harness = harness(1, 0, backend, false)) {
      harness.initializeState(snapshot);
      Map<String, List<Queued>> queued = new HashMap<>();
      Map<String, Map<Long, Long>> exits = new HashMap<>();
      state(harness).readTheRest(new Reading() {
        @Override
        public void queued(String key, List<Queued> changes, boolean earlierForm) {
          assertThat(earlierForm).isFalse();
          queued.put(key, changes);
        }

        @Override
        public void waitingExits(String fenceId, Map<Long, Long> waiting) {
          exits.put(fenceId, waiting);
        }
      }, change -> {
        throw new AssertionError("nothing in an earlier form");
      });
      assertThat(queued).containsOnlyKeys("a", stats.key());
      assertThat(queued.get("a")).extracting(q -> q.edit().seq()).containsExactly(2L, 3L);
      assertThat(queued.get("a").get(0).edit()).isEqualTo(reshape.edit());
      assertThat(queued.get(stats.key())).containsExactly(stats);
      assertThat(exits).isEqualTo(Map.of("c", Map.of(500L, 4L, 200L, 2L)));
    }
  }

  /**
   * A delete takes the members that entered a version before it and leaves those of a later one
   * (the fence re-created); a member written without its seq (by a release before ADR 0020, or a
   * bootstrap) entered a version not known, and leaves with any delete.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aDeleteTakesTheMembersThatEnteredAVersionBeforeIt(String backend) throws Exception {
    try (var harness = harness(1, 0, backend, false)) {
      harness.open();
      FenceIndexState state = state(harness);
      state.entered("f", "old", 10, 1);
      state.entered("f", "reborn", 30, 3);
      harness.getOperator().setCurrentKey(new FenceKey("f"));
      harness.getOperator().getKeyedStateStore().getMapState(FenceIndexState.membersStateDescriptor()).put("unknown", 20L);
      assertThat(state.takeMembersBefore("f", 2)).containsExactlyInAnyOrder("old", "unknown");
      assertThat(state.fencesWithMembers()).containsExactly("f");
      assertThat(state.takeMembersBefore("f", 4)).containsExactly("reborn");
      assertThat(state.fencesWithMembers()).isEmpty();
    }
  }

  @Test
  void aFenceIsStoredInItsBucketsMapWhateverTheCurrentKey() throws Exception {
    try (var harness = harness(1, 0, "hashmap", false)) {
      harness.open();
      FenceIndexState state = state(harness);
      FenceKey current = new FenceKey("elsewhere");
      harness.getOperator().setCurrentKey(current);
      state.fence("a", StoredFence.of(3, false, square(), "t1", StayRules.NO_FENCE_DELAY, 10));
      assertThat(harness.getOperator().getCurrentKey()).as("the operator's key put back").isEqualTo(current);
      assertThat(state.storedTenant("a")).isEqualTo("t1");
      assertThat(state.storedTenant("b")).isNull();
      state.removeFence("a");
      assertThat(state.storedTenant("a")).isNull();
    }
  }

  /**
   * A fence stored again, removed, or a bucket's fingerprint stored again before the next snapshot
   * reaches keyed state once, as its newest version; reads in between see that version. Holding
   * more fences than {@link FenceIndexState#MAX_UNWRITTEN} writes them without a snapshot.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void fencesAndFingerprintsReachKeyedStateAsTheirNewestVersionAtTheNextSnapshot(String backend) throws Exception {
    try (var harness = harness(1, 0, backend, false)) {
      harness.open();
      Holder holder = (Holder) harness.getOperator();
      FenceIndexState state = holder.state;
      FenceGeometry square = square();
      int bucket = FenceBuckets.of("a");
      for (int seq = 1; seq <= 3; seq++) {
        state.fence("a", StoredFence.of(seq, false, square, "t" + seq, StayRules.NO_FENCE_DELAY, seq));
        state.fingerprint(fingerprint(bucket, seq));
      }
      state.fence("b", StoredFence.of(1, false, square, "t", StayRules.NO_FENCE_DELAY, 1));
      state.removeFence("b");
      assertThat(state.storedTenant("a")).as("the newest, before it is written").isEqualTo("t3");
      assertThat(state.storedTenant("b")).as("removed, before it is written").isNull();
      assertThat(holder.stored(bucket, "a")).as("nothing written before the snapshot").isNull();
      assertThat(holder.fingerprint(bucket)).isNull();

      harness.snapshot(1, 1);
      // Bucket "a"'s stored nothing: its fence is written as its segment, not into its overlay.
      assertThat(holder.stored(bucket, "a")).isNull();
      assertThat(holder.inSegment("a").seq()).isEqualTo(3);
      assertThat(holder.stored(FenceBuckets.of("b"), "b")).isNull();
      assertThat(holder.inSegment("b")).isNull();
      assertThat(holder.fingerprint(bucket).version()).isEqualTo(3);
      assertThat(state.storedTenant("a")).as("read back from keyed state").isEqualTo("t3");

      int many = FenceIndexState.MAX_UNWRITTEN + 1;
      for (int i = 0; i < many; i++) {
        state.fence("f" + i, StoredFence.of(1, true, null, null, StayRules.NO_FENCE_DELAY, i));
      }
      assertThat(holder.inSegment("f0")).as("written once more than the most held back").isNotNull();
      assertThat(holder.inSegment("f" + (many - 1))).isNotNull();
    }
  }

  /**
   * Written by one subtask (in the current layout, or in the layout of releases before the bucket
   * maps), restored as two, each reading half its buckets and then those left: every fence is read
   * exactly once, by the subtask whose key groups hold its bucket, and everything else a key held
   * is read once too.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap/current", "rocksdb/current", "hashmap/segments", "rocksdb/segments", "hashmap/previous",
      "rocksdb/previous"})
  void aRestoreAtAnotherParallelismReadsEachFenceOnceInTheSubtaskOwningItsBucket(String setting) throws Exception {
    String backend = setting.split("/")[0];
    boolean previousLayout = setting.endsWith("previous");
    Map<String, Long> written = new HashMap<>();
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0, backend, previousLayout)) {
      harness.open();
      ((Holder) harness.getOperator()).rewrite = setting.endsWith("segments");
      FenceIndexState state = state(harness);
      FenceGeometry square = square();
      for (int i = 0; i < 200; i++) {
        String id = "f" + i;
        written.put(id, (long) i % 7 + 1);
        state.fence(id, i % 5 == 0 ? StoredFence.of(i % 7 + 1, true, null, null, StayRules.NO_FENCE_DELAY, i) : StoredFence.of(i % 7 + 1, false, square, "t", StayRules.NO_FENCE_DELAY, i));
        state.entered(id, "o" + i, i, i % 7 + 1);
        state.keepVersion(id, 1_000 + i, StoredFence.of(0, false, square, "t", StayRules.NO_FENCE_DELAY, 0));
        state.fingerprint(fingerprint(FenceBuckets.of(id), i));
      }
      snapshot = harness.snapshot(1, 1);
    }

    Map<String, Long> read = new HashMap<>();
    List<String> members = new ArrayList<>();
    List<String> versions = new ArrayList<>();
    List<Integer> fingerprints = new ArrayList<>();
    Set<String> withMembers = new HashSet<>();
    int moved = 0;
    for (int subtask = 0; subtask < 2; subtask++) {
      try (var harness = harness(2, subtask, backend, false)) {
        harness.initializeState(AbstractStreamOperatorTestHarness.repartitionOperatorState(snapshot, 128, 1, 2, subtask));
        FenceIndexState state = state(harness);
        KeyGroupRange own = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(128, 2, subtask);
        Reading reading = new Reading() {
          @Override
          public void segment(int bucket, FenceSegment segment) {
            for (int i = 0; i < segment.size(); i++) {
              fence(bucket, segment.id(i), StoredFence.of(segment, i));
            }
          }

          @Override
          public void fence(int bucket, String id, StoredFence stored) {
            assertThat(bucket).as("fence %s read from its own bucket", id).isEqualTo(FenceBuckets.of(id));
            assertThat(FenceBuckets.inKeyGroups(bucket, 128, own.getStartKeyGroup(), own.getEndKeyGroup()))
                .as("fence %s read by the subtask owning its bucket", id).isTrue();
            assertThat(read.put(id, stored.seq())).as("fence %s read once", id).isNull();
          }

          @Override
          public void fingerprint(BucketFingerprint fingerprint) {
            fingerprints.add(fingerprint.bucket());
          }

          @Override
          public void member(String fenceId, String objectId, long since) {
            members.add(fenceId + "/" + objectId);
          }

          @Override
          public void version(String fenceId, long until, StoredFence version) {
            versions.add(fenceId + "@" + until);
          }
        };
        withMembers.addAll(state.fencesWithMembers());
        // Half the buckets first, as a restore that sees a load coming does, then the rest.
        Set<String> before = new HashSet<>(read.keySet());
        state.readFences(128, own, bucket -> bucket % 2 == 0, reading);
        if (!previousLayout) {
          assertThat(read.keySet()).filteredOn(id -> !before.contains(id)).as("only the buckets asked for")
              .allMatch(id -> FenceBuckets.of(id) % 2 == 0);
        }
        state.readLeftFences(reading);
        moved += state.movedFromPerFenceLayout();
        state.readTheRest(reading, change -> {
          throw new AssertionError("no queued change");
        });
      }
    }
    assertThat(read).isEqualTo(written);
    assertThat(moved).as("fences moved from the per-fence layout").isEqualTo(previousLayout ? 200 : 0);
    assertThat(members).hasSize(200).doesNotHaveDuplicates();
    assertThat(withMembers).as("the fences with members").isEqualTo(written.keySet());
    assertThat(versions).hasSize(200).doesNotHaveDuplicates();
    assertThat(fingerprints).doesNotHaveDuplicates()
        .containsExactlyInAnyOrderElementsOf(written.keySet().stream().map(FenceBuckets::of).distinct().toList());
  }

  /**
   * A load's fences, held back across many buckets, reach keyed state as each empty bucket's
   * segment and not one entry per fence; a bucket that already has a segment takes its overlay, as
   * does a bucket with a removal held; a restore reads back every version.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void fencesIntoBucketsThatStoreNoneAreWrittenAsTheirSegments(String backend) throws Exception {
    FenceGeometry square = square();
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 3_000; i++) {
      ids.add("load" + i);
    }
    List<String> earlier = sameBucket(2);
    String removed = ids.stream().filter(id -> FenceBuckets.of(id) != FenceBuckets.of(earlier.get(0))).findFirst().orElseThrow();
    Map<String, Long> expected = new HashMap<>();
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0, backend, false)) {
      harness.open();
      Holder holder = (Holder) harness.getOperator();
      FenceIndexState state = holder.state;
      state.fence(earlier.get(0), StoredFence.of(1, false, square, "t", StayRules.NO_FENCE_DELAY, 1));
      state.flush();
      expected.put(earlier.get(0), 1L);
      state.fence(earlier.get(1), StoredFence.of(4, false, square, "t", StayRules.NO_FENCE_DELAY, 1));
      expected.put(earlier.get(1), 4L);
      for (String id : ids) {
        long seq = 1 + (id.hashCode() & 7);
        state.fence(id, StoredFence.of(seq, seq == 8, seq == 8 ? null : square, "t", StayRules.NO_FENCE_DELAY, seq));
        expected.put(id, seq);
      }
      state.removeFence(removed);
      expected.remove(removed);
      snapshot = harness.snapshot(1, 1);
      assertThat(holder.inSegment(earlier.get(0)).seq()).isEqualTo(1);
      assertThat(holder.inSegment(earlier.get(1))).as("a bucket with a segment: its overlay").isNull();
      assertThat(holder.stored(FenceBuckets.of(earlier.get(1)), earlier.get(1)).seq()).isEqualTo(4);
      assertThat(holder.inSegment(removed)).isNull();
      int inOverlays = 0;
      for (String id : ids) {
        int bucket = FenceBuckets.of(id);
        if (bucket != FenceBuckets.of(earlier.get(0)) && bucket != FenceBuckets.of(removed)) {
          assertThat(holder.stored(bucket, id)).as(id).isNull();
          assertThat(holder.inSegment(id).seq()).as(id).isEqualTo(expected.get(id));
        } else if (!id.equals(removed)) {
          assertThat(holder.stored(bucket, id).seq()).as(id).isEqualTo(expected.get(id));
          inOverlays++;
        }
      }
      assertThat(inOverlays).as("only the fences of those two buckets").isLessThan(10);
      assertThat(state.segmentsRewrittenCount()).isZero();
    }
    try (var harness = harness(1, 0, backend, false)) {
      harness.initializeState(snapshot);
      Map<String, Long> read = new HashMap<>();
      state(harness).readFences(128, KeyGroupRange.of(0, 127), b -> true, new Reading() {
        @Override
        public void segment(int b, FenceSegment segment) {
          for (int i = 0; i < segment.size(); i++) {
            assertThat(read.put(segment.id(i), segment.seq(i))).isNull();
          }
        }

        @Override
        public void fence(int b, String id, StoredFence stored) {
          read.put(id, stored.seq());
        }
      });
      List<String> differ = new ArrayList<>();
      expected.forEach((id, seq) -> {
        if (!seq.equals(read.get(id))) {
          differ.add(id + ": " + seq + " written, " + read.get(id) + " read");
        }
      });
      assertThat(differ).isEmpty();
      assertThat(read).hasSameSizeAs(expected);

      // Set aside for a catch-up's load: a bucket whose segment was restored takes its overlay
      // (its key's restored segment is not overwritten), one that had none still its segment.
      Holder holder = (Holder) harness.getOperator();
      FenceIndexState state = state(harness);
      state.clearFences();
      String inRestored = ids.get(1);
      Set<Integer> stored = new HashSet<>();
      expected.keySet().forEach(id -> stored.add(FenceBuckets.of(id)));
      String inNew = "new0";
      for (int i = 1; stored.contains(FenceBuckets.of(inNew)); i++) {
        inNew = "new" + i;
      }
      state.fence(inRestored, StoredFence.of(9, false, square, "t", StayRules.NO_FENCE_DELAY, 9));
      state.fence(inNew, StoredFence.of(1, false, square, "t", StayRules.NO_FENCE_DELAY, 9));
      state.flush();
      assertThat(holder.stored(FenceBuckets.of(inRestored), inRestored).seq()).isEqualTo(9);
      assertThat(holder.segment(FenceBuckets.of(inRestored))).isNull();
      assertThat(holder.inSegment(inNew).seq()).isEqualTo(1);
    }
    // Left unread (a load decided before the restore reads the fences): what a bucket stores is
    // not known, so a fence into it goes into its overlay, never over its segment; once set
    // aside, a bucket takes its segment at once, as a fresh start's does.
    try (var harness = harness(1, 0, backend, false)) {
      harness.initializeState(snapshot);
      Holder holder = (Holder) harness.getOperator();
      FenceIndexState state = state(harness);
      state.readFences(128, KeyGroupRange.of(0, 127), b -> false, new Reading() {
        @Override
        public void fence(int b, String id, StoredFence stored) {
          throw new AssertionError("no fence read: " + id);
        }
      });
      // Two buckets of the load's that hold their segments (neither the removal's nor that of earlier's).
      List<String> withSegments = ids.stream().filter(id -> FenceBuckets.of(id) != FenceBuckets.of(removed)
          && FenceBuckets.of(id) != FenceBuckets.of(earlier.get(0))).toList();
      String before = withSegments.get(0);
      String after = withSegments.stream().filter(id -> FenceBuckets.of(id) != FenceBuckets.of(before)).findFirst().orElseThrow();
      byte[] storedSegment = holder.segment(FenceBuckets.of(before));
      assertThat(storedSegment).isNotNull();
      state.fence(before, StoredFence.of(20, false, square, "t", StayRules.NO_FENCE_DELAY, 20));
      state.flush();
      assertThat(holder.stored(FenceBuckets.of(before), before).seq()).isEqualTo(20);
      assertThat(holder.segment(FenceBuckets.of(before))).as("the unread bucket's segment untouched").isEqualTo(storedSegment);
      state.clearFences();
      state.fence(after, StoredFence.of(21, false, square, "t", StayRules.NO_FENCE_DELAY, 21));
      state.flush();
      assertThat(holder.stored(FenceBuckets.of(after), after)).as("not one put per fence").isNull();
      assertThat(holder.inSegment(after).seq()).isEqualTo(21);
      assertThat(FenceSegment.read(holder.segment(FenceBuckets.of(after))).size()).as("the bucket set aside holds only it").isEqualTo(1);
    }
  }

  /**
   * The fences written into a bucket that stores none are its segment at once; edits after it are
   * its overlay, which a restore reads after the segment, and whose versions {@link
   * FenceIndexState#storedTenant} finds before the segment's. A bucket's overlay is folded in once
   * it holds more than a quarter of the segment's fences.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aBucketsSegmentHoldsItsFencesAndItsOverlayTheEditsSince(String backend) throws Exception {
    List<String> ids = sameBucket(12);
    int bucket = FenceBuckets.of(ids.get(0));
    FenceGeometry square = square();
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0, backend, false)) {
      harness.open();
      Holder holder = (Holder) harness.getOperator();
      holder.rewrite = true;
      FenceIndexState state = holder.state;
      for (String id : ids) {
        state.fence(id, StoredFence.of(1, false, square, "t-" + id, StayRules.NO_FENCE_DELAY, 1));
      }
      harness.snapshot(1, 1);
      assertThat(state.segmentsRewrittenCount()).as("written as the segment, no overlay to fold").isZero();
      assertThat(holder.stored(bucket, ids.get(0))).as("not in the overlay").isNull();
      assertThat(FenceSegment.read(holder.segment(bucket)).size()).isEqualTo(12);
      assertThat(state.storedTenant(ids.get(0))).as("read from the segment").isEqualTo("t-" + ids.get(0));

      state.fence(ids.get(0), StoredFence.of(2, false, square, "moved", StayRules.NO_FENCE_DELAY, 2));
      state.fence(ids.get(1), StoredFence.of(2, true, null, "t-" + ids.get(1), StayRules.NO_FENCE_DELAY, 2));
      harness.snapshot(2, 2);
      assertThat(state.segmentsRewrittenCount()).as("2 of 12 is not more than a quarter").isZero();
      assertThat(holder.inSegment(ids.get(0)).seq()).as("the segment as written").isEqualTo(1);
      assertThat(holder.stored(bucket, ids.get(0)).seq()).isEqualTo(2);
      assertThat(state.storedTenant(ids.get(0))).as("the overlay's, over the segment's").isEqualTo("moved");
      snapshot = harness.snapshot(3, 3);
    }
    try (var harness = harness(1, 0, backend, false)) {
      harness.initializeState(snapshot);
      List<String> order = new ArrayList<>();
      Map<String, Long> versions = new HashMap<>();
      state(harness).readFences(128, KeyGroupRange.of(0, 127), b -> true, new Reading() {
        @Override
        public void segment(int b, FenceSegment segment) {
          order.add("segment " + b + " of " + segment.size());
          for (int i = 0; i < segment.size(); i++) {
            versions.put(segment.id(i), segment.seq(i));
          }
        }

        @Override
        public void fence(int b, String id, StoredFence stored) {
          order.add("overlay " + id);
          versions.put(id, stored.seq());
        }
      });
      assertThat(order).startsWith("segment " + bucket + " of 12").hasSize(3)
          .contains("overlay " + ids.get(0), "overlay " + ids.get(1));
      assertThat(versions).hasSize(12).containsEntry(ids.get(0), 2L).containsEntry(ids.get(1), 2L).containsEntry(ids.get(2), 1L);

      // A third edit passes the quarter: the next rewrite folds all three in.
      FenceIndexState state = state(harness);
      ((Holder) harness.getOperator()).rewrite = true;
      state.fence(ids.get(2), StoredFence.of(2, false, square, "t", StayRules.NO_FENCE_DELAY, 3));
      state.fence(ids.get(3), StoredFence.of(2, false, square, "t", StayRules.NO_FENCE_DELAY, 3));
      harness.snapshot(4, 4);
      assertThat(state.segmentsRewrittenCount()).isEqualTo(1);
      assertThat(((Holder) harness.getOperator()).stored(bucket, ids.get(0))).isNull();
      assertThat(state.storedTenant(ids.get(0))).isEqualTo("moved");
      assertThat(state.storedTenant(ids.get(1))).as("a tombstone keeps its tenant").isEqualTo("t-" + ids.get(1));
    }
  }

  /**
   * A segment whose bytes are damaged is refused, never misread: the restore is told why, the
   * segment is dropped, and the bucket's overlay is read as before.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aDamagedSegmentIsRefusedAndDroppedAndItsOverlayStillRead(String backend) throws Exception {
    List<String> ids = sameBucket(8);
    int bucket = FenceBuckets.of(ids.get(0));
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0, backend, false)) {
      harness.open();
      Holder holder = (Holder) harness.getOperator();
      holder.rewrite = true;
      for (String id : ids) {
        holder.state.fence(id, StoredFence.of(1, false, square(), "t", StayRules.NO_FENCE_DELAY, 1));
      }
      harness.snapshot(1, 1);
      byte[] bytes = holder.segment(bucket);
      bytes[bytes.length / 2] ^= 0x10;
      holder.segment(bucket, bytes);
      holder.rewrite = false;
      holder.state.fence(ids.get(0), StoredFence.of(2, false, square(), "t", StayRules.NO_FENCE_DELAY, 2));
      snapshot = harness.snapshot(2, 2);
    }
    try (var harness = harness(1, 0, backend, false)) {
      harness.initializeState(snapshot);
      List<String> reasons = new ArrayList<>();
      List<String> read = new ArrayList<>();
      state(harness).readFences(128, KeyGroupRange.of(0, 127), b -> true, new Reading() {
        @Override
        public void segment(int b, FenceSegment segment) {
          read.add("segment " + b);
        }

        @Override
        public void unreadableSegment(int b, String reason) {
          reasons.add(b + ": " + reason);
        }

        @Override
        public void fence(int b, String id, StoredFence stored) {
          read.add(id);
        }
      });
      assertThat(reasons).singleElement().asString().startsWith(bucket + ": ").contains("CRC-32C");
      assertThat(read).containsExactly(ids.get(0));
      assertThat(((Holder) harness.getOperator()).segment(bucket)).as("dropped").isNull();
    }
  }

  /**
   * Once the index is loaded every bucket's overlay holds all its fences: a checkpoint rewrites at
   * most {@link FenceIndexState#MAX_REWRITTEN} fences' worth of segments, the largest overlays first,
   * and the next ones rewrite the rest; a savepoint rewrites every bucket due at once.
   */
  @ParameterizedTest
  @ValueSource(strings = {"checkpoint", "savepoint"})
  void aCheckpointRewritesAtMostABudgetOfSegmentsASavepointAll(String snapshot) throws Exception {
    try (var harness = harness(1, 0, "hashmap", false)) {
      harness.open();
      Holder holder = (Holder) harness.getOperator();
      // A fence in every bucket first, written as the buckets' segments; then the overlays.
      List<String> seeds = oneInEachBucket();
      for (String id : seeds) {
        holder.state.fence(id, StoredFence.of(1, true, null, "t", StayRules.NO_FENCE_DELAY, 0));
      }
      holder.state.flush();
      int fences = FenceIndexState.MAX_REWRITTEN + FenceIndexState.MAX_REWRITTEN / 2;
      for (int i = 0; i < fences; i++) {
        holder.state.fence("f" + i, StoredFence.of(1, true, null, "t", StayRules.NO_FENCE_DELAY, i));
      }
      holder.state.flush();
      fences += seeds.size();
      boolean checkpoint = snapshot.equals("checkpoint");
      int first = holder.state.rewriteSegments(checkpoint);
      if (checkpoint) {
        assertThat(first).isGreaterThan(0).isLessThan(FenceBuckets.COUNT);
        assertThat(first + holder.state.rewriteSegments(true)).isEqualTo(FenceBuckets.COUNT);
      } else {
        assertThat(first).isEqualTo(FenceBuckets.COUNT);
      }
      assertThat(holder.state.rewriteSegments(true)).as("nothing left to fold in").isZero();
      int inSegments = 0;
      for (int bucket = 0; bucket < FenceBuckets.COUNT; bucket++) {
        inSegments += FenceSegment.read(holder.segment(bucket)).size();
      }
      assertThat(inSegments).isEqualTo(fences);
    }
  }

  /** An id of each bucket. */
  private static List<String> oneInEachBucket() {
    String[] ids = new String[FenceBuckets.COUNT];
    int found = 0;
    for (int i = 0; found < ids.length; i++) {
      int bucket = FenceBuckets.of("seed" + i);
      if (ids[bucket] == null) {
        ids[bucket] = "seed" + i;
        found++;
      }
    }
    return List.of(ids);
  }

  /** Ids of one bucket. */
  private static List<String> sameBucket(int count) {
    List<String> ids = new ArrayList<>();
    int bucket = FenceBuckets.of("s0");
    for (int i = 0; ids.size() < count; i++) {
      if (FenceBuckets.of("s" + i) == bucket) {
        ids.add("s" + i);
      }
    }
    return ids;
  }

  private static BucketFingerprint fingerprint(int bucket, long version) {
    return new BucketFingerprint(bucket, 0, 0, version, 0, 0);
  }

  /** What a restore found: nothing, unless a test says otherwise. */
  private abstract static class Reading implements FenceIndexState.Restored {
    @Override
    public void fence(int bucket, String fenceId, StoredFence stored) {}

    @Override
    public void fingerprint(BucketFingerprint fingerprint) {}

    @Override
    public void version(String fenceId, long until, StoredFence version) {}

    @Override
    public void queued(String key, List<Queued> changes, boolean earlierForm) {}

    @Override
    public void waitingExits(String fenceId, Map<Long, Long> exits) {}

    @Override
    public void member(String fenceId, String objectId, long since) {}

    @Override
    public void position(StreamPosition position) {}

    @Override
    public void segment(int bucket, FenceSegment segment) {}

    @Override
    public void unreadableSegment(int bucket, String reason) {
      throw new AssertionError("bucket " + bucket + "'s segment unreadable: " + reason);
    }
  }

  private static FenceGeometry square() throws Exception {
    return new FenceGeometryReader(GeometryReadOptions.defaults()).readWkt("POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))").geometry();
  }

  private static FenceIndexState state(KeyedOneInputStreamOperatorTestHarness<FenceKey, FenceKey, Void> harness) {
    return ((Holder) harness.getOperator()).state;
  }

  /** A harness around an operator that only holds the state; max parallelism 128. */
  private static KeyedOneInputStreamOperatorTestHarness<FenceKey, FenceKey, Void> harness(
      int parallelism, int subtask, String backend, boolean previousLayout) throws Exception {
    var harness = new KeyedOneInputStreamOperatorTestHarness<>(
        new Holder(previousLayout), (FenceKey key) -> key, TypeInformation.of(FenceKey.class), 128, parallelism, subtask);
    if (backend.equals("rocksdb")) {
      harness.setStateBackend(new EmbeddedRocksDBStateBackend());
    }
    return harness;
  }

  private static final class Holder extends AbstractStreamOperator<Void> implements OneInputStreamOperator<FenceKey, Void> {
    private final boolean previousLayout;
    transient FenceIndexState state;
    /** Whether a snapshot rewrites segments, as the operator's do once the index is ready. */
    boolean rewrite;
    private transient MapState<String, StoredFence> fences;
    private transient ValueState<byte[]> segment;
    private transient ValueState<BucketFingerprint> fingerprint;

    Holder(boolean previousLayout) {
      this.previousLayout = previousLayout;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
      super.initializeState(context);
      state = new FenceIndexState(context.getKeyedStateStore(), getKeyedStateBackend(),
          previousLayout ? new FenceIndexState.Writing(StoredFenceSerializer.FORMAT_VERSION, true) : FenceIndexState.Writing.CURRENT);
      fences = context.getKeyedStateStore().getMapState(FenceIndexState.fencesStateDescriptor());
      segment = context.getKeyedStateStore().getState(FenceIndexState.segmentStateDescriptor());
      fingerprint = context.getKeyedStateStore().getState(FenceIndexState.fingerprintStateDescriptor());
    }

    /** What keyed state itself holds for a fence, read past the state's own methods. */
    StoredFence stored(int bucket, String fenceId) throws Exception {
      setCurrentKey(FenceKey.ofBucket(bucket));
      return fences.get(fenceId);
    }

    /** The version of a fence that its bucket's segment in keyed state holds, or null. */
    StoredFence inSegment(String fenceId) throws Exception {
      byte[] bytes = segment(FenceBuckets.of(fenceId));
      FenceSegment read = bytes == null ? null : FenceSegment.read(bytes);
      int i = read == null ? -1 : read.positionOf(fenceId);
      return i < 0 ? null : StoredFence.of(read, i);
    }

    byte[] segment(int bucket) throws Exception {
      setCurrentKey(FenceKey.ofBucket(bucket));
      byte[] bytes = segment.value();
      return bytes == null ? null : bytes.clone();
    }

    void segment(int bucket, byte[] bytes) throws Exception {
      setCurrentKey(FenceKey.ofBucket(bucket));
      segment.update(bytes);
    }

    BucketFingerprint fingerprint(int bucket) throws Exception {
      setCurrentKey(FenceKey.ofBucket(bucket));
      return fingerprint.value();
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
      super.snapshotState(context);
      state.flush();
      if (rewrite) {
        state.rewriteSegments(true);
      }
    }

    @Override
    public void processElement(StreamRecord<FenceKey> element) {}
  }
}
