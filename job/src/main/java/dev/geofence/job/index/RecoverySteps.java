package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.readiness.LoadPhase;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.Readiness;
import dev.geofence.state.readiness.Rereads;
import dev.geofence.state.readiness.SourceRead;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.flink.streaming.runtime.tasks.ProcessingTimeService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What stands between a subtask and a trusted index, step by step, on the task thread
 * (docs/design.md#start-restore-and-readiness): which step comes next (a fresh start's load, the gap check of a restore, the rebuild
 * of an untrusted index, the re-read of buckets that stay mismatched), taking each step's outcomes
 * from {@link Recovery}'s thread as they come, trying an unreachable source again after {@link
 * #RETRY_INTERVAL_MS}, and recording each verdict in the {@link Readiness} and the hydration
 * episode. The rows a step reads go to the {@link Index}, which applies them as it applies the
 * stream, merged by seq.
 *
 * <p>Not thread-safe: the task thread's own, like the operator that owns it.
 */
final class RecoverySteps implements AutoCloseable {

  /** Where a step's rows go: the operator's index and keyed state. */
  interface Index {
    /** Applies a row of a read to the fence (or bucket fingerprint) it is of, merged by seq. */
    void applyRead(FenceChange change, FenceDecoder.Decoded decoded) throws Exception;

    /** Deletes a held fence the source has no row of at all. */
    void deleteGone(String fenceId) throws Exception;

    /** Removes a restored fence of a state format this release cannot read, before a rebuild reads it again. */
    void removeUnreadable(String fenceId) throws Exception;

    /** The index became ready while a step's outcomes were applied: held locations are due. */
    void ready() throws Exception;
  }

  /** How long to wait before trying an unreachable source of truth again. */
  static final long RETRY_INTERVAL_MS = 2_000;

  /** How often the task thread takes what the recovery thread has for it, while it works. */
  static final long RECOVERY_POLL_MS = 10;

  /** Rows of a rebuild applied per poll, so that checkpoints and the stream are not held up. */
  private static final int ROWS_PER_POLL = 2_000;

  private static final Logger LOG = LoggerFactory.getLogger(FenceIndexOperator.class);

  private final FenceSourceOptions source;
  private final Readiness readiness;
  private final HydrationRecorder recorder;
  private final FenceSet fences;
  private final ProcessingTimeService time;
  private final Index index;
  /** Fences whose restored version is of a format this release cannot read. */
  private final List<String> unreadable = new ArrayList<>();
  private final Rereads rereads = new Rereads();
  /** The fences the re-read under way changed: what the stream or the restored state lacked. */
  private final List<String> healed = new ArrayList<>();
  /** Null until {@link #open}: without a source (tests) there is no step to take. */
  private Recovery recovery;
  /** The read of the source under way (a load, a rebuild or a re-read), or null. */
  private SourceRead read;
  private boolean polling;
  private long restoredLsn;

  RecoverySteps(FenceSourceOptions source, Readiness readiness, HydrationRecorder recorder, FenceSet fences,
      ProcessingTimeService time, Index index) {
    this.source = source;
    this.readiness = readiness;
    this.recorder = recorder;
    this.fences = fences;
    this.time = time;
    this.index = index;
  }

  /** A restored fence this release cannot read: the index is rebuilt without it. */
  void unreadable(String fenceId) {
    unreadable.add(fenceId);
  }

  /** How many restored fences this release could not read. */
  int unreadableCount() {
    return unreadable.size();
  }

  /**
   * Starts the first step.
   *
   * @param recovery the source-of-truth work to drive, or null when there is no source (tests)
   * @param restoredLsn the stream position the restored state holds, for the gap check
   */
  void open(Recovery recovery, long restoredLsn) throws Exception {
    this.recovery = recovery;
    this.restoredLsn = restoredLsn;
    next();
  }

  /**
   * Starts what stands between this subtask and a trusted index, if anything does and nothing is
   * under way: a fresh start's load, the gap check of a restore, a rebuild if the index cannot be
   * trusted.
   */
  void next() throws Exception {
    if (recovery == null || recovery.running() || (readiness.verified() && readiness.distrust() == null)) {
      return;
    }
    if (readiness.distrust() != null || readiness.loading()) {
      recorder.enter(readiness.phase());
      startRead();
    } else {
      recorder.enter(LoadPhase.GAP_CHECK);
      recovery.checkGap(restoredLsn);
    }
    poll();
  }

  /** The index became untrusted: said, recorded, and a rebuild started. */
  void distrusted() throws Exception {
    recorder.distrusted(readiness.distrust());
    LOG.warn("{}; no location is evaluated until the index is rebuilt from the source", readiness.distrust());
    next();
  }

