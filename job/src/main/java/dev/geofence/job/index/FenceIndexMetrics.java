package dev.geofence.job.index;

/**
 * The names of the fence index operator's metrics, for the operator that registers them and for
 * whoever reads them through Flink's REST API (the {@code ready} probe). Gauges are states;
 * counters only grow. Constants only, so that a reader needs no Flink on its class path.
 */
public final class FenceIndexMetrics {

  // Gauges: where the warm-up stands.
  public static final String INDEX_READY = "index_ready";
  public static final String LOAD_PHASE = "index_load_phase";
  /** How long the subtask has been in its current load phase, milliseconds. */
  public static final String PHASE_MS = "index_phase_ms";
  public static final String COMPLETENESS = "index_completeness";
  public static final String FENCES_LOADED = "fences_loaded";
  public static final String FENCES_EXPECTED = "fences_expected";
  public static final String BUCKETS_UNMATCHED = "buckets_unmatched";
  /**
   * The owned buckets that do not match the source, as text ("17, 203", the first 16 and how many
   * more): for the {@code ready} probe; reporters that take only numbers leave it out.
   */
  public static final String BUCKETS_UNMATCHED_LIST = "buckets_unmatched_list";
  public static final String GAP_DETECTED = "gap_detected";
  public static final String CATCHUP_LAG_MS = "catchup_lag_ms";
  public static final String SNAPSHOT_AGE_MS = "snapshot_age_ms";
  /**
   * The transactions (per bucket) that edited the subtask's buckets between its restored state and
   * the catch-up target, as the gap check found them: what the catch-up replays. 0 before it.
   */
  public static final String CATCHUP_BACKLOG = "catchup_backlog";
  /** What the gap check estimated a replay of the backlog at, milliseconds; 0 before it. */
  public static final String CATCHUP_REPLAY_ESTIMATE_MS = "catchup_replay_estimate_ms";
  /** What it estimated a read of the fences changed since the restored state at, milliseconds; 0 before it. */
  public static final String CATCHUP_READ_ESTIMATE_MS = "catchup_read_estimate_ms";
  /** What it estimated a load of every fence of the subtask's buckets anew at, milliseconds; 0 before it. */
  public static final String CATCHUP_LOAD_ESTIMATE_MS = "catchup_load_estimate_ms";
  /** 1 when the subtask's catch-up reads what changed, 0 otherwise (or before the choice). */
  public static final String CATCHUP_READ = "catchup_read";
  /** 1 when the subtask's catch-up loads its buckets anew, 0 otherwise (or before the choice). */
  public static final String CATCHUP_LOAD = "catchup_load";
  /**
   * How many fences' keys the catch-up's reads of what changed compared: every live fence of the
   * subtask's buckets, or, narrowed by the restored transaction horizon, those written since.
   */
  public static final String CATCHUP_KEYS_COMPARED = "catchup_keys_compared";
  public static final String PENDING_LOCATIONS = "pending_locations";
  public static final String PENDING_EDITS = "pending_edits";
  /** Superseded fence versions kept for late locations. */
  public static final String FENCE_HISTORY_VERSIONS = "fence_history_versions";
  /** Objects the subtask keeps: inside its fences, or seen within the allowed lateness. */
  public static final String TRACKED_OBJECTS = "tracked_objects";
  /** Stays in the subtask's fences whose DWELL is still to be decided. */
  public static final String PENDING_DWELLS = "pending_dwells";

  // Counters: what happened so far in this attempt.
  /** Locations evaluated after the clock had passed them (within the allowed lateness). */
  public static final String LATE_LOCATIONS = "late_locations";
  /** Locations beyond the allowed lateness: LATE dead letters. */
  public static final String TOO_LATE_LOCATIONS = "too_late_locations";
  /** Locations older than the newest evaluated for their object: OUT_OF_ORDER dead letters. */
  public static final String OUT_OF_ORDER_LOCATIONS = "out_of_order_locations";
  /** Locations stamped before a catch-up's read of what changed, on a subtask that caught up so: BEFORE_READ dead letters. */
  public static final String BEFORE_READ_LOCATIONS = "before_read_locations";
  public static final String EDITS_APPLIED = "edits_applied";
  public static final String EDITS_DUPLICATE = "edits_duplicate";
  public static final String EDITS_STALE = "edits_stale";
  public static final String EDITS_COALESCED = "edits_coalesced";
  public static final String SEQ_GAPS = "seq_gaps";
  /** Buckets read again from the source because they stayed mismatched, before readiness or after it. */
  public static final String BUCKETS_REREAD = "buckets_reread";
  /**
   * Buckets a re-read did not leave matching (the source's fingerprint disagrees with its fences)
   * or did not reach the source for: each is tried again with backoff. Alert when it grows.
   */
  public static final String BUCKETS_REREAD_UNMATCHED = "buckets_reread_unmatched";
  /**
   * Buckets whose fences were written as a new segment at a checkpoint, the overlay of their edits
   * folded in (docs/design.md, "The snapshot as the index").
   */
  public static final String SEGMENTS_REWRITTEN = "fence_segments_rewritten";

  private FenceIndexMetrics() {}
}
