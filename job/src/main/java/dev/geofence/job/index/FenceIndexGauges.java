package dev.geofence.job.index;

import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.ledger.FenceLedger;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.Readiness;
import java.util.function.LongSupplier;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;

/**
 * The fence index's metrics ({@link FenceIndexMetrics} names them), each read from the part that
 * keeps it: gauges of where the warm-up stands, and counters whose counts their owners keep (the
 * fence set its edit outcomes, the warm-up its re-reads, the admission its locations).
 */
final class FenceIndexGauges {

  private FenceIndexGauges() {}

  static void register(MetricGroup group, FenceLedger ledger, FenceIndexState keyed, Readiness readiness, EventClock clock, Admission admission,
      WarmUp warmUp, HydrationRecorder recorder, LocationPath locations) {
    FenceSet fences = ledger.fences();
    group.gauge(FenceIndexMetrics.FENCES_LOADED, () -> fences.liveCount());
    group.gauge(FenceIndexMetrics.FENCES_EXPECTED, () -> readiness.fingerprints().expectedFences());
    group.gauge(FenceIndexMetrics.COMPLETENESS, () -> readiness.fingerprints().completeness());
    group.gauge(FenceIndexMetrics.INDEX_READY, () -> readiness.ready() ? 1 : 0);
    group.gauge(FenceIndexMetrics.BUCKETS_UNMATCHED, () -> readiness.fingerprints().unmatched());
    group.gauge(FenceIndexMetrics.GAP_DETECTED, () -> readiness.distrust() == null ? 0 : 1);
    group.gauge(FenceIndexMetrics.CATCHUP_LAG_MS,
        () -> readiness.streamTime() == 0 ? -1 : Math.max(0, System.currentTimeMillis() - readiness.streamTime()));
    group.gauge(FenceIndexMetrics.SNAPSHOT_AGE_MS,
        () -> recorder.restoredTime() == 0 ? -1 : Math.max(0, System.currentTimeMillis() - recorder.restoredTime()));
    group.gauge(FenceIndexMetrics.CATCHUP_BACKLOG, () -> readiness.catchUpBacklog());
    group.gauge(FenceIndexMetrics.CATCHUP_REPLAY_ESTIMATE_MS, () -> warmUp.decision() == null ? 0 : warmUp.decision().replayMillis());
    group.gauge(FenceIndexMetrics.CATCHUP_READ_ESTIMATE_MS, () -> warmUp.decision() == null ? 0 : warmUp.decision().readMillis());
    group.gauge(FenceIndexMetrics.CATCHUP_LOAD_ESTIMATE_MS, () -> warmUp.decision() == null ? 0 : warmUp.decision().loadMillis());
    group.gauge(FenceIndexMetrics.CATCHUP_READ, () -> warmUp.decision() != null && warmUp.decision().path() == CatchUp.READ ? 1 : 0);
    group.gauge(FenceIndexMetrics.CATCHUP_LOAD, () -> warmUp.decision() != null && warmUp.decision().path() == CatchUp.LOAD ? 1 : 0);
    group.gauge(FenceIndexMetrics.PENDING_LOCATIONS, () -> clock.heldLocations());
    group.gauge(FenceIndexMetrics.PENDING_EDITS, () -> ledger.schedule().edits());
    group.gauge(FenceIndexMetrics.LOAD_PHASE, () -> recorder.phase().code());
    group.gauge(FenceIndexMetrics.PHASE_MS, () -> recorder.phaseMillis());
    group.gauge(FenceIndexMetrics.BUCKETS_UNMATCHED_LIST, () -> recorder.unmatchedBuckets());
    group.gauge(FenceIndexMetrics.FENCE_HISTORY_VERSIONS, () -> ledger.history().versions());
    group.gauge(FenceIndexMetrics.TRACKED_OBJECTS, locations::objects);
    group.gauge(FenceIndexMetrics.PENDING_DWELLS, locations::pendingDwells);
    counter(group, FenceIndexMetrics.LATE_LOCATIONS, admission::lateCount);
    counter(group, FenceIndexMetrics.TOO_LATE_LOCATIONS, admission::tooLateCount);
    counter(group, FenceIndexMetrics.OUT_OF_ORDER_LOCATIONS, admission::outOfOrderCount);
    counter(group, FenceIndexMetrics.BEFORE_READ_LOCATIONS, admission::beforeReadCount);
    counter(group, FenceIndexMetrics.BUCKETS_REREAD, warmUp::rereadCount);
    counter(group, FenceIndexMetrics.CATCHUP_KEYS_COMPARED, warmUp::keysCompared);
    counter(group, FenceIndexMetrics.SEGMENTS_REWRITTEN, keyed::segmentsRewrittenCount);
    counter(group, FenceIndexMetrics.BUCKETS_REREAD_UNMATCHED, warmUp::rereadUnmatchedCount);
    counter(group, FenceIndexMetrics.EDITS_APPLIED, fences::appliedCount);
    counter(group, FenceIndexMetrics.EDITS_DUPLICATE, fences::duplicateCount);
    counter(group, FenceIndexMetrics.EDITS_STALE, fences::staleCount);
    counter(group, FenceIndexMetrics.EDITS_COALESCED, fences::coalescedAwayCount);
    counter(group, FenceIndexMetrics.SEQ_GAPS, fences::gapCount);
  }

  private static void counter(MetricGroup group, String name, LongSupplier count) {
    group.counter(name, new CountOf(count));
  }

  /** A counter whose count another object keeps. */
  private static final class CountOf implements Counter {
    private final LongSupplier count;

    CountOf(LongSupplier count) {
      this.count = count;
    }

    @Override
    public void inc() {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public void inc(long n) {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public void dec() {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public void dec(long n) {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public long getCount() {
      return count.getAsLong();
    }
  }
}
