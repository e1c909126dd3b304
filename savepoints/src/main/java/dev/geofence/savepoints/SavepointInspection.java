package dev.geofence.savepoints;

import dev.geofence.job.operator.Uids;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.geofence.job.operator.SavepointFiles;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.job.operator.StoredFenceSerializer;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.segment.FenceSegment;
import java.io.PrintStream;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.contrib.streaming.state.EmbeddedRocksDBStateBackend;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;

/**
 * What a savepoint of the job holds of its fence index (issue 5, {@code inspect}): the live fences
 * and tombstones, their count and checksum as {@code fence_stats} computes them, the stream
 * position it was taken at and that position's commit time, the fences per key group and per
 * subtask at a given parallelism, the vertex total, the membership rows, how the fences are held
 * (buckets' segments, and the overlays of edits since), and how many stored fences or segments are
 * of a format this release cannot read. Read with Flink's State Processor API and the job's
 * own state descriptors.
 */
public final class SavepointInspection {

  public final String path;
  public final int maxParallelism;
  public final int parallelism;
  public long fences;
  public long tombstones;
  public long unreadable;
  /** Buckets held as a segment, and of those, how many cannot be read (their fences are not counted). */
  public long segments;
  public long unreadableSegments;
  /** Fences whose version in force is in an overlay (edited since their bucket's segment was written, or no segment). */
  public long overlayFences;
  public long vertices;
  public long memberships;
  public long checksum;
  public long restoredLsn;
  public long restoredCommitTime;
  /**
   * The least transaction horizon of the key groups' stream positions, or 0 when a key group has
   * none (a position of a release before it, or none at all): what narrows the key pass of a
   * restore's catch-up (docs/design.md#catch-up).
   */
  public long restoredHorizon;
  private long positions;
  private long leastHorizon = Long.MAX_VALUE;
  public final long[] fencesPerKeyGroup;
  public final long[] fencesPerSubtask;
  /** The live fences' and the tombstones' seqs, and each bucket fingerprint's version (-1: none). */
  public final Map<String, Long> liveSeqs = new HashMap<>();
  public final Map<String, Long> tombstoneSeqs = new HashMap<>();
  public final long[] bucketVersions = new long[FenceBuckets.COUNT];

  private SavepointInspection(String path, int maxParallelism, int parallelism) {
    this.path = path;
    this.maxParallelism = maxParallelism;
    this.parallelism = parallelism;
    this.fencesPerKeyGroup = new long[maxParallelism];
    this.fencesPerSubtask = new long[parallelism];
    Arrays.fill(bucketVersions, -1);
  }

  /**
   * Reads the savepoint at {@code path}; counts per subtask are for {@code parallelism} (0: the
   * parallelism the savepoint was taken at).
   */
  public static SavepointInspection read(String path, int parallelism) throws Exception {
    return read(path, parallelism, null, null);
  }

  /** As {@link #read(String, int)}, with progress lines on {@code progress} (if not null). */
  public static SavepointInspection read(String path, int parallelism, PrintStream progress) throws Exception {
    return read(path, parallelism, null, progress);
  }

  /** Reads as {@link #read(String, int)}, handing every entry, with its geometry, to {@code sink} too (if not null). */
  static SavepointInspection read(String path, int parallelism, java.util.function.Consumer<FenceStateEntry> sink,
      PrintStream progress) throws Exception {
    boolean withGeometry = sink != null;
    OperatorID fenceIndex = OperatorIdentifier.forUid(Uids.FENCE_INDEX).getOperatorId();
    OperatorState operator = SavepointFiles.check(path).getOperatorStates().stream()
        .filter(o -> o.getOperatorID().equals(fenceIndex)).findFirst()
        .orElseThrow(() -> new IllegalArgumentException("the savepoint at " + path + " holds no fence index (uid "
            + Uids.FENCE_INDEX + "): is it a savepoint of this job?"));
    SavepointInspection inspection = new SavepointInspection(
        path, operator.getMaxParallelism(), parallelism > 0 ? parallelism : operator.getParallelism());
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setRuntimeMode(RuntimeExecutionMode.BATCH);
    // A native savepoint of RocksDB holds RocksDB's own files, which only that backend reads; a
    // canonical savepoint (or a heap backend's native one) is Flink's own format, which any reads.
    boolean rocksDbFiles = operator.getSubtaskStates().values().stream().flatMap(s -> s.getManagedKeyedState().stream())
        .anyMatch(IncrementalKeyedStateHandle.class::isInstance);
    SavepointReader reader =
        SavepointReader.read(env, path, rocksDbFiles ? new EmbeddedRocksDBStateBackend() : new HashMapStateBackend());
    FenceChecksum checksum = new FenceChecksum();
    Progress read = progress == null ? null : new Progress(progress, "read " + path + ", state entries", -1);
    try (CloseableIterator<FenceStateEntry> entries = reader.readKeyedState(
            OperatorIdentifier.forUid(Uids.FENCE_INDEX), new FenceStateReader(inspection.maxParallelism, withGeometry),
            TypeInformation.of(FenceKey.class), TypeInformation.of(FenceStateEntry.class))
        .executeAndCollect("inspect " + path)) {
      while (entries.hasNext()) {
        FenceStateEntry entry = entries.next();
        inspection.add(entry, checksum);
        if (withGeometry) {
          sink.accept(entry);
        }
        if (read != null) {
          read.tick();
        }
      }
    }
    if (read != null) {
      read.finish();
    }
    inspection.checksum = checksum.checksum();
    inspection.restoredHorizon = inspection.positions == inspection.maxParallelism ? inspection.leastHorizon : 0;
    return inspection;
  }