  /** A fence edit arrived from the stream: a read under way must not delete the fence as gone. */
  void streamed(String fenceId) {
    if (read != null) {
      read.streamed(fenceId);
    }
  }

  /** A bucket's fingerprint took effect (commit time null for a read's). */
  void fingerprint(int bucket, Long commitTime) {
    rereads.fingerprint(bucket, commitTime);
  }

  /** How many buckets have been read again. */
  long rereadCount() {
    return rereads.count();
  }

  /** How many buckets a re-read did not leave matching, or did not reach the source for. */
  long rereadUnmatchedCount() {
    return rereads.unmatchedAfterReread();
  }

  /** Whether a gap check or a read is under way. */
  boolean running() {
    return recovery != null && recovery.running();
  }

  /**
   * Buckets that stay mismatched once the stream has passed the catch-up target and the clock is a
   * heartbeat interval past their fingerprint (the clock has applied every edit committed before
   * it, so the difference is real: an edit the stream never carried, or one the restored state
   * lacks) are read again from the source, those buckets alone, merged by seq with what the stream
   * brings meanwhile, as a rebuild reads all of them; whether or not the subtask was ever ready,
   * since one that never gets there would hold its locations for good. Locations wait meanwhile, as
   * for any bucket that does not match; the re-read is recorded in the episode and counted, and a
   * bucket it leaves mismatched is tried again with backoff ({@link Rereads}).
   */
  void maybeReread(long clockTime) {
    if (recovery == null || recovery.running() || readiness.distrust() != null || !readiness.verified() || !readiness.caughtUp()
        || readiness.fingerprints().ready()) {
      return;
    }
    Rereads.Overdue overdue = rereads.overdue(readiness.fingerprints().unmatchedBuckets(), clockTime,
        source.heartbeatInterval().toMillis(), time.getCurrentProcessingTime());
    readiness.rereading(rereads.retrying());
    recorder.update();
    if (overdue == null) {
      return;
    }
    int[] buckets = overdue.buckets();
    String which = Arrays.stream(buckets).mapToObj(String::valueOf).collect(Collectors.joining(", "));
    recorder.rereading(buckets.length, (buckets.length == 1 ? "bucket " : "buckets ") + which + " still mismatched "
        + overdue.longestMillis() + " ms of event time after " + (buckets.length == 1 ? "its fingerprint" : "their fingerprints")
        + "; read again from the source");
    read = SourceRead.ofBuckets(buckets);
    recovery.reread(buckets);
    poll();
  }

  @Override
  public void close() throws InterruptedException {
    if (recovery != null) {
      recovery.close();
    }
  }

  private void poll() {
    if (!polling) {
      polling = true;
      time.registerTimer(time.getCurrentProcessingTime() + RECOVERY_POLL_MS, at -> {
        polling = false;
        takeOutcomes();
      });
    }
  }

  private void takeOutcomes() throws Exception {
    boolean wasReady = readiness.ready();
    for (Recovery.Outcome outcome : recovery.poll(ROWS_PER_POLL)) {
      if (outcome instanceof Recovery.Row row) {
        applyRead(row);
      } else if (outcome instanceof Recovery.Read done) {
        finishRead(done);
      } else if (outcome instanceof Recovery.Checked checked) {
        gapChecked(checked);
      } else if (outcome instanceof Recovery.Unreachable unreachable) {
        unreachable(unreachable);
      }
    }
    next();
    if (recovery.running()) {
      poll();
    }
    recorder.update();
    if (!wasReady && readiness.ready()) {
      index.ready();
    }
  }

  private void unreachable(Recovery.Unreachable unreachable) {
    if (read != null && !read.ofAll()) {
      // Tried again after their backoff, if the buckets are still mismatched.
      rereads.stillUnmatched(read.buckets());
      read = null;
    }
    if (!readiness.verified() && readiness.distrust() == null) {
      recorder.episode().gapCheck = "unreachable";
      recorder.episode().gapReason = unreachable.reason();
    }
    LOG.warn("The fence database at {} is unreachable ({}); the index is not ready, trying again in {} ms",
        source.jdbcUrl(), unreachable.reason(), RETRY_INTERVAL_MS);
    recorder.record();
    time.registerTimer(time.getCurrentProcessingTime() + RETRY_INTERVAL_MS, at -> next());
  }

