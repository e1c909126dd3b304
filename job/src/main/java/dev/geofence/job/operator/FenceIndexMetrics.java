package dev.geofence.job.operator;

/**
 * The names of the fence index operator's metrics, for the operator that registers them and for
 * whoever reads them through Flink's REST API (the {@code ready} probe). Gauges are states;
 * counters only grow. Constants only, so that a reader needs no Flink on its class path.
 */
public final class FenceIndexMetrics {

  // Gauges: where the warm-up stands.
  public static final String INDEX_READY = "index_ready";
  public static final String LOAD_PHASE = "index_load_phase";
  public static final String COMPLETENESS = "index_completeness";
  public static final String FENCES_LOADED = "fences_loaded";
  public static final String FENCES_EXPECTED = "fences_expected";
  public static final String BUCKETS_UNMATCHED = "buckets_unmatched";
  public static final String GAP_DETECTED = "gap_detected";
  public static final String CATCHUP_LAG_MS = "catchup_lag_ms";
  public static final String SNAPSHOT_AGE_MS = "snapshot_age_ms";
  public static final String PENDING_LOCATIONS = "pending_locations";
  public static final String PENDING_EDITS = "pending_edits";

  // Counters: what happened so far in this attempt.
  public static final String LATE_LOCATIONS = "late_locations";
  public static final String EDITS_APPLIED = "edits_applied";
  public static final String EDITS_DUPLICATE = "edits_duplicate";
  public static final String EDITS_STALE = "edits_stale";
  public static final String EDITS_COALESCED = "edits_coalesced";
  public static final String SEQ_GAPS = "seq_gaps";

  private FenceIndexMetrics() {}
}
