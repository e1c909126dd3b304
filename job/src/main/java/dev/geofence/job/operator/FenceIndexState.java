package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.ledger.LedgerStore;
import dev.geofence.state.ledger.Queued;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.readiness.StreamPosition;
import dev.geofence.state.segment.CoordinateArena;
import dev.geofence.state.segment.FenceSegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.IntPredicate;
import org.apache.flink.api.common.state.KeyedStateStore;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;

/**
 * The fence index operator's keyed state: its layout (what each {@link FenceKey} holds, under
 * which name and serializer), the layouts of the releases before it and their move into the
 * current one on restore, and the reads and writes of it, each setting the key it is of. It is the
 * fence ledger's {@link LedgerStore} and the evaluation's {@link Membership}. The savepoint tools
 * read and write the same state through the descriptors here.
 *
 * <p>A bucket's key holds the bucket's fences and its fingerprint as streamed. Its fences are one
 * {@link FenceSegment} (written whole, read in place by the index) and an overlay, a map by fence
 * id of the versions stored since the segment was written; {@link #rewriteSegments} folds an overlay
 * into a new segment once it holds more than a quarter of the segment's fences (design.md, "The
 * snapshot as the index"; ADR 0011). The fences written into a bucket that stores none and had no
 * segment restored (a fresh start's load) are its segment at once.
 *
 * <p>Beside the bucket's state, a key group's key (a heartbeat's) how far the stream had been read;
 * a fence's key the objects inside the fence and the seq of the version each entered, its changes
 * queued for the clock, its deletes whose EXITs wait, and the versions it had within the allowed
 * lateness.
 *
 * <p>Fences and fingerprints are written behind: held here, the newest by fence and by bucket,
 * until {@link #flush} before the next snapshot (or once {@link #MAX_UNWRITTEN} are held), so that
 * versions superseded between two checkpoints never reach the state backend. A catch-up replays
 * most of a fence's edits within seconds (62 % superseded in an hour of the benchmark's), and a
 * write of one was a third of applying it: a serialized geometry put into RocksDB and, under the
 * changelog, into the changelog too.
 */
public final class FenceIndexState implements LedgerStore, Membership {

