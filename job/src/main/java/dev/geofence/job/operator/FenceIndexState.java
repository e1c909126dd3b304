package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.state.checksum.FenceBuckets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.KeyedStateStore;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;

/**
 * The fence index operator's keyed state: its layout (what each {@link FenceKey} holds, under
 * which name and serializer), the layouts of the releases before it and their move into the
 * current one on restore, and the reads and writes the operator makes of it. The savepoint tools
 * read and write the same state through the descriptors here.
 *
 * <p>A bucket's key holds the bucket's fences (a map by fence id) and its fingerprint as streamed;
 * a key group's key (a heartbeat's) how far the stream had been read; a fence's key the objects
 * inside the fence, its edits not yet applied, its deletes whose EXITs wait, and the versions it
 * had within the allowed lateness. Methods "of the current key" act on the key the operator has
 * set; the others set the key they need and put the operator's back.
 *
 * <p>Fences and fingerprints are written behind: held here, the newest by fence and by bucket,
 * until {@link #writeUnwritten} before the next snapshot (or once {@link #MAX_UNWRITTEN} are held),
 * so that versions superseded between two checkpoints never reach the state backend. A catch-up
 * replays most of a fence's edits within seconds (62 % superseded in an hour of the benchmark's),
 * and a write of one was a third of applying it: a serialized geometry put into RocksDB and, under
 * the changelog, into the changelog too.
 */
public final class FenceIndexState {

  private static final String FENCE_STATE = "fence";
  private static final String FENCES_STATE = "fences";
  private static final String MEMBERS_STATE = "members";
  private static final String FINGERPRINT_STATE = "bucket-fingerprint";
  private static final String POSITION_STATE = "stream-at";
  private static final String LEGACY_BUCKET_STATS_STATE = "bucket-stats";
  private static final String LEGACY_STREAM_POSITION_STATE = "stream-position";
  private static final String PENDING_EDITS_STATE = "pending-edits";
  private static final String PENDING_EXITS_STATE = "pending-exits";
  /** The fences' versions, and the name of the event-time timers by which an earlier release pruned them. */
  public static final String HISTORY_STATE = "fence-history";

  /**
   * Every fence's stored version, a map per bucket (keyed like the bucket's fingerprint): a restore
   * reads each bucket's fences in one pass, where a state per fence key cost a lookup per fence.
   */
  public static MapStateDescriptor<String, StoredFence> fencesStateDescriptor() {
    return new MapStateDescriptor<>(FENCES_STATE, StringSerializer.INSTANCE, StoredFenceSerializer.INSTANCE);
  }

  /**
   * Each fence's stored version as a value per fence key, as releases before the per-bucket maps
   * kept it: read on restore and moved into {@link #fencesStateDescriptor()}.
   */
  public static ValueStateDescriptor<StoredFence> fenceStateDescriptor() {
    return new ValueStateDescriptor<>(FENCE_STATE, StoredFenceSerializer.INSTANCE);
  }

  /** The objects inside each fence, and since when. */
  public static MapStateDescriptor<String, Long> membersStateDescriptor() {
    return new MapStateDescriptor<>(MEMBERS_STATE, Types.STRING, Types.LONG);
  }

  /** Each bucket's fingerprint as the stream delivered it. */
  public static ValueStateDescriptor<StoredFingerprint> fingerprintStateDescriptor() {
    return new ValueStateDescriptor<>(FINGERPRINT_STATE, StoredStateSerializers.FingerprintSerializer.INSTANCE);
  }

  /** Each key group's last heartbeat: how far the stream had been read. */
  public static ValueStateDescriptor<StoredPosition> positionStateDescriptor() {
    return new ValueStateDescriptor<>(POSITION_STATE, StoredStateSerializers.PositionSerializer.INSTANCE);
  }

  /**
   * {@link #fingerprintStateDescriptor()} and {@link #positionStateDescriptor()} as releases
   * before them kept them, as the stream's records: read on restore and moved into them.
   */
  public static ValueStateDescriptor<FenceChange> legacyBucketStatsStateDescriptor() {
    return new ValueStateDescriptor<>(LEGACY_BUCKET_STATS_STATE, TypeInformation.of(FenceChange.class));
  }

  /** See {@link #legacyBucketStatsStateDescriptor()}. */
  public static ValueStateDescriptor<FenceChange> legacyStreamPositionStateDescriptor() {
    return new ValueStateDescriptor<>(LEGACY_STREAM_POSITION_STATE, TypeInformation.of(FenceChange.class));
  }

  /** Each fence's versions superseded within the allowed lateness, by the time each ended. */
  private static MapStateDescriptor<Long, StoredFence> historyStateDescriptor() {
    return new MapStateDescriptor<>(HISTORY_STATE, LongSerializer.INSTANCE, StoredFenceSerializer.INSTANCE);
  }

