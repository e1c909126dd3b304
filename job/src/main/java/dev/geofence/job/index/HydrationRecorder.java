package dev.geofence.job.index;

import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.connectors.model.HydrationEpisode.GapCheck;
import dev.geofence.connectors.model.HydrationEpisode.StartMode;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.readiness.CatchUpChoice;
import dev.geofence.state.readiness.LoadPhase;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.Readiness;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.util.Arrays;
import java.util.function.Consumer;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.StateInitializationContext;
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

  private static final Logger LOG = LoggerFactory.getLogger(HydrationRecorder.class);
  /** The buckets a line names at most. */
  private static final int MAX_BUCKETS_LOGGED = 16;

  private final Readiness readiness;
  private final FenceSet fences;
  private final Consumer<HydrationEpisode> emit;
  /** Fence edits received from the stream so far. */
  private long editsReceived;
  private long restoredTime;
  private HydrationEpisode episode;
  private LoadPhase phase = LoadPhase.STARTING;
  private long phaseSince;
  private long editsBefore;
  private long coalescedBefore;

  /**
   * @param first the episode of this start, its identity and start mode filled in
   */
  HydrationRecorder(HydrationEpisode first, Readiness readiness, FenceSet fences, Consumer<HydrationEpisode> emit) {
    this.episode = first;
    this.readiness = readiness;
    this.fences = fences;
    this.emit = emit;
    this.phaseSince = first.installedAt;
  }

  /**
   * The first episode of a subtask that began to initialize at {@code installedAt}: who it is, and
   * how it starts (fresh, or restored from a checkpoint or from {@code savepointPath}).
   */
  static HydrationEpisode start(long installedAt, RuntimeContext runtime, KeyGroupRange own, StateInitializationContext context,
      String savepointPath) {
    HydrationEpisode episode = new HydrationEpisode();
    episode.installedAt = installedAt;
    episode.jobName = runtime.getJobInfo().getJobName();
    episode.jobId = runtime.getJobInfo().getJobId().toString();
    episode.subtask = runtime.getTaskInfo().getIndexOfThisSubtask();
    episode.attempt = runtime.getTaskInfo().getAttemptNumber();
    episode.keyGroupStart = own.getStartKeyGroup();
    episode.keyGroupEnd = own.getEndKeyGroup();
    if (!context.isRestored()) {
      episode.startMode = StartMode.FRESH;
      episode.gapCheck = GapCheck.NOT_NEEDED;
    } else if (savepointPath != null && episode.attempt == 0) {
      episode.startMode = StartMode.SAVEPOINT;
      episode.restoredFrom = savepointPath;
    } else {
      episode.startMode = StartMode.CHECKPOINT;
      episode.restoredFrom = context.getRestoredCheckpointId().isPresent()
          ? "checkpoint " + context.getRestoredCheckpointId().getAsLong() : null;
    }
    return episode;
  }

  /**
   * The state is read: a restore's episode says from which position, and whether the gap check is
   * needed at all (it is not for state already untrusted); edits are counted from here.
   */
  void restored(boolean restored) {
    if (restored) {
      restoredTime = readiness.streamTime();
      episode.restoredLsn = Lsn.format(readiness.streamLsn());
      episode.restoredCommitTime = readiness.streamTime();
      episode.gapCheck = readiness.distrust() == null ? GapCheck.NOT_NEEDED : GapCheck.GAP;
      episode.gapReason = readiness.distrust();
    }
    countFromHere();
  }

  /** The commit time of the restored state's stream position, or 0 for a fresh start. */
  long restoredTime() {
    return restoredTime;
  }

  /** A fence edit arrived from the stream. */
  void editReceived() {
    editsReceived++;
  }

  /** The restored state is being read. */
  void restoring() {
    enter(LoadPhase.RESTORING);
  }

  /** The restored state is read into the index; packing it and the rest of the restore follow. */
  void fencesRestored() {
    episode.restoredAt = System.currentTimeMillis();
    enter(LoadPhase.INDEXING);
  }

  /** The restored state is indexed, ready to be checked against the stream. */
  void indexed() {
    episode.indexedAt = System.currentTimeMillis();
  }

  /** The gap check's verdict and why. */
  void gapChecked(GapCheck verdict, String reason) {
    episode.gapCheck = verdict;
    episode.gapReason = reason;
  }

  /** What the catch-up replays, as the gap check found it (transactions, per bucket). */
  void catchUpBacklog(long transactions) {
    episode.catchupBacklog = transactions;
  }

  /** The catch-up's path, why, and the three estimates. */
  void catchUp(CatchUpChoice.Decision decision) {
    episode.catchupPath = decision.path().label();
    episode.catchupReason = decision.reason();
    episode.catchupReplayEstimateMs = decision.replayMillis();
    episode.catchupReadEstimateMs = decision.readMillis();
    episode.catchupLoadEstimateMs = decision.loadMillis();
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
    editsBefore = editsReceived;
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
        editsReceived - editsBefore);
    if (next == LoadPhase.VERIFYING) {
      // Caught up, yet some buckets differ from the source: which, so that one that stays says so.
      LOG.info("Fence index waits for the fences of bucket(s) {} to match the source's fingerprints", unmatchedBuckets());
    }
    if (next == LoadPhase.READY) {
      episode.hydratedAt = now;
      record();
    } else if (hydrated) {
      // Trusted no longer (a seq gap): the rebuild is a warm-up of its own.
      beginRebuild(now, readiness.distrust());
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
      beginRebuild(System.currentTimeMillis(), reason);
    }
    episode.bucketsReread += buckets;
    episode.rereadReason = reason;
    record();
  }

  private void beginRebuild(long now, String reason) {
    HydrationEpisode previous = episode;
    episode = new HydrationEpisode();
    episode.installedAt = now;
    episode.jobName = previous.jobName;
    episode.jobId = previous.jobId;
    episode.subtask = previous.subtask;
    episode.attempt = previous.attempt;
    episode.keyGroupStart = previous.keyGroupStart;
    episode.keyGroupEnd = previous.keyGroupEnd;
    episode.startMode = StartMode.REBUILD;
    episode.restoredLsn = Lsn.format(readiness.streamLsn());
    episode.restoredCommitTime = readiness.streamTime();
    episode.gapCheck = GapCheck.GAP;
    episode.gapReason = reason;
    countFromHere();
    record();
  }

  /** The index cannot be trusted: said in the episode of a warm-up still under way. */
  void distrusted(String reason) {
    if (episode.hydratedAt == 0) {
      episode.gapCheck = GapCheck.GAP;
      episode.gapReason = reason;
    }
  }

  /** Emits the episode's row as it stands; later emissions of the same episode overwrite it. */
  void record() {
    episode.editsReplayed = editsReceived - editsBefore;
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