  private static final String FENCE_STATE = "fence";
  private static final String FENCES_STATE = "fences";
  private static final String SEGMENT_STATE = "fence-segment";
  private static final String OVERLAY_PUTS_STATE = "fence-overlay-puts";
  private static final String MEMBERS_STATE = "members";
  private static final String MEMBER_SEQS_STATE = "member-seqs";
  private static final String FINGERPRINT_STATE = "bucket-fingerprint";
  private static final String POSITION_STATE = "stream-at";
  private static final String LEGACY_BUCKET_STATS_STATE = "bucket-stats";
  private static final String LEGACY_STREAM_POSITION_STATE = "stream-position";
  private static final String LEGACY_PENDING_EDITS_STATE = "pending-edits";
  private static final String QUEUED_STATE = "queued";
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
   * Each bucket's fences as one segment's bytes (format {@value FenceSegment#FORMAT_VERSION}, or 1 for a
   * bucket without dwell delays, or 4 and 3 as a load writes them; checked by CRC-32C): those not in the bucket's overlay, {@link #fencesStateDescriptor()}.
   */
  public static ValueStateDescriptor<byte[]> segmentStateDescriptor() {
    return new ValueStateDescriptor<>(SEGMENT_STATE, BytePrimitiveArraySerializer.INSTANCE);
  }

  /**
   * Per bucket, the puts into its overlay since its segment was written (a bound on the overlay's
   * size; none in the state of releases before segments): a restore skips the overlay of a bucket
   * with none, whose map, emptied by the rewrite, RocksDB would otherwise seek through the deleted
   * entries of (half a restore's reading at a million fences, 2026-12-05).
   */
  public static ValueStateDescriptor<Integer> overlayPutsStateDescriptor() {
    return new ValueStateDescriptor<>(OVERLAY_PUTS_STATE, IntSerializer.INSTANCE);
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

  /**
   * Of the objects inside each fence, the seq of the fence version each entered (ADR 0020): a
   * delete EXITs those that entered a version before it. Apart from {@link #membersStateDescriptor}
   * so that savepoints of the releases before, and the savepoint tools' bootstraps, restore without
   * it: a member with no seq entered a version the job cannot tell, and any delete EXITs it.
   */
  public static MapStateDescriptor<String, Long> memberSeqsStateDescriptor() {
    return new MapStateDescriptor<>(MEMBER_SEQS_STATE, Types.STRING, Types.LONG);
  }

  /** Each bucket's fingerprint as the stream delivered it. */
  public static ValueStateDescriptor<BucketFingerprint> fingerprintStateDescriptor() {
    return new ValueStateDescriptor<>(FINGERPRINT_STATE, StoredStateSerializers.FingerprintSerializer.INSTANCE);
  }

  /** Each key group's last heartbeat: how far the stream had been read. */
  public static ValueStateDescriptor<StreamPosition> positionStateDescriptor() {
    return new ValueStateDescriptor<>(POSITION_STATE, StoredStateSerializers.PositionSerializer.INSTANCE);
  }

  /** Each key's changes queued for the clock: a fence's edits, or a bucket's fingerprint. */
  public static ListStateDescriptor<Queued> queuedStateDescriptor() {
    return new ListStateDescriptor<>(QUEUED_STATE, QueuedSerializer.INSTANCE);
  }

  /**
   * {@link #fingerprintStateDescriptor()}, {@link #positionStateDescriptor()} and {@link
   * #queuedStateDescriptor()} as releases before them kept them, as the stream's records: read on
   * restore and moved into them.
   */
  public static ValueStateDescriptor<FenceChange> legacyBucketStatsStateDescriptor() {
    return new ValueStateDescriptor<>(LEGACY_BUCKET_STATS_STATE, TypeInformation.of(FenceChange.class));
  }

  /** See {@link #legacyBucketStatsStateDescriptor()}. */
  public static ValueStateDescriptor<FenceChange> legacyStreamPositionStateDescriptor() {
    return new ValueStateDescriptor<>(LEGACY_STREAM_POSITION_STATE, TypeInformation.of(FenceChange.class));
  }

  /** See {@link #legacyBucketStatsStateDescriptor()}. */
  public static ListStateDescriptor<FenceChange> legacyPendingEditsStateDescriptor() {
    return new ListStateDescriptor<>(LEGACY_PENDING_EDITS_STATE, TypeInformation.of(FenceChange.class));
  }

  /** Each fence's versions superseded within the allowed lateness, by the time each ended. */
  public static MapStateDescriptor<Long, StoredFence> historyStateDescriptor() {
    return new MapStateDescriptor<>(HISTORY_STATE, LongSerializer.INSTANCE, StoredFenceSerializer.INSTANCE);
  }

  /** A deleted fence's deletes whose EXITs wait for older held locations: commit time to the delete's seq. */
  public static MapStateDescriptor<Long, Long> pendingExitsStateDescriptor() {
    return new MapStateDescriptor<>(PENDING_EXITS_STATE, Types.LONG, Types.LONG);
  }

  /**
   * What a restore finds besides the ledger's: buckets' segments, who is inside which fence, and how
   * far the stream had been read.
   */
  public interface Restored extends LedgerStore.Restored {
    /** A bucket's segment, read before its overlay's fences: those replace the segment's versions. */
    void segment(int bucket, FenceSegment segment);

    /**
     * A bucket's segment that cannot be read (another format, or damaged): it is dropped, so the
     * bucket holds its overlay alone until a rebuild reads its fences again.
     */
    void unreadableSegment(int bucket, String reason);

    void member(String fenceId, String objectId, long since);

    void position(StreamPosition position);
  }

  private final KeyedStateBackend<FenceKey> backend;
  private final StoredFenceSerializer fenceSerializer;
  private final boolean previousLayout;
  private final ValueState<StoredFence> fence;
  private final MapState<String, StoredFence> fences;
  private final ValueState<byte[]> segment;
  private final ValueState<Integer> overlayPutsState;
  private final boolean segments;
  /** The buckets of this subtask's key groups, as {@link #readFences} was told them. */
  private final boolean[] ownBuckets = new boolean[FenceBuckets.COUNT];
  /** Per bucket: the fences in its segment, and the puts into its overlay since (a bound on the overlay's size). */
  private final int[] segmentSizes = new int[FenceBuckets.COUNT];
  private final int[] overlayPuts = new int[FenceBuckets.COUNT];
  /** Per bucket of this subtask, whether {@link #readFences} left it unread (and nothing has read or set it aside since). */
  private final boolean[] unread = new boolean[FenceBuckets.COUNT];
  /** Per bucket, whether {@link #readFences} (or {@link #readLeftFences}) found a segment stored for it. */
  private final boolean[] restoredSegment = new boolean[FenceBuckets.COUNT];
  private long segmentsRewritten;
  private final MapState<String, Long> members;
  private final MapState<String, Long> memberSeqs;
  private final ListState<Queued> queued;
  private final ListState<FenceChange> legacyPendingEdits;
  private final MapState<Long, Long> pendingExits;
  private final ValueState<BucketFingerprint> fingerprint;
  private final ValueState<StreamPosition> position;
  private final ValueState<FenceChange> legacyBucketStats;
  private final ValueState<FenceChange> legacyStreamPosition;
  private final MapState<Long, StoredFence> history;
  private int movedFromPerFenceLayout;
  /** Fences stored or removed (null) since the last {@link #flush}, by id, in the order first stored. */
  private final Map<String, StoredFence> unwrittenFences = new LinkedHashMap<>();
  /** Fingerprints stored since, by bucket. */
  private final Map<Integer, BucketFingerprint> unwrittenFingerprints = new HashMap<>();

  /**
   * The most fences held back at once: beyond it they are written, so that a long time without a
   * checkpoint (or with none configured) holds no more than a few megabytes of references. A
   * catch-up applies fewer fences than this per subtask between two checkpoints at the default
   * interval; a fresh start's read, in key order, is written in runs of this size in that order.
   */
  static final int MAX_UNWRITTEN = 65_536;

  /**
   * The most fences {@link #rewriteSegments} writes as segments in one checkpoint: after a
   * rebuild over restored fences, every bucket's overlay can hold all its fences, and writing them
   * all at once would put the whole index (gigabytes at a million fences) into one checkpoint.
   */
  static final int MAX_REWRITTEN = 65_536;

  /**
   * How the state is written: this release's layout, except in tests of restoring what another
   * release wrote.
   *
   * @param fenceFormat the format version fences are written in
   * @param previousLayout whether to write as releases before the per-bucket maps, the state's own record types and the
   *     packed objects' times did
   * @param segments whether to write buckets' segments, which releases before them did not
   */
  public record Writing(byte fenceFormat, boolean previousLayout, boolean segments) implements java.io.Serializable {
    public static final Writing CURRENT = new Writing(StoredFenceSerializer.FORMAT_VERSION, false, true);

    /** As a release before segments wrote. */
    public Writing(byte fenceFormat, boolean previousLayout) {
      this(fenceFormat, previousLayout, false);
    }
  }

  public FenceIndexState(KeyedStateStore store, KeyedStateBackend<FenceKey> backend, Writing writing) {
    this.backend = backend;
    this.fenceSerializer = writing.fenceFormat() == StoredFenceSerializer.FORMAT_VERSION ? StoredFenceSerializer.INSTANCE
        : new StoredFenceSerializer(writing.fenceFormat());
    this.previousLayout = writing.previousLayout();
    this.segments = writing.segments() && !previousLayout;
    fence = store.getState(new ValueStateDescriptor<>(FENCE_STATE, fenceSerializer));
    fences = store.getMapState(new MapStateDescriptor<>(FENCES_STATE, StringSerializer.INSTANCE, fenceSerializer));
    segment = store.getState(segmentStateDescriptor());
    overlayPutsState = store.getState(overlayPutsStateDescriptor());
    members = store.getMapState(membersStateDescriptor());
    memberSeqs = store.getMapState(memberSeqsStateDescriptor());
    queued = store.getListState(queuedStateDescriptor());
    legacyPendingEdits = store.getListState(legacyPendingEditsStateDescriptor());
    pendingExits = store.getMapState(pendingExitsStateDescriptor());
    fingerprint = store.getState(fingerprintStateDescriptor());
    position = store.getState(positionStateDescriptor());
    legacyBucketStats = store.getState(legacyBucketStatsStateDescriptor());
    legacyStreamPosition = store.getState(legacyStreamPositionStateDescriptor());
    history = store.getMapState(historyStateDescriptor());
  }

  // ---- restore -------------------------------------------------------------------------------------

  /**
   * Reads the stored version of every fence in the buckets of these key groups that {@code read}
   * accepts (each bucket's segment, then its overlay), then moves fences of the per-fence layout
   * into their buckets' maps (once; the next checkpoint carries the move) and reads them too. The
   * buckets left unread stay as stored until {@link #readLeftFences} reads them or {@link
   * #clearFences} sets them aside.
   */
  public void readFences(int maxParallelism, KeyGroupRange keyGroups, IntPredicate read, Restored restored) throws Exception {
    for (int bucket = 0; bucket < FenceBuckets.COUNT; bucket++) {
      ownBuckets[bucket] = FenceBuckets.inKeyGroups(bucket, maxParallelism, keyGroups.getStartKeyGroup(), keyGroups.getEndKeyGroup());
      unread[bucket] = ownBuckets[bucket] && !read.test(bucket);
      if (unread[bucket]) {
        // What the bucket stores is not known: while it is unread, fences go into its overlay, and
        // setting it aside clears the overlay unless it is known to be empty.
        backend.setCurrentKey(FenceKey.ofBucket(bucket));
        Integer puts = overlayPutsState.value();
        overlayPuts[bucket] = puts == null ? 1 : puts;
      }
    }
    readBuckets(b -> ownBuckets[b] && !unread[b], restored);
    Map<String, StoredFence> legacy = new HashMap<>();
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, new ValueStateDescriptor<>(FENCE_STATE, fenceSerializer),
        (FenceKey key, ValueState<StoredFence> state) -> legacy.put(key.id, state.value()));
    movedFromPerFenceLayout = legacy.size();
    for (Map.Entry<String, StoredFence> stored : legacy.entrySet()) {
      backend.setCurrentKey(new FenceKey(stored.getKey()));
      fence.clear();
      if (!stored.getValue().unreadable()) {
        fence(stored.getKey(), stored.getValue());
      }
      restored.fence(FenceBuckets.of(stored.getKey()), stored.getKey(), stored.getValue());
    }
  }

  /** Reads the fences of the buckets {@link #readFences} left unread; returns how many buckets. */
  public int readLeftFences(Restored restored) throws Exception {
    int left = 0;
    for (boolean u : unread) {
      left += u ? 1 : 0;
    }
    FenceKey key = backend.getCurrentKey();
    readBuckets(b -> unread[b], restored);
    Arrays.fill(unread, false);
    if (key != null) {
      backend.setCurrentKey(key);
    }
    return left;
  }

  private void readBuckets(IntPredicate which, Restored restored) throws Exception {
    // One arena for all the subtask's segments: their coordinates in a few big chunks.
    CoordinateArena arena = new CoordinateArena();
    // Bucket by bucket, as their keys are known: Flink's applyToAllKeys would first find the keys
    // by a pass over every fence on RocksDB, a fifth of the reading's CPU in a profile.
    for (int bucket = 0; bucket < FenceBuckets.COUNT; bucket++) {
      if (!which.test(bucket)) {
        continue;
      }
      backend.setCurrentKey(FenceKey.ofBucket(bucket));
      byte[] bytes = segment.value();
      restoredSegment[bucket] = bytes != null;
      if (bytes != null) {
        FenceSegment read = null;
        try {
          read = FenceSegment.read(bytes, arena);
        } catch (IllegalArgumentException unreadable) {
          segment.clear();
          restored.unreadableSegment(bucket, unreadable.getMessage());
        }
        if (read != null) {
          segmentSizes[bucket] = read.size();
          restored.segment(bucket, read);
        }
      }
      Integer puts = overlayPutsState.value();
      if (puts != null && puts == 0) {
        continue;
      }
      int entries = 0;
      for (Map.Entry<String, StoredFence> stored : fences.entries()) {
        entries++;
        restored.fence(bucket, stored.getKey(), stored.getValue());
      }
      overlayPuts[bucket] = puts == null ? entries : puts;
    }
  }

  /** Each bucket's stored fingerprint, to {@code out}. */
  public void readFingerprints(Consumer<BucketFingerprint> out) throws Exception {
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, fingerprintStateDescriptor(),
        (FenceKey key, ValueState<BucketFingerprint> state) -> out.accept(state.value()));
  }

