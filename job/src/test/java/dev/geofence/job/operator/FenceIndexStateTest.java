package dev.geofence.job.operator;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
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

  @Test
  void aFencesQueuedEditsAreTakenUpToATimeAndTheLaterOnesStayQueued() throws Exception {
    try (var harness = harness(1, 0, "hashmap", false)) {
      harness.open();
      FenceIndexState state = state(harness);
      harness.getOperator().setCurrentKey(new FenceKey("a"));
      state.queueEdit(edit("a", 1, 100));
      state.queueEdit(edit("a", 2, 200));
      state.queueEdit(edit("a", 3, 300));
      harness.getOperator().setCurrentKey(new FenceKey("b"));
      state.queueEdit(edit("b", 1, 150));

      harness.getOperator().setCurrentKey(new FenceKey("a"));
      assertThat(state.takeEditsUpTo(200)).extracting(c -> c.seq).containsExactly(1L, 2L);
      assertThat(state.takeEditsUpTo(250)).isEmpty();
      assertThat(state.takeEditsUpTo(300)).extracting(c -> c.seq).containsExactly(3L);
      assertThat(state.takeEditsUpTo(Long.MAX_VALUE)).isEmpty();
      harness.getOperator().setCurrentKey(new FenceKey("b"));
      assertThat(state.takeEditsUpTo(Long.MAX_VALUE)).as("another fence's queue").extracting(c -> c.seq).containsExactly(1L);
    }
  }

  @Test
  void theOldestWaitingDeleteIsTakenFirst() throws Exception {
    try (var harness = harness(1, 0, "hashmap", false)) {
      harness.open();
      FenceIndexState state = state(harness);
      harness.getOperator().setCurrentKey(new FenceKey("a"));
      state.queueExit(500, 4);
      state.queueExit(200, 2);
      assertThat(state.takeOldestExit()).isEqualTo(Map.entry(200L, 2L));
      assertThat(state.takeOldestExit()).isEqualTo(Map.entry(500L, 4L));
    }
  }

  @Test
  void aFenceIsStoredInItsBucketsMapWhateverTheCurrentKey() throws Exception {
    try (var harness = harness(1, 0, "hashmap", false)) {
      harness.open();
      FenceIndexState state = state(harness);
      FenceKey current = new FenceKey("elsewhere");
      harness.getOperator().setCurrentKey(current);
      state.store("a", StoredFence.of(3, false, square(), "t1", 10));
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
        state.store("a", StoredFence.of(seq, false, square, "t" + seq, seq));
        state.storeFingerprint(fingerprint(bucket, seq));
      }
      state.store("b", StoredFence.of(1, false, square, "t", 1));
      state.removeFence("b");
      assertThat(state.storedTenant("a")).as("the newest, before it is written").isEqualTo("t3");
      assertThat(state.storedTenant("b")).as("removed, before it is written").isNull();
      assertThat(holder.stored(bucket, "a")).as("nothing written before the snapshot").isNull();
      assertThat(holder.fingerprint(bucket)).isNull();

      harness.snapshot(1, 1);
      assertThat(holder.stored(bucket, "a").seq).isEqualTo(3);
      assertThat(holder.stored(FenceBuckets.of("b"), "b")).isNull();
      assertThat(holder.fingerprint(bucket).version()).isEqualTo(3);
      assertThat(state.storedTenant("a")).as("read back from keyed state").isEqualTo("t3");

      int many = FenceIndexState.MAX_UNWRITTEN + 1;
      for (int i = 0; i < many; i++) {
        state.store("f" + i, StoredFence.of(1, true, null, null, i));
      }
      assertThat(holder.stored(FenceBuckets.of("f0"), "f0")).as("written once more than the most held back").isNotNull();
      assertThat(holder.stored(FenceBuckets.of("f" + (many - 1)), "f" + (many - 1))).isNotNull();
    }
  }

  /**
   * Written by one subtask (in the current layout, or in the layout of releases before the bucket
   * maps), restored as two: every fence is read exactly once, by the subtask whose key groups hold
   * its bucket, and everything else a key held is read once too.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap/current", "rocksdb/current", "hashmap/previous", "rocksdb/previous"})
  void aRestoreAtAnotherParallelismReadsEachFenceOnceInTheSubtaskOwningItsBucket(String setting) throws Exception {
    String backend = setting.split("/")[0];
    boolean previousLayout = setting.endsWith("previous");
    Map<String, Long> written = new HashMap<>();
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0, backend, previousLayout)) {
      harness.open();
      FenceIndexState state = state(harness);
      FenceGeometry square = square();
      for (int i = 0; i < 200; i++) {
        String id = "f" + i;
        written.put(id, (long) i % 7 + 1);
        state.store(id, i % 5 == 0 ? StoredFence.of(i % 7 + 1, true, null, null, i) : StoredFence.of(i % 7 + 1, false, square, "t", i));
        harness.getOperator().setCurrentKey(new FenceKey(id));
        state.membership().entered(id, "o" + i, i);
        state.keepVersion(1_000 + i, StoredFence.of(0, false, square, "t", 0));
        harness.getOperator().setCurrentKey(FenceKey.ofBucket(FenceBuckets.of(id)));
        state.storeFingerprint(fingerprint(FenceBuckets.of(id), i));
      }
      snapshot = harness.snapshot(1, 1);
    }

    Map<String, Long> read = new HashMap<>();
    List<String> members = new ArrayList<>();
    List<String> versions = new ArrayList<>();
    List<Integer> fingerprints = new ArrayList<>();
    int moved = 0;
    for (int subtask = 0; subtask < 2; subtask++) {
      try (var harness = harness(2, subtask, backend, false)) {
        harness.initializeState(AbstractStreamOperatorTestHarness.repartitionOperatorState(snapshot, 128, 1, 2, subtask));
        FenceIndexState state = state(harness);
        KeyGroupRange own = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(128, 2, subtask);
        state.readFences(128, own, (bucket, id, stored) -> {
          assertThat(bucket).as("fence %s read from its own bucket", id).isEqualTo(FenceBuckets.of(id));
          assertThat(FenceBuckets.inKeyGroups(bucket, 128, own.getStartKeyGroup(), own.getEndKeyGroup()))
              .as("fence %s read by the subtask owning its bucket", id).isTrue();
          assertThat(read.put(id, stored.seq)).as("fence %s read once", id).isNull();
        });
        moved += state.movedFromPerFenceLayout();
        state.readTheRest(new FenceIndexState.Restored() {
          @Override
          public void fingerprint(StoredFingerprint fingerprint) {
            fingerprints.add(fingerprint.bucket());
          }

          @Override
          public void position(StoredPosition position) {}

          @Override
          public void member(String fenceId, String objectId) {
            members.add(fenceId + "/" + objectId);
          }

          @Override
          public void version(String fenceId, long until, StoredFence version) {
            versions.add(fenceId + "@" + until);
          }

          @Override
          public void pendingEdit(String key, FenceChange change) {}

          @Override
          public void pendingExit(String fenceId, long time) {}
        });
      }
    }
    assertThat(read).isEqualTo(written);
    assertThat(moved).as("fences moved from the per-fence layout").isEqualTo(previousLayout ? 200 : 0);
    assertThat(members).hasSize(200).doesNotHaveDuplicates();
    assertThat(versions).hasSize(200).doesNotHaveDuplicates();
    assertThat(fingerprints).doesNotHaveDuplicates()
        .containsExactlyInAnyOrderElementsOf(written.keySet().stream().map(FenceBuckets::of).distinct().toList());
  }

  private static FenceChange edit(String id, long seq, long commitTime) {
    FenceChange change = new FenceChange();
    change.kind = FenceChange.Kind.FENCE;
    change.fenceId = id;
    change.seq = seq;
    change.commitTime = commitTime;
    return change;
  }

  private static FenceChange fingerprint(int bucket, long version) {
    FenceChange change = new FenceChange();
    change.kind = FenceChange.Kind.BUCKET_STATS;
    change.bucket = bucket;
    change.seq = version;
    return change;
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
    private transient MapState<String, StoredFence> fences;
    private transient ValueState<StoredFingerprint> fingerprint;

    Holder(boolean previousLayout) {
      this.previousLayout = previousLayout;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
      super.initializeState(context);
      state = new FenceIndexState(context.getKeyedStateStore(), getKeyedStateBackend(), StoredFenceSerializer.INSTANCE, previousLayout);
      fences = context.getKeyedStateStore().getMapState(FenceIndexState.fencesStateDescriptor());
      fingerprint = context.getKeyedStateStore().getState(FenceIndexState.fingerprintStateDescriptor());
    }

    /** What keyed state itself holds for a fence, read past the state's own methods. */
    StoredFence stored(int bucket, String fenceId) throws Exception {
      setCurrentKey(FenceKey.ofBucket(bucket));
      return fences.get(fenceId);
    }

    StoredFingerprint fingerprint(int bucket) throws Exception {
      setCurrentKey(FenceKey.ofBucket(bucket));
      return fingerprint.value();
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
      super.snapshotState(context);
      state.writeUnwritten();
    }

    @Override
    public void processElement(StreamRecord<FenceKey> element) {}
  }
}
