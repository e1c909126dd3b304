package dev.geofence.state.edit;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.segment.FenceSegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.BiConsumer;
import java.util.function.IntFunction;

/**
 * A subtask's fences as the edit semantics define them: the stored version of every fence it has
 * seen (live, or a tombstone after a delete), the spatial index of the live geometries, and the
 * number of live fences, all changed together by {@link #apply}. Whether they are the source's
 * fences at the source's versions is for the buckets' fingerprints to say ({@code
 * BucketFingerprints}, fed by the caller): a second checksum here would hash every fence again.
 *
 * <p>Against the stored seq (0 for a fence never seen), an edit with {@code seq <= stored} is a
 * duplicate or stale and changes nothing; a higher one is applied, and in the stream it is a
 * {@link EditOutcome#GAP} unless every seq in between was delivered. Tombstones keep their seq, so
 * a late upsert cannot resurrect a deleted fence. Applying any redelivery, duplication or
 * per-fence-ordered interleaving of a stream therefore leaves the same state as applying it once.
 *
 * <p>A restore may {@link #load} whole buckets as {@link FenceSegment}s: their fences' versions
 * are then read from the segment until an edit stores a newer one here, so a restored fence costs
 * no object.
 *
 * <p>Not thread-safe: one operator thread owns it.
 */
public final class FenceSet {

  /**
   * Stored seq per fence edited since the buckets were loaded (or of every fence, when none was);
   * negated for a tombstone (seqs start at 1, so the sign is free).
   */
  private final Map<String, Long> versions = new HashMap<>();
  /** The buckets loaded as segments: the versions of their fences not edited since. */
  private final Map<Integer, FenceSegment> segments = new HashMap<>();
  private final IntFunction<FenceSegment> segmentOf = segments::get;
  private final FenceIndex index;
  private long live;

  private long applied;
  private long duplicates;
  private long stale;
  private long gaps;
  private long coalescedAway;

  public FenceSet(FenceIndex index) {
    this.index = Objects.requireNonNull(index);
  }

  /**
   * Takes a bucket's stored fences as a segment, read in place: its tombstones keep their seqs,
   * its live fences count, and the index reads their geometries. Each bucket once. A restore loads
   * it before any edit of its fences; a bucket a restore left unread is loaded later (a rebuild
   * reads it first), after edits of its fences may have applied: their versions are newer than the
   * segment's, which are left out.
   *
   * @return the segment's live fences left out, with the seqs it holds them at
   * @throws IllegalStateException if the bucket was loaded before
   */
  public Map<String, Long> load(int bucket, FenceSegment segment) {
    if (segments.putIfAbsent(bucket, segment) != null) {
      throw new IllegalStateException("bucket " + bucket + " was loaded before");
    }
    Map<String, Long> leftOut = new HashMap<>();
    if (!versions.isEmpty()) {
      for (int i = 0; i < segment.size(); i++) {
        if (!segment.deleted(i) && versions.containsKey(segment.id(i))) {
          leftOut.put(segment.id(i), segment.seq(i));
        }
      }
    }
    index.load(bucket, segment, leftOut.isEmpty() ? null : leftOut::containsKey);
    live += segment.liveCount() - leftOut.size();
    return leftOut;
  }

  /**
   * Forgets every fence, live or tombstone, segments included, and empties the index: a catch-up's
   * load reads them all anew (docs/design.md#catch-up). The counters of edits stay.
   */
  public void clear() {
    versions.clear();
    segments.clear();
    index.clear();
    live = 0;
  }

  public EditOutcome apply(FenceEdit edit) {
    return apply(CoalescedEdit.of(edit));
  }

