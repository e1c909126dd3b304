package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceDecoder;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.ledger.Queued;
import java.util.Base64;
import java.util.function.Consumer;

/**
 * Turns the stream's records (and the rows a read of the source brings) into what the ledger
 * takes: a fence's edit, its geometry decoded, or a bucket's fingerprint. A geometry that does not
 * decode goes to the dead letters with its reason, and the edit still consumes its seq with the
 * previous geometry in force (a refused upsert); a repaired one is used, and reported as a
 * warning. An update that left the geometry as it was keeps the one in force, its other columns
 * taking effect. Not thread-safe: the task thread's own (a read's rows come decoded from its thread).
 */
final class EditDecoder {

  private final FenceDecoder geometry;
  private final FenceSet fences;
  private final Consumer<DeadLetter> deadLetters;

  EditDecoder(FenceDecoder geometry, FenceSet fences, Consumer<DeadLetter> deadLetters) {
    this.geometry = geometry;
    this.fences = fences;
    this.deadLetters = deadLetters;
  }

  /** A record of the stream (a fence's change or a bucket's fingerprint), its geometry decoded here. */
  Queued decode(FenceChange change) {
    if (change.kind == FenceChange.Kind.BUCKET_STATS) {
      return Queued.of(FenceIndexState.fingerprintOf(change));
    }
    // A version no newer than the stored one (a redelivery: a rebuild's overlap with the stream,
    // a replay after a restore) never takes effect: its geometry is not decoded at all.
    boolean takesNoEffect = !change.delete && change.seq <= fences.seqOf(change.fenceId);
    if (change.geometryUnchanged && !takesNoEffect) {
      return Queued.of(FenceEdit.upsertKeepingGeometry(change.fenceId, change.seq, change.tenant, dwellDelay(change), EditOrigin.STREAM,
          change.lsn, change.commitTime));
    }
    return Queued.of(edit(change, takesNoEffect ? null : geometry.decode(change)));
  }

  /** A row a read of the source brought, its geometry decoded on the read's thread. */
  Queued decode(FenceChange change, FenceDecoder.Decoded decoded) {
    return change.kind == FenceChange.Kind.BUCKET_STATS ? Queued.of(FenceIndexState.fingerprintOf(change)) : Queued.of(edit(change, decoded));
  }

  /** The edit a change makes, its geometry decoded (null: not decoded, as it takes no effect). */
  private FenceEdit edit(FenceChange change, FenceDecoder.Decoded decoded) {
    EditOrigin origin = change.snapshot ? EditOrigin.SNAPSHOT : EditOrigin.STREAM;
    if (change.delete) {
      return FenceEdit.delete(change.fenceId, change.seq, origin, change.lsn, change.commitTime);
    }
    if (decoded == null) {
      return FenceEdit.refusedUpsert(change.fenceId, change.seq, change.tenant, origin, change.lsn, change.commitTime);
    }
    if (decoded.failure() != null) {
      String kept = fences.index().contains(change.fenceId) ? "; the previous version stays in force" : "; the fence has no usable version";
      deadLetter(change, "ERROR", decoded.failure().reason().name(), decoded.failure().getMessage() + kept);
      return FenceEdit.refusedUpsert(change.fenceId, change.seq, change.tenant, origin, change.lsn, change.commitTime);
    }
    decoded.geometry().repair().ifPresent(note -> deadLetter(change, "WARNING", "REPAIRED", note));
    return FenceEdit.upsert(change.fenceId, change.seq, decoded.geometry().geometry(), change.tenant, dwellDelay(change), origin,
        change.lsn, change.commitTime);
  }

  /** The fence's own dwell delay; a negative one is taken as 0 (the fence never DWELLs), with a warning. */
  private long dwellDelay(FenceChange change) {
    if (change.dwellDelay != null && change.dwellDelay < 0) {
      deadLetter(change, "WARNING", "NEGATIVE_DWELL_DELAY",
          "dwell delay of " + change.dwellDelay + " ms taken as 0: the fence never DWELLs");
    }
    return change.ownDwellDelay();
  }

  private void deadLetter(FenceChange change, String severity, String reason, String detail) {
    String payload = change.geometryText != null ? change.geometryText
        : change.geometryBytes != null ? Base64.getEncoder().encodeToString(change.geometryBytes) : null;
    deadLetters.accept(new DeadLetter("fence", change.fenceId, change.seq, severity, reason, detail, payload, change.commitTime,
        System.currentTimeMillis()));
  }
}