  private static ListStateDescriptor<FenceChange> pendingEditsStateDescriptor() {
    return new ListStateDescriptor<>(PENDING_EDITS_STATE, TypeInformation.of(FenceChange.class));
  }

  /** A deleted fence's deletes whose EXITs wait for older held locations: commit time to the delete's seq. */
  private static MapStateDescriptor<Long, Long> pendingExitsStateDescriptor() {
    return new MapStateDescriptor<>(PENDING_EXITS_STATE, Types.LONG, Types.LONG);
  }

  /** What a restore finds besides the fences, in the order it reads it. */
  public interface Restored {
    void fingerprint(StoredFingerprint fingerprint);

    void position(StoredPosition position);

    void member(String fenceId, String objectId);

    /** A fence's superseded version, the fence's oldest first. */
    void version(String fenceId, long until, StoredFence version);

    /** An edit queued under a key: a fence's id, or a bucket fingerprint's. */
    void pendingEdit(String key, FenceChange change);

    void pendingExit(String fenceId, long time);
  }

  /**
   * A fence's stored version, as a restore reads it ({@link StoredFence#UNREADABLE} for one of an
   * unknown format), with the bucket it is stored in.
   */
  public interface StoredFenceConsumer {
    void accept(int bucket, String fenceId, StoredFence stored) throws Exception;
  }

  private final KeyedStateBackend<FenceKey> backend;
  private final StoredFenceSerializer fenceSerializer;
  private final boolean previousLayout;
  private final ValueState<StoredFence> fence;
  private final MapState<String, StoredFence> fences;
  private final MapState<String, Long> members;
  private final ListState<FenceChange> pendingEdits;
  private final MapState<Long, Long> pendingExits;
  private final ValueState<StoredFingerprint> fingerprint;
  private final ValueState<StoredPosition> position;
  private final ValueState<FenceChange> legacyBucketStats;
  private final ValueState<FenceChange> legacyStreamPosition;
  private final MapState<Long, StoredFence> history;
  private int movedFromPerFenceLayout;
  /** Fences stored or removed (null) since the last {@link #writeUnwritten}, by id, in the order first stored. */
  private final Map<String, StoredFence> unwrittenFences = new LinkedHashMap<>();
  /** Fingerprints stored since, by bucket. */
  private final Map<Integer, StoredFingerprint> unwrittenFingerprints = new HashMap<>();

  /**
   * The most fences held back at once: beyond it they are written, so that a long time without a
   * checkpoint (or with none configured) holds no more than a few megabytes of references. A
   * catch-up applies fewer fences than this per subtask between two checkpoints at the default
   * interval; a fresh start's read, in key order, is written in runs of this size in that order.
   */
  static final int MAX_UNWRITTEN = 65_536;

  /**
   * @param fenceSerializer the format fences are written in (the current one, but in tests of state another release wrote)
   * @param previousLayout whether to write as releases before the per-bucket maps and the state's own record types did
   *     (tests of the move)
   */
  public FenceIndexState(KeyedStateStore store, KeyedStateBackend<FenceKey> backend, StoredFenceSerializer fenceSerializer,
      boolean previousLayout) {
    this.backend = backend;
    this.fenceSerializer = fenceSerializer;
    this.previousLayout = previousLayout;
    fence = store.getState(new ValueStateDescriptor<>(FENCE_STATE, fenceSerializer));
    fences = store.getMapState(new MapStateDescriptor<>(FENCES_STATE, StringSerializer.INSTANCE, fenceSerializer));
    members = store.getMapState(membersStateDescriptor());
    pendingEdits = store.getListState(pendingEditsStateDescriptor());
    pendingExits = store.getMapState(pendingExitsStateDescriptor());
    fingerprint = store.getState(fingerprintStateDescriptor());
    position = store.getState(positionStateDescriptor());
    legacyBucketStats = store.getState(legacyBucketStatsStateDescriptor());
    legacyStreamPosition = store.getState(legacyStreamPositionStateDescriptor());
    history = store.getMapState(historyStateDescriptor());
  }

  // ---- restore -------------------------------------------------------------------------------------