  private void gapChecked(Recovery.Checked checked) throws Exception {
    HydrationEpisode episode = recorder.episode();
    if (checked.target() == null) {
      readiness.distrust(checked.result().reason());
      episode.gapCheck = "gap";
      episode.gapReason = checked.result().reason();
      LOG.warn("Gap check failed, the restored fences cannot be trusted and are rebuilt from the source: {}", checked.result().reason());
      recorder.record();
      return;
    }
    // Either way the versions prove it; with the slot ahead, they alone can.
    readiness.coveredUpTo(checked.target().lsn(), checked.target().bucketVersions());
    episode.gapCheck = "covered";
    episode.gapReason = checked.result().slotAhead()
        ? checked.result().reason() + "; proven by the bucket versions at " + Lsn.format(checked.target().lsn()) : null;
    LOG.info("Gap check: {}; catching up to {} ({} fences in this subtask's buckets at the source){}", checked.result().reason(), Lsn.format(checked.target().lsn()),
        checked.target().fenceCount(), checked.result().slotAhead() ? ", where every bucket version of this subtask must have arrived" : "");
    recorder.record();
    if (readiness.proveVersionsOnceCaughtUp()) {
      distrusted();
    }
  }

  /** A read of this subtask's buckets from the source: a fresh start's load, or a rebuild. */
  private void startRead() throws Exception {
    for (String id : unreadable) {
      index.removeUnreadable(id);
    }
    read = SourceRead.ofAllBuckets();
    if (readiness.loading()) {
      recovery.initialRead();
    } else {
      recovery.rebuild();
    }
  }

  /** A row of a read, merged with whatever the stream delivers by seq like any other edit. */
  private void applyRead(Recovery.Row row) throws Exception {
    FenceChange change = row.change();
    if (change.kind == FenceChange.Kind.FENCE) {
      read.read(change.fenceId);
      if (!read.ofAll()) {
        // What a re-read heals is worth saying: it is what the stream or the state had lost.
        long held = fences.seqOf(change.fenceId);
        boolean wasLive = fences.isLive(change.fenceId);
        index.applyRead(change, row.decoded());
        if (fences.seqOf(change.fenceId) != held || fences.isLive(change.fenceId) != wasLive) {
          healed.add(change.fenceId + " " + (wasLive ? "live" : held == 0 ? "unknown" : "deleted") + " at seq " + held + " -> "
              + (fences.isLive(change.fenceId) ? "live" : "deleted") + " at seq " + fences.seqOf(change.fenceId));
        }
        return;
      }
    } else {
      readiness.versions().known(change.bucket, change.seq);
    }
    index.applyRead(change, row.decoded());
  }

  /**
   * The read is complete: fences held here that the source has no row of at all (and that the
   * stream did not bring meanwhile) are deleted, and the index is trusted.
   */
  private void finishRead(Recovery.Read done) throws Exception {
    if (!read.ofAll()) {
      finishReread(done);
      return;
    }
    boolean loaded = readiness.loading();
    List<String> gone = deleteGone();
    unreadable.clear();
    read = null;
    readiness.rebuilt(done.result().lsn());
    LOG.info("{} the fence index from the source in {} ms: {} fences and {} tombstones read as of {}, {} held fences gone",
        loaded ? "Loaded" : "Rebuilt", done.result().millis(), done.result().fences(), done.result().tombstones(),
        Lsn.format(done.result().lsn()), gone.size());
  }

  /** A re-read of some buckets is complete: their fences the source no longer has are deleted. */
  private void finishReread(Recovery.Read done) throws Exception {
    int[] buckets = read.buckets();
    List<String> gone = deleteGone();
    int[] still = Arrays.stream(readiness.fingerprints().unmatchedBuckets()).filter(b -> Arrays.binarySearch(buckets, b) >= 0).toArray();
    if (still.length > 0) {
      // The source's fingerprint disagrees with its own fences, or the bucket changed again before
      // the stream caught up with the read: tried again with backoff while it stays mismatched.
      rereads.stillUnmatched(still);
      LOG.warn("Bucket(s) {} read again from the source still do not match the fingerprint the source keeps for them"
          + " (fence_bucket_stats written outside the versioning?): locations stay held, and they are read again with backoff",
          Arrays.toString(still));
    }
    LOG.info("Re-read {} buckets from the source in {} ms: {} fences and {} tombstones read as of {}, {} held fences gone{}; {} of {} buckets"
        + " unmatched; fences changed by it: {}", buckets.length, done.result().millis(), done.result().fences(), done.result().tombstones(),
        Lsn.format(done.result().lsn()), gone.size(), gone.isEmpty() ? "" : " " + gone, readiness.fingerprints().unmatched(),
        readiness.fingerprints().ownedBuckets(), healed.isEmpty() ? "none" : String.join(", ", healed));
    healed.clear();
    read = null;
  }

  /** Deletes the live fences that the read under way shows the source has no row of at all; returns their ids. */
  private List<String> deleteGone() throws Exception {
    List<String> gone = read.gone(fences.liveIds());
    for (String id : gone) {
      index.deleteGone(id);
    }
    return gone;
  }
}