  /** The fences that have members: whose stored version a catch-up's load needs even if it reads no other. */
  public Set<String> fencesWithMembers() throws Exception {
    Set<String> ids = new HashSet<>();
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, membersStateDescriptor(),
        (FenceKey key, MapState<String, Long> state) -> {
          if (!state.isEmpty()) {
            ids.add(key.id);
          }
        });
    return ids;
  }

  /**
   * Moves what releases before the state's own record types kept as the stream's records into
   * those types (once; the next checkpoint carries the move), then reads everything else this
   * state holds.
   *
   * @param earlierQueued how a change of the stream that an earlier release kept queued is queued now
   */
  public void readTheRest(Restored restored, Function<FenceChange, Queued> earlierQueued) throws Exception {
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
        fingerprint.update(fingerprintOf(change));
      } else {
        legacyStreamPosition.clear();
        position.update(positionOf(change));
      }
    }
    readFingerprints(restored::fingerprint);
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, positionStateDescriptor(),
        (FenceKey key, ValueState<StreamPosition> state) -> restored.position(state.value()));
    // The history before the members: whether a restored stay may still DWELL can depend on a
    // version the history holds (a fence's delay since changed).
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, historyStateDescriptor(),
        (FenceKey key, MapState<Long, StoredFence> state) -> {
          List<Long> ends = new ArrayList<>();
          state.keys().forEach(ends::add);
          Collections.sort(ends);
          for (Long until : ends) {
            restored.version(key.id, until, state.get(until));
          }
        });
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, membersStateDescriptor(),
        (FenceKey key, MapState<String, Long> state) -> {
          for (Map.Entry<String, Long> member : state.entries()) {
            restored.member(key.id, member.getKey(), member.getValue());
          }
        });
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, queuedStateDescriptor(),
        (FenceKey key, ListState<Queued> state) -> restored.queued(key.id, listOf(state.get()), false));
    Map<FenceKey, List<Queued>> earlier = new HashMap<>();
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, legacyPendingEditsStateDescriptor(),
        (FenceKey key, ListState<FenceChange> state) -> {
          List<Queued> changes = new ArrayList<>();
          state.get().forEach(change -> changes.add(earlierQueued.apply(change)));
          earlier.put(key, changes);
        });
    for (Map.Entry<FenceKey, List<Queued>> moved : earlier.entrySet()) {
      backend.setCurrentKey(moved.getKey());
      legacyPendingEdits.clear();
      restored.queued(moved.getKey().id, moved.getValue(), true);
    }
    backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, pendingExitsStateDescriptor(),
        (FenceKey key, MapState<Long, Long> state) -> {
          Map<Long, Long> exits = new HashMap<>();
          for (Map.Entry<Long, Long> exit : state.entries()) {
            exits.put(exit.getKey(), exit.getValue());
          }
          restored.waitingExits(key.id, exits);
        });
  }

  private static <T> List<T> listOf(Iterable<T> values) {
    List<T> list = new ArrayList<>();
    values.forEach(list::add);
    return list;
  }

  /** How many fences the last {@link #readFences} moved from the per-fence layout into the bucket maps. */
  public int movedFromPerFenceLayout() {
    return movedFromPerFenceLayout;
  }

  // ---- the ledger's store --------------------------------------------------------------------------

  @Override
  public void fence(String fenceId, StoredFence stored) throws Exception {
    if (previousLayout) {
      withKey(new FenceKey(fenceId), () -> {
        fence.update(stored);
        return null;
      });
      return;
    }
    holdBack(fenceId, stored);
  }

  /**
   * Looks in what is held back, then the bucket's overlay, then its segment: read whole, which the
   * ledger asks only of a fence the index does not hold (a tombstone, or a refused geometry).
   */
  @Override
  public String storedTenant(String fenceId) throws Exception {
    if (unwrittenFences.containsKey(fenceId)) {
      StoredFence held = unwrittenFences.get(fenceId);
      return held == null ? null : held.tenant();
    }
    return withKey(bucketKey(fenceId), () -> {
      StoredFence stored = fences.get(fenceId);
      if (stored != null) {
        return stored.tenant();
      }
      byte[] bytes = segment.value();
      FenceSegment read = bytes == null ? null : FenceSegment.read(bytes);
      int i = read == null ? -1 : read.positionOf(fenceId);
      return i < 0 ? null : read.tenant(i);
    });
  }

  @Override
  public void removeFence(String fenceId) throws Exception {
    holdBack(fenceId, null);
  }

  /** Clears the segment and overlay of every bucket {@link #readFences} found this subtask's, and what was held back. */
  @Override
  public void clearFences() throws Exception {
    unwrittenFences.clear();
    FenceKey key = backend.getCurrentKey();
    if (previousLayout) {
      List<FenceKey> stored = new ArrayList<>();
      backend.applyToAllKeys(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, new ValueStateDescriptor<>(FENCE_STATE,
          fenceSerializer), (FenceKey k, ValueState<StoredFence> state) -> stored.add(k));
      for (FenceKey k : stored) {
        backend.setCurrentKey(k);
        fence.clear();
      }
    }
    for (int bucket = 0; bucket < FenceBuckets.COUNT; bucket++) {
      if (ownBuckets[bucket]) {
        backend.setCurrentKey(FenceKey.ofBucket(bucket));
        segment.clear();
        // An overlay without puts since its segment was written is empty: not cleared, since on
        // RocksDB a clear seeks an iterator past the deletes earlier rewrites left, which took
        // most of a load's time at 300,000 fences (docs/performance/journal.md).
        if (overlayPuts[bucket] > 0) {
          fences.clear();
        }
        overlayPutsState.clear();
        segmentSizes[bucket] = 0;
        overlayPuts[bucket] = 0;
        // Set aside unread (a load decided before the restore read it), it now stores nothing and
        // takes its segment at once, as a fresh start's bucket does (intoEmptyBuckets).
        unread[bucket] = false;
      }
    }
    if (key != null) {
      backend.setCurrentKey(key);
    }
  }

  private void holdBack(String fenceId, StoredFence stored) throws Exception {
    unwrittenFences.put(fenceId, stored);
    if (unwrittenFences.size() > MAX_UNWRITTEN) {
      flush();
    }
  }

  @Override
  public void fingerprint(BucketFingerprint stats) throws Exception {
    if (previousLayout) {
      withKey(FenceKey.ofBucket(stats.bucket()), () -> {
        legacyBucketStats.update(changeOf(stats));
        return null;
      });
    } else {
      unwrittenFingerprints.put(stats.bucket(), stats);
    }
  }

  /**
   * Writes the fences and fingerprints held back into keyed state: called before the keyed state
   * backend takes its snapshot.
   */
  @Override
  public void flush() throws Exception {
    if (unwrittenFences.isEmpty() && unwrittenFingerprints.isEmpty()) {
      return;
    }
    FenceKey key = backend.getCurrentKey();
    Set<Integer> grown = new HashSet<>();
    Map<Integer, Map<String, StoredFence>> whole = segments ? intoEmptyBuckets() : Map.of();
    for (Map.Entry<Integer, Map<String, StoredFence>> bucket : whole.entrySet()) {
      backend.setCurrentKey(FenceKey.ofBucket(bucket.getKey()));
      segment.update(StoredFence.segmentWithUnbuiltGrids(bucket.getValue()));
      overlayPutsState.update(0);
      segmentSizes[bucket.getKey()] = bucket.getValue().size();
    }
    for (Map.Entry<String, StoredFence> held : unwrittenFences.entrySet()) {
      FenceKey bucket = bucketKey(held.getKey());
      if (whole.containsKey(bucket.bucket())) {
        continue;
      }
      backend.setCurrentKey(bucket);
      if (held.getValue() == null) {
        fences.remove(held.getKey());
      } else {
        fences.put(held.getKey(), held.getValue());
        overlayPuts[bucket.bucket()]++;
        grown.add(bucket.bucket());
      }
    }
    if (segments) {
      for (int bucket : grown) {
        backend.setCurrentKey(FenceKey.ofBucket(bucket));
        overlayPutsState.update(overlayPuts[bucket]);
      }
    }
    for (Map.Entry<Integer, BucketFingerprint> held : unwrittenFingerprints.entrySet()) {
      backend.setCurrentKey(FenceKey.ofBucket(held.getKey()));
      fingerprint.update(held.getValue());
    }
    unwrittenFences.clear();
    unwrittenFingerprints.clear();
    if (key != null) {
      backend.setCurrentKey(key);
    }
  }

  /**
   * Of the fences held back, those of buckets that store none (no segment, nothing put into the
   * overlay since: a load's, bucket after bucket), by bucket: each is written as the bucket's
   * segment at once, its grids left for the index to build on each fence's first query, rather
   * than into its overlay, which would take a put per fence and, once the index is ready, a rewrite
   * that reads them back and deletes them (a fresh start's savepoint still carried those deletes:
   * 3.8 GB where the segments are 2.06, docs/performance/journal.md). Building the grids here
   * would slow a cold start by a third. A bucket with a removal held is left to the overlay, and
   * so is one whose segment the restore read, even once set aside for a catch-up's load: a new
   * segment under the same key had RocksDB's compactions rewrite the restored ones, and a day-old
   * savepoint's load took 2.5 s longer (docs/performance/journal.md, 2026-12-06). One the restore
   * left unread takes its overlay until it is set aside (what it stores is not known), and its
   * segment at once after: side by side, a day-old savepoint's load decided before the restore
   * read the fences took 3.3 to 3.6 s less per subtask than with a put per fence (journal,
   * "2026-12-07: a load decided before the restore writes its buckets as segments").
   */
  private Map<Integer, Map<String, StoredFence>> intoEmptyBuckets() {
    // In the order held, which a load's is RocksDB's key order: a memtable filled in that order
    // flushes files that do not overlap, which RocksDB does not compact again (in a hash's order
    // a cold start's compactions took 4 CPU-seconds more).
    Map<Integer, Map<String, StoredFence>> whole = new LinkedHashMap<>();
    Set<Integer> notWhole = new HashSet<>();
    for (Map.Entry<String, StoredFence> held : unwrittenFences.entrySet()) {
      int bucket = FenceBuckets.of(held.getKey());
      if (notWhole.contains(bucket)) {
        continue;
      }
      if (held.getValue() == null || segmentSizes[bucket] > 0 || overlayPuts[bucket] > 0 || restoredSegment[bucket]
          || unread[bucket]) {
        notWhole.add(bucket);
        whole.remove(bucket);
        continue;
      }
      whole.computeIfAbsent(bucket, b -> new LinkedHashMap<>()).put(held.getKey(), held.getValue());
    }
    // A size of 0 with no overlay put stores nothing, even under a segment of no fence written
    // since the restore: the held fences as the segment are then exactly what the bucket stores.
    return whole;
  }

  /**
   * Folds the overlays of the buckets whose overlay holds more than a quarter of their segment's
   * fences (or any, for a bucket with fewer than four) into new segments, the largest overlays
   * first: called after {@link #flush}, once the index is ready (before that, a load's overlays
   * grow bucket by bucket and would be rewritten many times). A bucket whose overlay holds a fence
   * of a format this release cannot read keeps it, for the rebuild under way to replace.
   *
   * @param withinBudget stop once {@link #MAX_REWRITTEN} fences are written (a checkpoint's), or
   *     rewrite every bucket due (a savepoint's)
   * @return how many buckets' segments were written
   */
  public int rewriteSegments(boolean withinBudget) throws Exception {
    if (!segments) {
      return 0;
    }
    List<Integer> due = new ArrayList<>();
    for (int bucket = 0; bucket < FenceBuckets.COUNT; bucket++) {
      if (overlayPuts[bucket] > 0 && overlayPuts[bucket] > segmentSizes[bucket] / 4) {
        due.add(bucket);
      }
    }
    due.sort(Comparator.comparingInt((Integer bucket) -> overlayPuts[bucket]).reversed());
    FenceKey key = backend.getCurrentKey();
    int written = 0;
    int rewritten = 0;
    for (int bucket : due) {
      if (withinBudget && written >= MAX_REWRITTEN) {
        break;
      }
      backend.setCurrentKey(FenceKey.ofBucket(bucket));
      Map<String, StoredFence> all = new HashMap<>();
      byte[] bytes = segment.value();
      if (bytes != null) {
        FenceSegment current = FenceSegment.read(bytes);
        for (int i = 0; i < current.size(); i++) {
          all.put(current.id(i), StoredFence.of(current, i));
        }
      }
      boolean readable = true;
      for (Map.Entry<String, StoredFence> stored : fences.entries()) {
        readable &= !stored.getValue().unreadable();
        all.put(stored.getKey(), stored.getValue());
      }
      if (readable) {
        segment.update(StoredFence.segment(all));
        fences.clear();
        overlayPutsState.update(0);
        segmentSizes[bucket] = all.size();
        overlayPuts[bucket] = 0;
        written += all.size();
        rewritten++;
      }
    }
    if (key != null) {
      backend.setCurrentKey(key);
    }
    segmentsRewritten += rewritten;
    return rewritten;
  }

  /** How many buckets' segments {@link #rewriteSegments} has written since this subtask started. */
  public long segmentsRewrittenCount() {
    return segmentsRewritten;
  }

  @Override
  public void queued(String key, List<Queued> changes) throws Exception {
    withKey(new FenceKey(key), () -> {
      queued.update(changes);
      return null;
    });
  }

  @Override
  public void waitingExits(String fenceId, Map<Long, Long> exits) throws Exception {
    withKey(new FenceKey(fenceId), () -> {
      pendingExits.clear();
      pendingExits.putAll(exits);
      return null;
    });
  }

  @Override
  public void keepVersion(String fenceId, long until, StoredFence version) throws Exception {
    withKey(new FenceKey(fenceId), () -> {
      history.put(until, version);
      return null;
    });
  }

  @Override
  public void forgetVersionsUpTo(String fenceId, long horizon) throws Exception {
    withKey(new FenceKey(fenceId), () -> {
      List<Long> ended = new ArrayList<>();
      for (Long until : history.keys()) {
        if (until <= horizon) {
          ended.add(until);
        }
      }
      for (Long until : ended) {
        history.remove(until);
      }
      return null;
    });
  }

  // ---- a key group's position ----------------------------------------------------------------------

  /** How far the stream had been read when key group {@code keyGroup}'s heartbeat copy arrived. */
  public void position(int keyGroup, StreamPosition at) throws Exception {
    withKey(FenceKey.ofBucket(keyGroup), () -> {
      if (previousLayout) {
        FenceChange heartbeat = new FenceChange();
        heartbeat.kind = FenceChange.Kind.HEARTBEAT;
        heartbeat.bucket = keyGroup;
        heartbeat.lsn = at.lsn();
        heartbeat.commitTime = at.commitTime();
        heartbeat.seq = at.horizon();
        legacyStreamPosition.update(heartbeat);
      } else {
        position.update(at);
      }
      return null;
    });
  }

  // ---- who is inside a fence -----------------------------------------------------------------------

  @Override
  public void entered(String fenceId, String objectId, long since, long fenceSeq) throws Exception {
    backend.setCurrentKey(new FenceKey(fenceId));
    members.put(objectId, since);
    if (!previousLayout) {
      memberSeqs.put(objectId, fenceSeq);
    }
  }

  @Override
  public void left(String fenceId, String objectId) throws Exception {
    backend.setCurrentKey(new FenceKey(fenceId));
    members.remove(objectId);
    memberSeqs.remove(objectId);
  }

  /**
   * The objects inside the fence that entered a version before {@code deleteSeq} (or one not known),
   * which then leave it: a delete's EXITs. Those that entered a later version, the fence re-created,
   * stay: a rebuild that held no version of the fence reads its tombstone after they entered.
   */
  public List<String> takeMembersBefore(String fenceId, long deleteSeq) throws Exception {
    return withKey(new FenceKey(fenceId), () -> {
      List<String> leaving = new ArrayList<>();
      boolean anyStays = false;
      for (String objectId : members.keys()) {
        Long entered = memberSeqs.get(objectId);
        if (entered != null && entered > deleteSeq) {
          anyStays = true;
        } else {
          leaving.add(objectId);
        }
      }
      if (!anyStays) {
        members.clear();
        memberSeqs.clear();
      } else {
        for (String objectId : leaving) {
          members.remove(objectId);
          memberSeqs.remove(objectId);
        }
      }
      return leaving;
    });
  }

  // ---- the stream's records, as earlier releases kept them -----------------------------------------

  /** The fingerprint a {@code BUCKET_STATS} change of the stream carries (its version in {@code seq}). */
  public static BucketFingerprint fingerprintOf(FenceChange stats) {
    return new BucketFingerprint(stats.bucket, stats.fenceCount, stats.checksum, stats.seq, stats.lsn, stats.commitTime);
  }

  /** The position a heartbeat of the stream carries. */
  public static StreamPosition positionOf(FenceChange heartbeat) {
    return new StreamPosition(heartbeat.lsn, heartbeat.commitTime, heartbeat.seq);
  }

  private static FenceChange changeOf(BucketFingerprint stats) {
    FenceChange change = new FenceChange();
    change.kind = FenceChange.Kind.BUCKET_STATS;
    change.bucket = stats.bucket();
    change.fenceCount = stats.fenceCount();
    change.checksum = stats.checksum();
    change.seq = stats.version();
    change.lsn = stats.lsn();
    change.commitTime = stats.commitTime();
    return change;
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
