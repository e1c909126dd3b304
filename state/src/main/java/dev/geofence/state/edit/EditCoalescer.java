package dev.geofence.state.edit;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Folds a batch of edits so that each fence is touched once, with its highest seq: intermediate
 * versions are never applied to the index. Only per-fence order matters to the result, so fences
 * keep the order of their first edit in the batch. Stateless and thread-safe.
 */
public final class EditCoalescer {

  private EditCoalescer() {}

  public static List<CoalescedEdit> coalesce(List<FenceEdit> batch) {
    Map<String, List<FenceEdit>> byFence = new LinkedHashMap<>();
    for (FenceEdit edit : batch) {
      byFence.computeIfAbsent(edit.fenceId(), id -> new ArrayList<>(2)).add(edit);
    }
    List<CoalescedEdit> result = new ArrayList<>(byFence.size());
    for (List<FenceEdit> edits : byFence.values()) {
      if (edits.size() == 1) {
        result.add(CoalescedEdit.of(edits.get(0)));
        continue;
      }
      FenceEdit latest = edits.get(0);
      FenceEdit shaping = null;
      TreeSet<Long> seqs = new TreeSet<>();
      for (FenceEdit edit : edits) {
        seqs.add(edit.seq());
        // On equal seqs the first delivery wins; a redelivery of the same seq is the same edit.
        if (edit.seq() > latest.seq()) {
          latest = edit;
        }
        if (edit.kind() != EditKind.REFUSED_UPSERT && (shaping == null || edit.seq() > shaping.seq())) {
          shaping = edit;
        }
      }
      FenceEdit before = shaping != null && shaping.kind() == EditKind.UPSERT_KEEPING_GEOMETRY ? shapedBefore(shaping, edits) : null;
      result.add(
          new CoalescedEdit(
              latest, shaping, before, seqs.stream().mapToLong(Long::longValue).toArray(), edits.size() - 1));
    }
    return result;
  }

  /**
   * Of a batch whose shaping edit keeps the geometry, the batch's newest upsert or delete before
   * it, whose geometry (none for a delete) that edit keeps if it is newer than the stored version;
   * null if the batch has none.
   */
  private static FenceEdit shapedBefore(FenceEdit keeping, List<FenceEdit> edits) {
    FenceEdit before = null;
    for (FenceEdit edit : edits) {
      boolean shapes = edit.kind() == EditKind.UPSERT || edit.kind() == EditKind.DELETE;
      if (shapes && edit.seq() < keeping.seq() && (before == null || edit.seq() > before.seq())) {
        before = edit;
      }
    }
    return before;
  }
}
