package dev.geofence.savepoints;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.snapshot.ArrowSnapshotFile;
import dev.geofence.state.snapshot.FenceSnapshot;
import dev.geofence.state.snapshot.SnapshotBucket;
import dev.geofence.state.snapshot.SnapshotFence;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code export}: a savepoint's fences (live and tombstones, with their geometry and the objects
 * inside them), bucket fingerprints and stream position, written as an {@link ArrowSnapshotFile}.
 * A savepoint holding fences of a state format this release cannot read is refused.
 */
final class SavepointExport {

  private SavepointExport() {}

  /** Writes the savepoint's fences to {@code file}; returns how many. */
  static long export(String savepoint, Path file, PrintStream progress) throws Exception {
    List<SnapshotFence> fences = new ArrayList<>();
    List<SnapshotBucket> buckets = new ArrayList<>();
    SavepointInspection inspection = SavepointInspection.read(savepoint, 0, entry -> {
      if (entry.kind == FenceStateEntry.Kind.FENCE && !entry.unreadable) {
        FenceGeometry geometry = entry.coordinates == null ? null
            : FenceGeometry.fromArrays(entry.coordinates, entry.ringStarts, entry.polygonStarts);
        fences.add(new SnapshotFence(entry.id, entry.seq, !entry.live, entry.tenant, geometry, entry.memberIds, entry.memberSince));
      } else if (entry.kind == FenceStateEntry.Kind.BUCKET_STATS) {
        buckets.add(new SnapshotBucket(Integer.parseInt(entry.id), entry.fenceCount, entry.checksum, entry.seq));
      }
    }, progress);
    if (inspection.unreadable > 0) {
      throw new IllegalArgumentException(inspection.unreadable + " fences of the savepoint are of a state format this release cannot read");
    }
    Progress written = new Progress(progress, "write " + file + ", fences", fences.size());
    ArrowSnapshotFile.write(file, new FenceSnapshot(inspection.restoredLsn, inspection.restoredCommitTime, inspection.maxParallelism,
        buckets, fences), written::tick);
    written.finish();
    return fences.size();
  }
}