  /**
   * Reads the stored version of every fence in the buckets of these key groups, then moves fences
   * of the per-fence layout into their buckets' maps (once; the next checkpoint carries the move)
   * and reads them too.
   */
  public void readFences(int maxParallelism, KeyGroupRange keyGroups, StoredFenceConsumer consumer) throws Exception {
    // Bucket by bucket, as their keys are known: Flink's applyToAllKeys would first find the keys
    // by a pass over every fence on RocksDB, a fifth of the reading's CPU in a profile (docs/performance/journal.md, "2026-12-02: two runs back to back").
    for (int bucket = 0; bucket < FenceBuckets.COUNT; bucket++) {
      if (FenceBuckets.inKeyGroups(bucket, maxParallelism, keyGroups.getStartKeyGroup(), keyGroups.getEndKeyGroup())) {
        backend.setCurrentKey(FenceKey.ofBucket(bucket));
        for (Map.Entry<String, StoredFence> stored : fences.entries()) {
          consumer.accept(bucket, stored.getKey(), stored.getValue());
        }
      }
    }
    Map<String, StoredFence> legacy = new HashMap<>();
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        new ValueStateDescriptor<>(FENCE_STATE, fenceSerializer),
        (FenceKey key, ValueState<StoredFence> state) -> legacy.put(key.id, state.value()));
    movedFromPerFenceLayout = legacy.size();
    for (Map.Entry<String, StoredFence> stored : legacy.entrySet()) {
      backend.setCurrentKey(new FenceKey(stored.getKey()));
      fence.clear();
      if (stored.getValue() != StoredFence.UNREADABLE) {
        store(stored.getKey(), stored.getValue());
      }
      consumer.accept(FenceBuckets.of(stored.getKey()), stored.getKey(), stored.getValue());
    }
  }

  /**
   * Moves fingerprints and stream positions that releases before their own state types kept as the
   * stream's records into those types (once; the next checkpoint carries the move), then reads
   * everything else this state holds.
   */
  public void readTheRest(Restored restored) throws Exception {
    Map<FenceKey, FenceChange> legacy = new HashMap<>();
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, legacyBucketStatsStateDescriptor(),
        (FenceKey key, ValueState<FenceChange> state) -> legacy.put(key, state.value()));
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, legacyStreamPositionStateDescriptor(),
        (FenceKey key, ValueState<FenceChange> state) -> legacy.put(key, state.value()));
    for (Map.Entry<FenceKey, FenceChange> record : legacy.entrySet()) {
      backend.setCurrentKey(record.getKey());
      FenceChange change = record.getValue();
      if (change.kind == FenceChange.Kind.BUCKET_STATS) {
        legacyBucketStats.clear();
        fingerprint.update(StoredFingerprint.of(change));
      } else {
        legacyStreamPosition.clear();
        position.update(StoredPosition.of(change));
      }
    }
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, fingerprintStateDescriptor(),
        (FenceKey key, ValueState<StoredFingerprint> state) -> restored.fingerprint(state.value()));
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, positionStateDescriptor(),
        (FenceKey key, ValueState<StoredPosition> state) -> restored.position(state.value()));
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, membersStateDescriptor(),
        (FenceKey key, MapState<String, Long> state) -> {
          for (String objectId : state.keys()) {
            restored.member(key.id, objectId);
          }
        });
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, historyStateDescriptor(),
        (FenceKey key, MapState<Long, StoredFence> state) -> {
          List<Long> ends = new ArrayList<>();
          state.keys().forEach(ends::add);
          Collections.sort(ends);
          for (Long until : ends) {
            restored.version(key.id, until, state.get(until));
          }
        });
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, pendingEditsStateDescriptor(),
        (FenceKey key, ListState<FenceChange> state) -> {
          for (FenceChange change : state.get()) {
            restored.pendingEdit(key.id, change);
          }
        });
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, pendingExitsStateDescriptor(),
        (FenceKey key, MapState<Long, Long> state) -> {
          for (Long time : state.keys()) {
            restored.pendingExit(key.id, time);
          }
        });
  }

  /** How many fences the last {@link #readFences} moved from the per-fence layout into the bucket maps. */
  public int movedFromPerFenceLayout() {
    return movedFromPerFenceLayout;
  }

  // ---- fences, in their buckets' maps --------------------------------------------------------------

  /** Stores a fence's version in its bucket's map (written behind). */
  public void store(String fenceId, StoredFence stored) throws Exception {
    if (previousLayout) {
      withKey(new FenceKey(fenceId), () -> {
        fence.update(stored);
        return null;
      });
      return;
    }
    holdBack(fenceId, stored);
  }

  /** The tenant of a fence's stored version, or null if there is none (or it has no tenant). */
  public String storedTenant(String fenceId) throws Exception {
    StoredFence stored = unwrittenFences.containsKey(fenceId) ? unwrittenFences.get(fenceId)
        : withKey(bucketKey(fenceId), () -> fences.get(fenceId));
    return stored == null ? null : stored.tenant;
  }

  /** Removes a fence's stored version (written behind). */
  public void removeFence(String fenceId) throws Exception {
    holdBack(fenceId, null);
  }

  private void holdBack(String fenceId, StoredFence stored) throws Exception {
    unwrittenFences.put(fenceId, stored);
    if (unwrittenFences.size() > MAX_UNWRITTEN) {
      writeUnwritten();
    }
  }

  /**
   * Writes the fences and fingerprints held back into keyed state: called in {@code snapshotState},
   * before the keyed state backend takes its snapshot.
   */
  public void writeUnwritten() throws Exception {
    if (unwrittenFences.isEmpty() && unwrittenFingerprints.isEmpty()) {
      return;
    }
    FenceKey key = backend.getCurrentKey();
    for (Map.Entry<String, StoredFence> held : unwrittenFences.entrySet()) {
      backend.setCurrentKey(bucketKey(held.getKey()));
      if (held.getValue() == null) {
        fences.remove(held.getKey());
      } else {
        fences.put(held.getKey(), held.getValue());
      }
    }
    for (Map.Entry<Integer, StoredFingerprint> held : unwrittenFingerprints.entrySet()) {
      backend.setCurrentKey(FenceKey.ofBucket(held.getKey()));
      fingerprint.update(held.getValue());
    }
    unwrittenFences.clear();
    unwrittenFingerprints.clear();
    if (key != null) {
      backend.setCurrentKey(key);
    }
  }

  // ---- a bucket's fingerprint and a key group's position: of the current key -----------------------

  /** Stores the bucket's fingerprint (written behind in the current layout). */
  public void storeFingerprint(FenceChange bucketStats) throws Exception {
    if (previousLayout) {
      legacyBucketStats.update(bucketStats);
    } else {
      unwrittenFingerprints.put(bucketStats.bucket, StoredFingerprint.of(bucketStats));
    }
  }

  public void storePosition(FenceChange heartbeat) throws Exception {
    if (previousLayout) {
      legacyStreamPosition.update(heartbeat);
    } else {
      position.update(StoredPosition.of(heartbeat));
    }
  }

  // ---- a fence's objects, queued edits and EXITs, versions: of the current key ---------------------

  /** Who is inside each fence: sets the fence's key. */
  public Membership membership() {
    return new Membership() {
      @Override
      public void entered(String fenceId, String objectId, long since) throws Exception {
        backend.setCurrentKey(new FenceKey(fenceId));
        members.put(objectId, since);
      }

      @Override
      public void left(String fenceId, String objectId) throws Exception {
        backend.setCurrentKey(new FenceKey(fenceId));
        members.remove(objectId);
      }
    };
  }

  public Iterable<String> members() throws Exception {
    return members.keys();
  }

  public void clearMembers() {
    members.clear();
  }

  public void queueEdit(FenceChange change) throws Exception {
    pendingEdits.add(change);
  }

  /** Takes the queued edits committed at or before {@code time} out of the queue, in the order they were queued. */
  public List<FenceChange> takeEditsUpTo(long time) throws Exception {
    List<FenceChange> due = new ArrayList<>();
    List<FenceChange> keep = new ArrayList<>();
    for (FenceChange change : pendingEdits.get()) {
      (change.commitTime <= time ? due : keep).add(change);
    }
    if (!due.isEmpty()) {
      pendingEdits.update(keep);
    }
    return due;
  }

  public void queueExit(long deletedAt, long seq) throws Exception {
    pendingExits.put(deletedAt, seq);
  }

  /** Takes the oldest delete whose EXITs wait: its commit time and seq. */
  public Map.Entry<Long, Long> takeOldestExit() throws Exception {
    long oldest = Long.MAX_VALUE;
    for (Long time : pendingExits.keys()) {
      oldest = Math.min(oldest, time);
    }
    Long seq = pendingExits.get(oldest);
    pendingExits.remove(oldest);
    return Map.entry(oldest, seq);
  }

  public void keepVersion(long until, StoredFence version) throws Exception {
    history.put(until, version);
  }

  public void forgetVersions() {
    history.clear();
  }

  /** Forgets the versions that ended at or before {@code horizon}. */
  public void forgetVersionsUpTo(long horizon) throws Exception {
    List<Long> ended = new ArrayList<>();
    for (Long until : history.keys()) {
      if (until <= horizon) {
        ended.add(until);
      }
    }
    for (Long until : ended) {
      history.remove(until);
    }
  }

  private interface StateCall<T> {
    T call() throws Exception;
  }

  private static FenceKey bucketKey(String fenceId) {
    return FenceKey.ofBucket(FenceBuckets.of(fenceId));
  }

  private <T> T withKey(FenceKey other, StateCall<T> call) throws Exception {
    FenceKey key = backend.getCurrentKey();
    backend.setCurrentKey(other);
    try {
      return call.call();
    } finally {
      if (key != null) {
        backend.setCurrentKey(key);
      }
    }
  }
}
