package dev.geofence.connectors.model;

/**
 * One warm-up of one subtask's fence index (a fresh start, a restore, a rebuild): a row of {@code
 * hydration_history}. Times are epoch milliseconds, 0 when the phase was not reached. A Flink POJO
 * whose fields the job's hydration recorder alone writes.
 */
public class HydrationEpisode {

  /** How a warm-up began; {@link #label()} is its value in {@code hydration_history.start_mode}. */
  public enum StartMode {
    FRESH("fresh"),
    CHECKPOINT("checkpoint"),
    SAVEPOINT("savepoint"),
    /** Trusted no longer while running (a seq gap, a bucket that stayed mismatched): rebuilt. */
    REBUILD("rebuild");

    private final String label;

    StartMode(String label) {
      this.label = label;
    }

    public String label() {
      return label;
    }
  }

  /** What the gap check found; {@link #label()} is its value in {@code hydration_history.gap_check}. */
  public enum GapCheck {
    /** The change stream provably covers the restored state. */
    COVERED("covered"),
    /** It does not (or the state was untrusted already): the index is rebuilt. */
    GAP("gap"),
    /** A fresh start: there was nothing to check. */
    NOT_NEEDED("not-needed"),
    /** The source could not be asked (yet); tried again. */
    UNREACHABLE("unreachable");

    private final String label;

    GapCheck(String label) {
      this.label = label;
    }

    public String label() {
      return label;
    }
  }

  public String jobName;
  public String jobId;
  public int subtask;
  public int attempt;
  public int keyGroupStart;
  public int keyGroupEnd;
  public StartMode startMode;
  /** The checkpoint id or savepoint path restored from; null for a fresh start. */
  public String restoredFrom;
  public long installedAt;
  public long restoredAt;
  public long indexedAt;
  public long hydratedAt;
  /** The restored stream position, as PostgreSQL writes LSNs; null for a fresh start. */
  public String restoredLsn;
  public long restoredCommitTime;
  /**
   * The transactions that edited the subtask's buckets between its restored state and the catch-up
   * target (per bucket), from the bucket versions the gap check read; null without a passed gap
   * check.
   */
  public Long catchupBacklog;
  /** How the catch-up went: {@code replay}, {@code read} or {@code load}; null without a passed gap check. */
  public String catchupPath;
  /** Why that path: forced, or the cheapest by the estimates; null with it. */
  public String catchupReason;
  /** The estimates of the three paths, milliseconds; null with the path. */
  public Long catchupReplayEstimateMs;
  public Long catchupReadEstimateMs;
  public Long catchupLoadEstimateMs;
  public long editsReplayed;
  public long editsCoalesced;
  /** Null until a restore's gap check has answered. */
  public GapCheck gapCheck;
  public String gapReason;
  /** Buckets read again from the source because they stayed mismatched; 0 when none was. */
  public long bucketsReread;
  /** Which buckets the last re-read was of, and why; null when none was. */
  public String rereadReason;
  public long fencesLoaded;
  /** Null when the source's count was not read. */
  public Long fencesExpected;
  public Boolean checksumMatch;
  public long peakHeapBytes;

  public HydrationEpisode() {}

  /** A copy, to emit while this one goes on being updated. */
  public HydrationEpisode copy() {
    HydrationEpisode c = new HydrationEpisode();
    c.jobName = jobName;
    c.jobId = jobId;
    c.subtask = subtask;
    c.attempt = attempt;
    c.keyGroupStart = keyGroupStart;
    c.keyGroupEnd = keyGroupEnd;
    c.startMode = startMode;
    c.restoredFrom = restoredFrom;
    c.installedAt = installedAt;
    c.restoredAt = restoredAt;
    c.indexedAt = indexedAt;
    c.hydratedAt = hydratedAt;
    c.restoredLsn = restoredLsn;
    c.restoredCommitTime = restoredCommitTime;
    c.catchupBacklog = catchupBacklog;
    c.catchupPath = catchupPath;
    c.catchupReason = catchupReason;
    c.catchupReplayEstimateMs = catchupReplayEstimateMs;
    c.catchupReadEstimateMs = catchupReadEstimateMs;
    c.catchupLoadEstimateMs = catchupLoadEstimateMs;
    c.editsReplayed = editsReplayed;
    c.editsCoalesced = editsCoalesced;
    c.gapCheck = gapCheck;
    c.gapReason = gapReason;
    c.bucketsReread = bucketsReread;
    c.rereadReason = rereadReason;
    c.fencesLoaded = fencesLoaded;
    c.fencesExpected = fencesExpected;
    c.checksumMatch = checksumMatch;
    c.peakHeapBytes = peakHeapBytes;
    return c;
  }

  @Override
  public String toString() {
    return "HydrationEpisode{" + jobName + "#" + subtask + " " + startMode + " installed " + installedAt + ", gap check " + gapCheck + "}";
  }
}