  private void add(FenceStateEntry entry, FenceChecksum checksum) {
    if (Long.compareUnsigned(entry.lsn, restoredLsn) > 0) {
      restoredLsn = entry.lsn;
    }
    restoredCommitTime = Math.max(restoredCommitTime, entry.commitTime);
    if (entry.kind == FenceStateEntry.Kind.BUCKET_STATS) {
      bucketVersions[Integer.parseInt(entry.id)] = entry.seq;
    }
    if (entry.kind == FenceStateEntry.Kind.STREAM_POSITION) {
      positions++;
      leastHorizon = Math.min(leastHorizon, entry.horizon);
    }
    if (entry.kind == FenceStateEntry.Kind.MEMBERS) {
      memberships += entry.members;
    }
    if (entry.kind == FenceStateEntry.Kind.SEGMENT) {
      segments++;
      unreadableSegments += entry.unreadable ? 1 : 0;
    }
    if (entry.kind != FenceStateEntry.Kind.FENCE) {
      return;
    }
    overlayFences += entry.inSegment ? 0 : 1;
    if (entry.unreadable) {
      unreadable++;
    } else if (entry.live) {
      fences++;
      vertices += entry.vertices;
      checksum.add(entry.id, entry.seq);
      liveSeqs.put(entry.id, entry.seq);
      fencesPerKeyGroup[entry.keyGroup]++;
      fencesPerSubtask[KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(maxParallelism, parallelism, entry.keyGroup)]++;
    } else {
      tombstones++;
      tombstoneSeqs.put(entry.id, entry.seq);
    }
  }

  /** A table for people. */
  public String table(long now) {
    StringBuilder out = new StringBuilder();
    out.append(String.format(Locale.ROOT, "savepoint          %s%n", path));
    out.append(String.format(Locale.ROOT, "fences             %,d live, %,d tombstones%n", fences, tombstones));
    out.append(String.format(Locale.ROOT, "checksum           %d (fence_stats form)%n", checksum));
    out.append(String.format(Locale.ROOT, "vertices           %,d%n", vertices));
    out.append(String.format(Locale.ROOT, "memberships        %,d (object inside fence)%n", memberships));
    out.append(String.format(Locale.ROOT, "stream position    %s, committed %s (%s ago), transaction horizon %s%n",
        Lsn.format(restoredLsn), java.time.Instant.ofEpochMilli(restoredCommitTime),
        java.time.Duration.ofMillis(Math.max(0, now - restoredCommitTime)), restoredHorizon > 0 ? Long.toString(restoredHorizon) : "none"));
    out.append(String.format(Locale.ROOT, "held as            %,d bucket segments, %,d fences in overlays%n", segments, overlayFences));
    out.append(String.format(Locale.ROOT, "state format       fences %d, segments %d%s%s%n", StoredFenceSerializer.FORMAT_VERSION,
        FenceSegment.FORMAT_UNBUILT_GRIDS,
        unreadable == 0 ? "" : String.format(Locale.ROOT, ", but %,d fences of a format this release cannot read", unreadable),
        unreadableSegments == 0 ? ""
            : String.format(Locale.ROOT, ", but %,d bucket segments this release cannot read (damaged, or of another format)",
                unreadableSegments)));
    out.append(String.format(Locale.ROOT, "key groups         %d (max parallelism)%n", maxParallelism));
    out.append(String.format(Locale.ROOT, "per subtask at parallelism %d:%n", parallelism));
    for (int i = 0; i < parallelism; i++) {
      out.append(String.format(Locale.ROOT, "  subtask %-4d %,12d fences%n", i, fencesPerSubtask[i]));
    }
    return out.toString();
  }

  /** The same as JSON, for scripts. */
  public String json(long now) {
    ObjectMapper mapper = new ObjectMapper();
    ObjectNode root = mapper.createObjectNode();
    root.put("savepoint", path);
    root.put("fences", fences);
    root.put("tombstones", tombstones);
    root.put("checksum", checksum);
    root.put("vertices", vertices);
    root.put("memberships", memberships);
    root.put("stream_lsn", Lsn.format(restoredLsn));
    root.put("stream_commit_time", restoredCommitTime);
    root.put("stream_horizon", restoredHorizon);
    root.put("age_ms", Math.max(0, now - restoredCommitTime));
    root.put("state_format", StoredFenceSerializer.FORMAT_VERSION);
    root.put("unreadable_fences", unreadable);
    root.put("segment_format", FenceSegment.FORMAT_UNBUILT_GRIDS);
    root.put("segments", segments);
    root.put("unreadable_segments", unreadableSegments);
    root.put("overlay_fences", overlayFences);
    root.put("max_parallelism", maxParallelism);
    root.put("parallelism", parallelism);
    ArrayNode subtasks = root.putArray("fences_per_subtask");
    for (long n : fencesPerSubtask) {
      subtasks.add(n);
    }
    ArrayNode keyGroups = root.putArray("fences_per_key_group");
    for (long n : fencesPerKeyGroup) {
      keyGroups.add(n);
    }
    return root.toString();
  }
}
