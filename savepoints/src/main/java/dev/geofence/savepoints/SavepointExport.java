package dev.geofence.savepoints;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.snapshot.ArrowSnapshotFile;
import dev.geofence.state.snapshot.FenceSnapshot;
import dev.geofence.state.snapshot.SnapshotBucket;
import dev.geofence.state.snapshot.SnapshotFence;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code export}: a savepoint's fences (live and tombstones, with their tenant, dwell delay,
 * geometry and the objects inside them), bucket fingerprints and stream position, written as an
 * {@link ArrowSnapshotFile}. A savepoint holding fences of a state format this release cannot read
 * is refused.
 */
final class SavepointExport {

  private SavepointExport() {}

  /** Writes the savepoint's fences to {@code file}; returns how many. */
  static long export(String savepoint, Path file, PrintStream progress) throws Exception {
    List<FenceStateEntry> read = new ArrayList<>();
    // A fence and the objects inside it are held under different keys (its bucket's, its own).
    Map<String, FenceStateEntry> members = new HashMap<>();
    List<SnapshotBucket> buckets = new ArrayList<>();
    SavepointInspection inspection = SavepointInspection.read(savepoint, 0, entry -> {
      if (entry.kind == FenceStateEntry.Kind.FENCE && !entry.unreadable) {
        read.add(entry);
      } else if (entry.kind == FenceStateEntry.Kind.MEMBERS) {
        members.put(entry.id, entry);
      } else if (entry.kind == FenceStateEntry.Kind.BUCKET_STATS) {
        buckets.add(new SnapshotBucket(Integer.parseInt(entry.id), entry.fenceCount, entry.checksum, entry.seq));
      }
    }, progress);
    if (inspection.unreadableSegments > 0) {
      throw new IllegalArgumentException(inspection.unreadableSegments + " bucket segments of the savepoint cannot be read (damaged, or of "
          + "another format): their fences are unknown");
    }
    if (inspection.unreadable > 0) {
      throw new IllegalArgumentException(inspection.unreadable + " fences of the savepoint are of a state format this release cannot read");
    }
    List<SnapshotFence> fences = new ArrayList<>(read.size());
    for (FenceStateEntry entry : read) {
      FenceGeometry geometry = entry.coordinates == null ? null
          : FenceGeometry.fromArrays(entry.coordinates, entry.ringStarts, entry.polygonStarts);
      FenceStateEntry inside = members.get(entry.id);
      fences.add(new SnapshotFence(entry.id, entry.seq, !entry.live, entry.tenant, entry.dwellDelay, geometry,
          inside == null ? new String[0] : inside.memberIds, inside == null ? new long[0] : inside.memberSince));
    }
    Progress written = new Progress(progress, "write " + file + ", fences", fences.size());
    ArrowSnapshotFile.write(file, new FenceSnapshot(inspection.restoredLsn, inspection.restoredCommitTime, inspection.restoredHorizon,
        inspection.maxParallelism, buckets, fences), written::tick);
    written.finish();
    return fences.size();
  }
}
