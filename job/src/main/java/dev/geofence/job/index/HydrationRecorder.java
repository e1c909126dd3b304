package dev.geofence.job.index;

import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.readiness.LoadPhase;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.Readiness;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.util.Arrays;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The warm-ups of one subtask's fence index (docs/design.md#hydration-history): follows its load phase, logs each
 * change with counts and timings, and emits the current hydration episode's row when the subtask
 * starts, when it is ready, and when a rebuild while running begins an episode of its own. Rows
 * are upserted on (job, subtask, installed at), so a later row of an episode overwrites the earlier.
 * Not thread-safe: the operator's thread drives it.
 */
final class HydrationRecorder {

  private static final Logger LOG = LoggerFactory.getLogger(FenceIndexOperator.class);
  /** The buckets a line names at most. */
  private static final int MAX_BUCKETS_LOGGED = 16;

  private final Readiness readiness;
  private final FenceSet fences;
  /** Fence edits received from the stream so far. */
  private final LongSupplier editsReceived;
  private final Consumer<HydrationEpisode> emit;
  private HydrationEpisode episode;
  private LoadPhase phase = LoadPhase.STARTING;
  private long phaseSince;
  private long editsBefore;
  private long coalescedBefore;

  /**
   * @param first the episode of this start, its identity and start mode filled in
   */
  HydrationRecorder(HydrationEpisode first, Readiness readiness, FenceSet fences, LongSupplier editsReceived,
      Consumer<HydrationEpisode> emit) {
    this.episode = first;
    this.readiness = readiness;
    this.fences = fences;
    this.editsReceived = editsReceived;
    this.emit = emit;
    this.phaseSince = first.installedAt;
  }

  /** The episode as it stands, to fill in what the owner learns (gap check, restore times). */
  HydrationEpisode episode() {
    return episode;
  }

  LoadPhase phase() {
    return phase;
  }

  /** How long the subtask has been in its current phase, milliseconds. */
  long phaseMillis() {
    return Math.max(0, System.currentTimeMillis() - phaseSince);
  }

  /** The owned buckets that do not match the source, as a line names them: at most {@link #MAX_BUCKETS_LOGGED}. */
  String unmatchedBuckets() {
    int[] unmatched = readiness.fingerprints().unmatchedBuckets();
    String listed = Arrays.stream(unmatched).limit(MAX_BUCKETS_LOGGED).mapToObj(String::valueOf).collect(Collectors.joining(", "));
    return unmatched.length > MAX_BUCKETS_LOGGED ? listed + " and " + (unmatched.length - MAX_BUCKETS_LOGGED) + " more" : listed;
  }

  /** Counting of replayed and coalesced edits starts here (after the restored state was read). */
  void countFromHere() {
    editsBefore = editsReceived.getAsLong();
    coalescedBefore = fences.coalescedAwayCount();
  }

  /** The phase the readiness says. */
  void update() {
    enter(readiness.phase());
  }

  /** Enters {@code next}: logged, and a row emitted when it is ready or begins a new episode. */
  void enter(LoadPhase next) {
    if (next == phase) {
      return;
    }
    long now = System.currentTimeMillis();
    boolean hydrated = episode.hydratedAt != 0;
    if (hydrated && next != LoadPhase.REBUILDING) {
      // A ready index between an edit and its bucket's fingerprint: in flight, not a warm-up.
      LOG.debug("Fence index phase {} -> {}", phase, next);
      phase = next;
      phaseSince = now;
      return;
    }
    LOG.info("Fence index phase {} -> {} after {} ms: {} fences loaded of {} expected, {} of {} buckets unmatched, stream at {}, {} edits replayed",
        phase, next, now - phaseSince, fences.liveCount(), readiness.fingerprints().expectedFences(),
        readiness.fingerprints().unmatched(), readiness.fingerprints().ownedBuckets(), Lsn.format(readiness.streamLsn()),
        editsReceived.getAsLong() - editsBefore);
    if (next == LoadPhase.VERIFYING) {
      // Caught up, yet some buckets differ from the source: which, so that one that stays says so.
      LOG.info("Fence index waits for the fences of bucket(s) {} to match the source's fingerprints", unmatchedBuckets());
    }
    if (next == LoadPhase.READY) {
      episode.hydratedAt = now;
      record();
    } else if (hydrated) {
      // Trusted no longer (a seq gap): the rebuild is a warm-up of its own.
      beginRebuild(now, "gap", readiness.distrust());
    }
    phase = next;
    phaseSince = now;
  }

  /**
   * Buckets that stayed mismatched are read again. During a warm-up the episode under way says so
   * (how many buckets, and why); after readiness the re-read is an episode of its own, a rebuild of
   * those buckets, whose gap check says {@code gap} (the stream lost an edit of them) with the same
   * reason.
   */
  void rereading(int buckets, String reason) {
    LOG.warn("Fence index re-reads buckets from the source: {}", reason);
    if (episode.hydratedAt != 0) {
      beginRebuild(System.currentTimeMillis(), "gap", reason);
    }
    episode.bucketsReread += buckets;
    episode.rereadReason = reason;
    record();
  }

  private void beginRebuild(long now, String gapCheck, String reason) {
    HydrationEpisode previous = episode;
    episode = new HydrationEpisode();
    episode.installedAt = now;
    episode.jobName = previous.jobName;
    episode.jobId = previous.jobId;
    episode.subtask = previous.subtask;
    episode.attempt = previous.attempt;
    episode.keyGroupStart = previous.keyGroupStart;
    episode.keyGroupEnd = previous.keyGroupEnd;
    episode.startMode = "rebuild";
    episode.restoredLsn = Lsn.format(readiness.streamLsn());
    episode.restoredCommitTime = readiness.streamTime();
    episode.gapCheck = gapCheck;
    episode.gapReason = reason;
    countFromHere();
    record();
  }

  /** The index cannot be trusted: said in the episode of a warm-up still under way. */
  void distrusted(String reason) {
    if (episode.hydratedAt == 0) {
      episode.gapCheck = "gap";
      episode.gapReason = reason;
    }
  }

  /** Emits the episode's row as it stands; later emissions of the same episode overwrite it. */
  void record() {
    episode.editsReplayed = editsReceived.getAsLong() - editsBefore;
    episode.editsCoalesced = fences.coalescedAwayCount() - coalescedBefore;
    episode.fencesLoaded = fences.liveCount();
    episode.fencesExpected = readiness.fingerprints().expectedFences();
    episode.checksumMatch = readiness.fingerprints().ready();
    long peak = 0;
    for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
      if (pool.getType() == MemoryType.HEAP && pool.getPeakUsage() != null) {
        peak += pool.getPeakUsage().getUsed();
      }
    }
    episode.peakHeapBytes = peak;
    emit.accept(episode.copy());
  }
}