  public EditOutcome apply(CoalescedEdit coalesced) {
    coalescedAway += coalesced.coalescedAway();
    FenceEdit edit = coalesced.latest();
    String id = edit.fenceId();
    Long stored = stored(id);
    long storedSeq = stored == null ? 0 : Math.abs(stored);
    EditOutcome outcome = classify(storedSeq, coalesced);
    switch (outcome) {
      case DUPLICATE:
        duplicates++;
        return outcome;
      case STALE:
        stale++;
        return outcome;
      case GAP:
        gaps++;
        break;
      default:
        applied++;
    }
    boolean wasLive = stored != null && stored > 0;
    if (wasLive) {
      live--;
    }
    // A refused upsert leaves the geometry in force: the stored one, or that of an upsert or
    // delete coalesced into the same batch and newer than the stored version. So does an upsert
    // keeping the geometry, with its own tenant and delay.
    FenceEdit shaping = coalesced.shaping();
    if (shaping != null && shaping.seq() > storedSeq) {
      FenceGeometry geometry = geometryOf(shaping, coalesced.shapedBefore(), storedSeq, id);
      if (geometry != null) {
        index.upsert(id, shaping.tenant(), shaping.dwellDelay(), geometry);
      } else {
        index.delete(id);
      }
    }
    if (edit.kind() == EditKind.DELETE) {
      versions.put(id, -edit.seq());
    } else {
      versions.put(id, edit.seq());
      live++;
    }
    return outcome;
  }

  /**
   * The geometry the shaping edit puts in force: its own, or for an upsert keeping the geometry,
   * that of the edit that shaped the fence before it in the batch if newer than the stored
   * version, else the index's.
   */
  private FenceGeometry geometryOf(FenceEdit shaping, FenceEdit shapedBefore, long storedSeq, String id) {
    if (shaping.kind() != EditKind.UPSERT_KEEPING_GEOMETRY) {
      return shaping.geometry();
    }
    return shapedBefore != null && shapedBefore.seq() > storedSeq ? shapedBefore.geometry() : index.get(id);
  }

  private static EditOutcome classify(long storedSeq, CoalescedEdit coalesced) {
    FenceEdit edit = coalesced.latest();
    if (edit.seq() == storedSeq) {
      return EditOutcome.DUPLICATE;
    }
    if (edit.seq() < storedSeq) {
      return EditOutcome.STALE;
    }
    if (edit.origin() == EditOrigin.SNAPSHOT || coalesced.followsOn(storedSeq)) {
      return EditOutcome.APPLIED;
    }
    return EditOutcome.GAP;
  }

  /** The stored seq, negated for a tombstone; null for a fence never seen. */
  private Long stored(String id) {
    return HeldFences.stored(versions, segments.isEmpty() ? null : segmentOf, id);
  }

  /** The stored seq of the fence (live or tombstone), 0 if never seen. */
  public long seqOf(String id) {
    Long stored = stored(id);
    return stored == null ? 0 : Math.abs(stored);
  }

  /** Whether the fence exists at the source as far as this set knows (seen, and not deleted). */
  public boolean isLive(String id) {
    Long stored = stored(id);
    return stored != null && stored > 0;
  }

  /** The ids of the live fences. */
  public List<String> liveIds() {
    List<String> ids = new ArrayList<>();
    forEachLive((id, seq) -> ids.add(id));
    return ids;
  }

  /** The live fences and their seqs as of now, for a catch-up's read of what changed, on another thread. */
  public HeldFences held() {
    return HeldFences.of(versions, segments);
  }

  private void forEachLive(BiConsumer<String, Long> live) {
    HeldFences.forEachLive(versions, segments.values().toArray(new FenceSegment[0]), live);
  }

  public FenceIndex index() {
    return index;
  }

  /** The number of live fences (refused geometries included: they exist at the source). */
  public long liveCount() {
    return live;
  }

  public long appliedCount() {
    return applied;
  }

  public long duplicateCount() {
    return duplicates;
  }

  public long staleCount() {
    return stale;
  }

  public long gapCount() {
    return gaps;
  }

  public long coalescedAwayCount() {
    return coalescedAway;
  }
}
