package dev.geofence.state.edit;

import java.util.Arrays;
import java.util.Objects;

/**
 * The net effect of a batch's edits to one fence: its latest edit (highest seq), plus the distinct
 * seqs the batch held, so that folding the intermediate versions away does not also hide a gap
 * between them. Immutable.
 */
public final class CoalescedEdit {

  private final FenceEdit latest;
  private final FenceEdit shaping;
  private final FenceEdit shapedBefore;
  private final long[] seqs;
  private final int coalescedAway;

  CoalescedEdit(FenceEdit latest, FenceEdit shaping, FenceEdit shapedBefore, long[] seqs, int coalescedAway) {
    this.latest = Objects.requireNonNull(latest);
    this.shaping = shaping;
    this.shapedBefore = shapedBefore;
    this.seqs = seqs;
    this.coalescedAway = coalescedAway;
  }

  /** A batch of one. */
  public static CoalescedEdit of(FenceEdit edit) {
    return new CoalescedEdit(
        edit, edit.kind() == EditKind.REFUSED_UPSERT ? null : edit, null, new long[] {edit.seq()}, 0);
  }

  public FenceEdit latest() {
    return latest;
  }

  /**
   * The batch's last upsert or delete, whose geometry is in force after the batch: the latest
   * edit itself unless that was refused, in which case the geometry of an earlier edit of the same
   * batch stays in force, as it would had the edits been applied one by one. Null if the batch
   * holds only refused upserts.
   */
  public FenceEdit shaping() {
    return shaping;
  }

  /**
   * If {@link #shaping()} keeps the geometry: the batch's newest upsert or delete before it, whose
   * geometry (none for a delete) is the one kept if it is newer than the stored version; else null.
   */
  public FenceEdit shapedBefore() {
    return shapedBefore;
  }

  /** Edits of the batch that were folded into {@link #latest()}: superseded or repeated. */
  public int coalescedAway() {
    return coalescedAway;
  }

  /**
   * Whether the batch holds every seq from {@code stored + 1} to the latest, so that applying the
   * latest alone skips nothing the stream delivered.
   */
  boolean followsOn(long stored) {
    int from = Arrays.binarySearch(seqs, stored + 1);
    return from >= 0 && seqs.length - from == latest.seq() - stored;
  }

  @Override
  public String toString() {
    return "CoalescedEdit{" + latest + ", seqs=" + Arrays.toString(seqs) + "}";
  }
}
