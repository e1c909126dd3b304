package dev.geofence.state.edit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.time.StayRules;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class FenceSetTest {

  private static final int FENCES = 60;
  private static FenceGeometry[] shapes;

  @BeforeAll
  static void shapes() throws Exception {
    FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());
    shapes = new FenceGeometry[8];
    for (int i = 0; i < shapes.length; i++) {
      shapes[i] = reader.readWkt("POLYGON ((0 0, " + (i + 1) + " 0, 0 " + (i + 1) + ", 0 0))").geometry();
    }
  }

  // ---- single-edit outcomes -------------------------------------------------------------------

  @Test
  void outcomesFollowTheStoredSeq() {
    FenceSet set = new FenceSet(new FenceIndex());
    assertThat(set.apply(upsert("a", 1, 0))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.apply(upsert("a", 1, 0))).isEqualTo(EditOutcome.DUPLICATE);
    assertThat(set.apply(upsert("a", 2, 1))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.apply(upsert("a", 1, 0))).isEqualTo(EditOutcome.STALE);
    assertThat(set.apply(upsert("a", 4, 2))).isEqualTo(EditOutcome.GAP);
    assertThat(set.index().get("a")).as("a gap still applies the full state").isEqualTo(shapes[2]);
    assertThat(set.apply(upsert("b", 3, 0))).as("a stream edit of an unseen fence must start at 1").isEqualTo(EditOutcome.GAP);
    assertThat(set.apply(FenceEdit.upsert("c", 7, shapes[0], null, StayRules.NO_FENCE_DELAY, EditOrigin.SNAPSHOT, 0, 0)))
        .as("a snapshot read carries the whole state")
        .isEqualTo(EditOutcome.APPLIED);
    assertThat(set.appliedCount()).isEqualTo(3);
    assertThat(set.duplicateCount()).isEqualTo(1);
    assertThat(set.staleCount()).isEqualTo(1);
    assertThat(set.gapCount()).isEqualTo(2);
  }

  @Test
  void tombstoneStopsALateUpsertFromResurrectingAFence() {
    FenceSet set = new FenceSet(new FenceIndex());
    set.apply(upsert("a", 1, 0));
    assertThat(set.apply(delete("a", 2))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.apply(upsert("a", 1, 0))).isEqualTo(EditOutcome.STALE);
    assertThat(set.isLive("a")).isFalse();
    assertThat(set.index().get("a")).isNull();
    assertThat(set.liveCount()).isZero();
    // Re-creating continues from the tombstone's seq.
    assertThat(set.apply(upsert("a", 3, 4))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.index().get("a")).isEqualTo(shapes[4]);
    assertThat(set.seqOf("a")).isEqualTo(3);
  }

  @Test
  void refusedUpsertAdvancesTheSeqAndKeepsThePreviousGeometry() {
    FenceSet set = new FenceSet(new FenceIndex());
    set.apply(upsert("a", 1, 3));
    assertThat(set.apply(FenceEdit.refusedUpsert("a", 2, null, EditOrigin.STREAM, 20, 0))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.index().get("a")).isEqualTo(shapes[3]);
    assertThat(set.apply(upsert("a", 3, 5))).as("no gap after the refused edit").isEqualTo(EditOutcome.APPLIED);
    // A fence created with a refused geometry exists at the source and counts, but is not indexed.
    set.apply(FenceEdit.refusedUpsert("b", 1, null, EditOrigin.STREAM, 40, 0));
    assertThat(set.isLive("b")).isTrue();
    assertThat(set.index().get("b")).isNull();
    assertThat(set.liveCount()).isEqualTo(2);
  }

  @Test
  void coalescingKeepsTheLatestButStillSeesGapsInsideTheBatch() {
    FenceSet set = new FenceSet(new FenceIndex());
    set.apply(upsert("a", 1, 0));
    List<CoalescedEdit> batch =
        EditCoalescer.coalesce(List.of(upsert("a", 2, 1), upsert("b", 1, 0), upsert("a", 3, 2), upsert("a", 2, 1)));
    assertThat(batch).hasSize(2);
    assertThat(batch.get(0).latest().seq()).isEqualTo(3);
    assertThat(batch.get(0).coalescedAway()).isEqualTo(2);
    assertThat(set.apply(batch.get(0))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.apply(batch.get(1))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.coalescedAwayCount()).isEqualTo(2);
    assertThat(set.index().get("a")).isEqualTo(shapes[2]);

    CoalescedEdit holed = EditCoalescer.coalesce(List.of(upsert("a", 4, 0), upsert("a", 6, 1))).get(0);
    assertThat(set.apply(holed)).as("seq 5 is missing between 4 and 6").isEqualTo(EditOutcome.GAP);
  }

  /**
   * An update of a fence's other columns (an upsert keeping the geometry) keeps the geometry in
   * force, the stored one or that of a newer upsert in the same batch, and takes its own tenant
   * and delay; of a fence with no geometry in force (only refused) it indexes nothing.
   */
  @Test
  void anUpsertKeepingTheGeometryKeepsTheOneInForceAndTakesItsTenantAndDelay() {
    FenceSet set = new FenceSet(new FenceIndex());
    set.apply(upsert("a", 1, 3));
    assertThat(set.apply(FenceEdit.upsertKeepingGeometry("a", 2, "acme", 5000, EditOrigin.STREAM, 20, 2))).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.index().get("a")).isEqualTo(shapes[3]);
    assertThat(set.index().tenantOf("a")).isEqualTo("acme");
    assertThat(set.index().dwellDelayOf("a")).isEqualTo(5000);
    assertThat(set.seqOf("a")).isEqualTo(2);

    CoalescedEdit reshapedThenRenamed = EditCoalescer.coalesce(List.of(upsert("a", 3, 5),
        FenceEdit.upsertKeepingGeometry("a", 4, "other", StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 40, 4))).get(0);
    assertThat(set.apply(reshapedThenRenamed)).isEqualTo(EditOutcome.APPLIED);
    assertThat(set.index().get("a")).as("the batch's reshape, not the stored shape").isEqualTo(shapes[5]);
    assertThat(set.index().tenantOf("a")).isEqualTo("other");

    set.apply(FenceEdit.refusedUpsert("b", 1, null, EditOrigin.STREAM, 50, 5));
    assertThat(set.apply(FenceEdit.upsertKeepingGeometry("b", 2, "acme", StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 60, 6)))
        .isEqualTo(EditOutcome.APPLIED);
    assertThat(set.index().contains("b")).as("no geometry in force: nothing to index").isFalse();
    assertThat(set.isLive("b")).isTrue();
  }

  /** Generated histories with updates of the other columns, batched at random, against a model applying them one by one. */
  @Test
  void upsertsKeepingTheGeometryAgreeWithAModelOfTheEditsInOrder() {
    SplittableRandom random = new SplittableRandom(11);
    int kept = 0;
    for (int trial = 0; trial < 200; trial++) {
      List<List<FenceEdit>> histories = histories(random);
      FenceSet batched = new FenceSet(new FenceIndex());
      for (List<FenceEdit> batch : batches(interleave(histories, random), random)) {
        EditCoalescer.coalesce(batch).forEach(batched::apply);
      }
      for (List<FenceEdit> history : histories) {
        FenceGeometry geometry = null;
        String tenant = null;
        long delay = StayRules.NO_FENCE_DELAY;
        for (FenceEdit edit : history) {
          switch (edit.kind()) {
            case UPSERT -> {
              geometry = edit.geometry();
              tenant = edit.tenant();
              delay = edit.dwellDelay();
            }
            case UPSERT_KEEPING_GEOMETRY -> {
              tenant = edit.tenant();
              delay = edit.dwellDelay();
              kept++;
            }
            case DELETE -> geometry = null;
            case REFUSED_UPSERT -> { }
          }
        }
        String id = history.get(0).fenceId();
        assertThat(batched.index().get(id)).as("trial %d, %s", trial, history).isEqualTo(geometry);
        if (geometry != null) {
          assertThat(batched.index().tenantOf(id)).as("trial %d, %s", trial, history).isEqualTo(tenant);
          assertThat(batched.index().dwellDelayOf(id)).as("trial %d, %s", trial, history).isEqualTo(delay);
        }
      }
    }
    assertThat(kept).as("updates of the other columns generated").isGreaterThan(500);
  }

  // ---- properties over generated histories ----------------------------------------------------

  @Test
  void anyRedeliveryDuplicationOrInterleavingGivesTheSameState() {
    SplittableRandom random = new SplittableRandom(42);
    for (int trial = 0; trial < 200; trial++) {
      List<List<FenceEdit>> histories = histories(random);
      FenceSet once = new FenceSet(new FenceIndex());
      for (FenceEdit edit : interleave(histories, random)) {
        assertThat(once.apply(edit)).isEqualTo(EditOutcome.APPLIED);
      }
      FenceSet messy = new FenceSet(new FenceIndex(2, 1, 0));
      List<FenceEdit> stream = redeliver(interleave(histories, random), random);
      if (trial % 2 == 0) {
        stream.forEach(messy::apply);
      } else {
        for (List<FenceEdit> batch : batches(stream, random)) {
          EditCoalescer.coalesce(batch).forEach(messy::apply);
        }
      }
      assertThat(messy.gapCount()).as("trial %d", trial).isZero();
      assertSameState(messy, once);
      assertThat(messy.duplicateCount() + messy.staleCount() + messy.coalescedAwayCount())
          .as("every redelivered edit is counted")
          .isEqualTo(stream.size() - messy.appliedCount());
    }
  }

  @Test
  void aDroppedEditIsAGapOrAChecksumMismatch() {
    SplittableRandom random = new SplittableRandom(7);
    int gapsSeen = 0;
    int mismatchesSeen = 0;
    for (int trial = 0; trial < 300; trial++) {
      List<List<FenceEdit>> histories = histories(random);
      List<FenceEdit> stream = interleave(histories, random);
      FenceSet complete = new FenceSet(new FenceIndex());
      stream.forEach(complete::apply);

      FenceEdit dropped = stream.remove(random.nextInt(stream.size()));
      List<FenceEdit> history = histories.stream().filter(h -> h.contains(dropped)).findFirst().orElseThrow();
      boolean laterEditOfSameFence = history.indexOf(dropped) < history.size() - 1;
      FenceSet lossy = new FenceSet(new FenceIndex());
      if (trial % 2 == 0) {
        stream.forEach(lossy::apply);
      } else {
        for (List<FenceEdit> batch : batches(stream, random)) {
          EditCoalescer.coalesce(batch).forEach(lossy::apply);
        }
      }
      if (laterEditOfSameFence) {
        assertThat(lossy.gapCount()).as("dropping %s is seen as a gap", dropped).isEqualTo(1);
        gapsSeen++;
      } else {
        // The fence's last edit is gone: no seq can show it, the fingerprint against the source must.
        assertThat(lossy.gapCount()).isZero();
        FenceChecksum expected = fingerprint(complete);
        assertThat(fingerprint(lossy).matches(expected.count(), expected.checksum()))
            .as("dropping the last edit %s changes count or checksum", dropped)
            .isFalse();
        mismatchesSeen++;
      }
    }
    assertThat(gapsSeen).isGreaterThan(50);
    assertThat(mismatchesSeen).isGreaterThan(20);
  }

  // ---- generators ------------------------------------------------------------------------------

  /** Per fence, its edits in seq order: creates, reshapes, deletes, re-creates and refusals. */
  private static List<List<FenceEdit>> histories(SplittableRandom random) {
    List<List<FenceEdit>> histories = new ArrayList<>();
    long lsn = 0;
    for (int f = 0; f < FENCES; f++) {
      String id = "fence-" + f;
      List<FenceEdit> edits = new ArrayList<>();
      boolean live = false;
      int length = 1 + random.nextInt(6);
      for (long seq = 1; seq <= length; seq++) {
        lsn += 1 + random.nextInt(100);
        int dice = random.nextInt(10);
        if (live && dice < 3) {
          edits.add(FenceEdit.delete(id, seq, EditOrigin.STREAM, lsn, lsn));
          live = false;
        } else if (dice == 3) {
          edits.add(FenceEdit.refusedUpsert(id, seq, null, EditOrigin.STREAM, lsn, lsn));
          live = true;
        } else if (live && dice == 4) {
          // An update of the other columns only: only of a fence that exists (a re-creation inserts).
          edits.add(FenceEdit.upsertKeepingGeometry(id, seq, random.nextBoolean() ? null : "t" + random.nextInt(3), random.nextInt(3) * 1000L,
              EditOrigin.STREAM, lsn, lsn));
        } else {
          String tenant = random.nextBoolean() ? null : "t" + random.nextInt(3);
          edits.add(FenceEdit.upsert(id, seq, shapes[random.nextInt(shapes.length)], tenant, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, lsn, lsn));
          live = true;
        }
      }
      histories.add(edits);
    }
    return histories;
  }

  /** A random merge of the histories that keeps each fence's own order. */
  private static List<FenceEdit> interleave(List<List<FenceEdit>> histories, SplittableRandom random) {
    List<Deque<FenceEdit>> queues = new ArrayList<>();
    histories.forEach(h -> queues.add(new ArrayDeque<>(h)));
    List<FenceEdit> stream = new ArrayList<>();
    while (!queues.isEmpty()) {
      int q = random.nextInt(queues.size());
      stream.add(queues.get(q).poll());
      if (queues.get(q).isEmpty()) {
        queues.remove(q);
      }
    }
    return stream;
  }

  /**
   * The stream as an at-least-once source may deliver it: edits repeated at once, earlier edits
   * delivered again later, and whole stretches replayed from an earlier position.
   */
  private static List<FenceEdit> redeliver(List<FenceEdit> stream, SplittableRandom random) {
    List<FenceEdit> out = new ArrayList<>();
    for (int i = 0; i < stream.size(); i++) {
      out.add(stream.get(i));
      int dice = random.nextInt(10);
      if (dice == 0) {
        out.add(stream.get(i));
      } else if (dice == 1) {
        out.add(stream.get(random.nextInt(i + 1)));
      } else if (dice == 2) {
        int from = random.nextInt(i + 1);
        out.addAll(stream.subList(from, i + 1));
      }
    }
    return out;
  }

  private static List<List<FenceEdit>> batches(List<FenceEdit> stream, SplittableRandom random) {
    List<List<FenceEdit>> batches = new ArrayList<>();
    for (int i = 0; i < stream.size(); ) {
      int size = 1 + random.nextInt(40);
      batches.add(stream.subList(i, Math.min(stream.size(), i + size)));
      i += size;
    }
    return batches;
  }

  private static void assertSameState(FenceSet actual, FenceSet expected) {
    for (int f = 0; f < FENCES; f++) {
      String id = "fence-" + f;
      assertThat(actual.seqOf(id)).as(id).isEqualTo(expected.seqOf(id));
      assertThat(actual.isLive(id)).as(id).isEqualTo(expected.isLive(id));
      assertThat(actual.index().get(id)).as(id).isEqualTo(expected.index().get(id));
      if (expected.index().contains(id)) {
        assertThat(actual.index().dwellDelayOf(id)).as(id).isEqualTo(expected.index().dwellDelayOf(id));
      }
      for (String tenant : new String[] {null, "t0", "t1", "t2"}) {
        assertThat(actual.index().covering(0.1, 0.1, tenant)).containsExactlyInAnyOrderElementsOf(expected.index().covering(0.1, 0.1, tenant));
      }
    }
    assertThat(actual.index().size()).isEqualTo(expected.index().size());
    assertThat(actual.liveCount()).isEqualTo(expected.liveCount());
  }

  /** The fingerprint the source would keep of the set's live fences at their versions. */
  private static FenceChecksum fingerprint(FenceSet set) {
    FenceChecksum checksum = new FenceChecksum();
    set.liveIds().forEach(id -> checksum.add(id, set.seqOf(id)));
    assertThat(checksum.count()).isEqualTo(set.liveCount());
    return checksum;
  }

  /**
   * A set that loaded its buckets as segments classifies every later edit, and answers, as a set
   * restored fence by fence does: the same outcomes, versions, live fences, counts and index.
   */
  @Test
  void aSetLoadedFromSegmentsBehavesAsOneRestoredFenceByFence() {
    SplittableRandom random = new SplittableRandom(36);
    Map<String, StoredFence> stored = storedFences(random);
    FenceSet byFence = new FenceSet(new FenceIndex());
    stored.forEach((id, fence) -> byFence.apply(fence.asSnapshotEdit(id)));
    FenceSet bySegment = loadedAsSegments(stored);
    assertThat(bySegment.liveCount()).isEqualTo(byFence.liveCount());
    int applied = 0;
    for (int step = 0; step < 5_000; step++) {
      FenceEdit edit = randomEdit(random, byFence);
      EditOutcome expected = byFence.apply(edit);
      assertThat(bySegment.apply(edit)).as("step %d: %s", step, edit).isEqualTo(expected);
      applied += expected == EditOutcome.APPLIED ? 1 : 0;
    }
    assertThat(applied).isGreaterThan(500);
    for (int k = 0; k < 450; k++) {
      String id = "f" + k;
      assertThat(bySegment.seqOf(id)).as(id).isEqualTo(byFence.seqOf(id));
      assertThat(bySegment.isLive(id)).as(id).isEqualTo(byFence.isLive(id));
      assertThat(bySegment.index().get(id)).as(id).isEqualTo(byFence.index().get(id));
    }
    assertThat(bySegment.liveIds()).containsExactlyInAnyOrderElementsOf(byFence.liveIds());
    assertThat(bySegment.liveCount()).isEqualTo(byFence.liveCount());
    assertThat(bySegment.index().size()).isEqualTo(byFence.index().size());
    for (double x = 0.05; x < 8; x += 0.25) {
      for (double y = 0.05; y < 8; y += 0.25) {
        assertThat(bySegment.index().covering(x, y, null)).containsExactlyInAnyOrderElementsOf(byFence.index().covering(x, y, null));
      }
    }
  }

  /**
   * What a set held when asked ({@link FenceSet#held}, for a catch-up's read on another thread) is
   * what it held then, fence by fence, whatever the set applies or clears afterwards: over segments
   * with edits since, and fence by fence.
   */
  @Test
  void whatASetHeldStaysAsItWasWhileTheSetGoesOn() {
    SplittableRandom random = new SplittableRandom(41);
    Map<String, StoredFence> stored = storedFences(random);
    FenceSet byFence = new FenceSet(new FenceIndex());
    stored.forEach((id, fence) -> byFence.apply(fence.asSnapshotEdit(id)));
    for (FenceSet set : List.of(loadedAsSegments(stored), byFence)) {
      for (int step = 0; step < 1_000; step++) {
        set.apply(randomEdit(random, set));
      }
      Map<String, Long> live = new HashMap<>();
      for (int k = 0; k < 450; k++) {
        if (set.isLive("f" + k)) {
          live.put("f" + k, set.seqOf("f" + k));
        }
      }
      assertThat(live).hasSizeGreaterThan(100).hasSizeLessThan(450);
      HeldFences held = set.held();
      for (int step = 0; step < 1_000; step++) {
        set.apply(randomEdit(random, set));
      }
      set.clear();
      for (int k = 0; k < 450; k++) {
        assertThat(held.seqOf("f" + k)).as("f%d", k).isEqualTo(live.getOrDefault("f" + k, 0L));
      }
      Map<String, Long> told = new HashMap<>();
      held.forEachLive((id, seq) -> assertThat(told.put(id, seq)).as("%s told once", id).isNull());
      assertThat(told).isEqualTo(live);
    }
    assertThat(HeldFences.ofLive(Map.of("a", 3L)).seqOf("a")).isEqualTo(3);
    assertThat(HeldFences.ofLive(Map.of("a", 3L)).seqOf("b")).isZero();
  }

  /** 400 stored fences: live with a shape, live with a geometry refused, tombstones. */
  private static Map<String, StoredFence> storedFences(SplittableRandom random) {
    Map<String, StoredFence> stored = new HashMap<>();
    for (int k = 0; k < 400; k++) {
      long seq = 1 + random.nextInt(5);
      int kind = random.nextInt(10);
      stored.put("f" + k, kind == 0 ? new StoredFence(seq, true, null, null, StayRules.NO_FENCE_DELAY, 7, 8)
          : kind == 1 ? new StoredFence(seq, false, null, "t", StayRules.NO_FENCE_DELAY, 7, 8)
          : new StoredFence(seq, false, shapes[random.nextInt(shapes.length)], kind % 2 == 0 ? "t" : null, StayRules.NO_FENCE_DELAY, 7, 8));
    }
    return stored;
  }

  /** A set that loaded {@code stored} bucket by bucket as segments, as a restore does. */
  private static FenceSet loadedAsSegments(Map<String, StoredFence> stored) {
    FenceSet set = new FenceSet(new FenceIndex());
    Map<Integer, Map<String, StoredFence>> buckets = new HashMap<>();
    stored.forEach((id, fence) -> buckets.computeIfAbsent(FenceBuckets.of(id), b -> new HashMap<>()).put(id, fence));
    buckets.forEach((bucket, fences) -> set.load(bucket, FenceSegment.read(StoredFence.segment(fences))));
    return set;
  }

  /** An edit of one of 450 fences: duplicates, stale edits, the next seq, and gaps, a quarter of them deletes. */
  private static FenceEdit randomEdit(SplittableRandom random, FenceSet set) {
    String id = "f" + random.nextInt(450);
    long seq = Math.max(1, set.seqOf(id) + random.nextInt(-1, 3));
    return random.nextInt(4) == 0 ? delete(id, seq) : upsert(id, seq, random.nextInt(shapes.length));
  }

  private static FenceEdit upsert(String id, long seq, int shape) {
    return FenceEdit.upsert(id, seq, shapes[shape], null, StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, seq * 10, seq);
  }

  private static FenceEdit delete(String id, long seq) {
    return FenceEdit.delete(id, seq, EditOrigin.STREAM, seq * 10, seq);
  }
}
