package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.model.HydrationEpisode.GapCheck;
import dev.geofence.connectors.source.BucketRead;
import dev.geofence.connectors.source.ChangedRead;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.edit.HeldFences;
import dev.geofence.state.ledger.FenceLedger;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.CatchUpChoice;
import dev.geofence.state.readiness.LoadPhase;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.Readiness;
import dev.geofence.state.readiness.Rereads;
import dev.geofence.state.readiness.SourceRead;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongConsumer;
import java.util.stream.Collectors;
import org.apache.flink.streaming.runtime.tasks.ProcessingTimeService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The steps between a subtask and a trusted index, on the task's thread (design: "Start, restore
 * and readiness"): which step comes next (a fresh start's read of the source, the gap check of a
 * restore, the rebuild of an untrusted index, the re-read of buckets that stay mismatched), what
 * each step's outcome means, as {@link SourceOfTruth} hands it over, and trying an unreachable source
 * again after {@link #RETRY_INTERVAL_MS}. Each verdict goes to the {@link Readiness} and the
 * hydration episode; the rows a read brings go to the {@link FenceLedger}, merged by seq with the
 * stream.
 *
 * <p>Not thread-safe: the task thread's own.
 */
final class WarmUp implements SourceOfTruth.Outcomes, AutoCloseable {

  /** How long to wait before trying an unreachable source of truth again. */
  static final long RETRY_INTERVAL_MS = 2_000;

  private static final Logger LOG = LoggerFactory.getLogger(WarmUp.class);

  /**
   * How a covered restore catches up: the configured mode, whether the location source replays the
   * downtime, the job's parallelism (for the estimates), where a read's time goes (the time rules
   * refuse locations older than it), who is told that this subtask reads or loads, where the stream
   * is needed from, and whether a read or load waits to be told that the slot is ready for it (by
   * the coordinator, which may create it anew first; without one, in tests, it begins at once).
   */
  record CatchUpRule(CatchUp mode, boolean locationsReplayDowntime, int parallelism, LongConsumer readAt, Runnable reading,
      LongConsumer streamFrom, boolean waitsForSlot) {}

  private final Readiness readiness;
  private final HydrationRecorder recorder;
  private final FenceLedger ledger;
  private final EditDecoder decoder;
  private final ProcessingTimeService time;
  /** How far the clock may be past a bucket's fingerprint before its mismatch is real. */
  private final long patienceMillis;
  /** Run after every outcome: the index may have become ready. */
  private final SourceOfTruth.Action settled;
  private final CatchUpRule catchUp;
  /** The catch-up's path and estimates, once a gap check has passed; null before. */
  private CatchUpChoice.Decision decision;
  /**
   * The live fences and seqs held before a catch-up's load set them aside, until the load is
   * complete (kept across its retries: the ledger no longer knows them); null otherwise.
   */
  private HeldFences heldBeforeLoad;
  /**
   * Why the catch-up loads, as decided before the restore read the fences, which it then read only
   * where they have members; null if it read them all.
   */
  private String loadChosenAtRestore;
  /** Reads the fences the restore left unread, before a rebuild, which needs every fence held; null once none is left. */
  private SourceOfTruth.Action readLeftFences;
  /** Whether the coordinator has been told where this subtask needs the change stream from. */
  private boolean streamReported;
  /** Whether a read or load may begin: the slot is ready for it. */
  private boolean slotReady;
  /** Fences whose restored version is of a format this release cannot read. */
  private final List<String> unreadable = new ArrayList<>();
  private final Rereads rereads = new Rereads();
  /** The fences the re-read under way changed: what the stream or the restored state lacked. */
  private final List<String> healed = new ArrayList<>();
  /** Null until {@link #open}: without a source (tests) there is no step to take. */
  private SourceOfTruth source;
  /** The read of the source under way (a fresh start's, a rebuild's or a re-read's), or null. */
  private SourceRead read;
  private long restoredLsn;
  /** The restored state's transaction horizon, which narrows a catch-up's key pass; 0 for none. */
  private long horizon;
  /** How many fences' keys the reads of what changed compared. */
  private long keysCompared;
  private String sourceUrl;

  WarmUp(Readiness readiness, HydrationRecorder recorder, FenceLedger ledger, EditDecoder decoder, ProcessingTimeService time,
      Duration heartbeatInterval, SourceOfTruth.Action settled, CatchUpRule catchUp) {
    this.readiness = readiness;
    this.recorder = recorder;
    this.ledger = ledger;
    this.decoder = decoder;
    this.time = time;
    this.patienceMillis = heartbeatInterval.toMillis();
    this.settled = settled;
    this.catchUp = catchUp;
    this.slotReady = !catchUp.waitsForSlot();
  }

  /** The catch-up's path and estimates, once a gap check has passed; null before. */
  CatchUpChoice.Decision decision() {
    return decision;
  }

  /**
   * The restore read only the fences with members, since the catch-up will load the rest anew
   * ({@code reason}): the catch-up loads, whatever the gap check estimates; a rebuild first runs
   * {@code readThem}, since it merges into every fence held.
   */
  void fencesLeftUnread(String reason, SourceOfTruth.Action readThem) {
    loadChosenAtRestore = reason;
    readLeftFences = readThem;
  }

  /**
   * The restored state's transaction horizon: the least of its key groups' positions', or 0 if one
   * has none (docs/design.md#catch-up).
   */
  void horizon(long horizon) {
    this.horizon = horizon;
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
   * @param source the source of truth, or null when there is none (tests)
   * @param restoredLsn the stream position the restored state holds, for the gap check
   */
  void open(SourceOfTruth source, String sourceUrl, long restoredLsn) throws Exception {
    this.source = source;
    this.sourceUrl = sourceUrl;
    this.restoredLsn = restoredLsn;
    if (source == null) {
      streamFrom(0);
    }
    next();
  }

  /**
   * Tells the coordinator, once, where this subtask needs the change stream from: the position its
   * read of what changed was paired with, or 0, wherever the CDC source resumes (a fresh start's
   * load and a rebuild merge with the stream from there, a replay is the stream). The stream starts
   * once every subtask has said so.
   */
  private void streamFrom(long position) {
    if (!streamReported) {
      streamReported = true;
      catchUp.streamFrom().accept(position);
    }
  }

  /**
   * Starts what stands between this subtask and a trusted index, if anything does and nothing is
   * under way: a fresh start's read, the gap check of a restore, a rebuild if the index cannot be
   * trusted.
   */
  private void next() throws Exception {
    if (source == null || source.busy()
        || (readiness.verified() && readiness.distrust() == null && !readiness.isReadingChanged())) {
      return;
    }
    if (readiness.distrust() != null || readiness.loading()) {
      if (readLeftFences != null) {
        readLeftFences.run();
        readLeftFences = null;
      }
      streamFrom(0);
      recorder.enter(readiness.phase());
      for (String id : unreadable) {
        ledger.removeUnreadable(id);
      }
      // Once: a read tried again must not remove what the one before it stored (which it then
      // takes as duplicates, never stored again).
      unreadable.clear();
      read = SourceRead.ofAllBuckets();
      if (readiness.loading()) {
        source.initialRead();
      } else {
        source.readAll();
      }
    } else if (readiness.isReadingChanged() && !slotReady) {
      LOG.info("Waiting for the coordinator to have the job's slot ready before the {}", decision.path().label());
    } else if (readiness.isReadingChanged() && decision.path() == CatchUp.LOAD) {
      if (heldBeforeLoad == null) {
        heldBeforeLoad = ledger.fences().held();
        long setAside = ledger.fences().liveCount();
        // Set aside before the read: every fence then comes as into a fresh start's empty index,
        // not as a replacement of a restored one (about twice the cost each).
        ledger.clearFences();
        // Those the restore left unread are set aside with them: none is left to read.
        readLeftFences = null;
        LOG.info("Set aside the {} restored fences to load this subtask's buckets anew from the source", setAside);
      }
      read = SourceRead.ofAllBuckets();
      source.readChanged(heldBeforeLoad, 0, true);
    } else if (readiness.isReadingChanged()) {
      // The fences held now, for the read's thread: what the stream applied since counts.
      read = SourceRead.ofAllBuckets();
      source.readChanged(ledger.fences().held(), horizon, false);
    } else {
      recorder.enter(LoadPhase.GAP_CHECK);
      source.checkGap(restoredLsn);
    }
  }

  /** The coordinator has the job's slot ready: a read or load that waits for it begins. */
  void slotReady() throws Exception {
    slotReady = true;
    next();
  }

  /** The index became untrusted: said, recorded, and a rebuild started. */
  void distrusted(String reason) throws Exception {
    recorder.distrusted(reason);
    LOG.warn("{}; no location is evaluated until the index is rebuilt from the source", reason);
    next();
  }

  /**
   * A change arrived from the stream: a fence edit (a read under way must not delete the fence as
   * gone) or a bucket's fingerprint. Either is its bucket's newest change, which a mismatch is
   * measured from before it is read again.
   */
  void streamed(FenceChange change) {
    if (change.kind == FenceChange.Kind.FENCE) {
      if (read != null) {
        read.streamed(change.fenceId);
      }
      rereads.streamed(FenceBuckets.of(change.fenceId), change.commitTime);
    } else if (change.kind == FenceChange.Kind.BUCKET_STATS) {
      rereads.streamed(change.bucket, change.commitTime);
    }
  }

  /** A restored bucket's newest change was committed at {@code commitTime}. */
  void restored(int bucket, long commitTime) {
    rereads.streamed(bucket, commitTime);
  }

  /** How many fences' keys the reads of what changed compared. */
  long keysCompared() {
    return keysCompared;
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
    return source != null && source.busy();
  }

  /**
   * Buckets that stay mismatched once the stream has passed the catch-up target and the clock is a
   * heartbeat interval past their newest change (the clock has applied every edit committed before
   * it, so the difference is real: an edit the stream never carried, or one the restored state
   * lacks) are read again from the source, those buckets alone, merged by seq with what the stream
   * brings meanwhile, as a rebuild reads all of them; whether or not the subtask was ever ready,
   * since one that never gets there would hold its locations for good. Locations wait meanwhile, as
   * for any bucket that does not match; the re-read is recorded in the episode and counted, and a
   * bucket it leaves mismatched is tried again with backoff ({@link Rereads}).
   */
  void maybeReread(long clockTime) {
    if (source == null || source.busy() || readiness.distrust() != null || !readiness.verified() || !readiness.caughtUp()
        || readiness.fingerprints().ready()) {
      return;
    }
    Rereads.Overdue overdue = rereads.overdue(readiness.fingerprints().unmatchedBuckets(), clockTime, patienceMillis,
        time.getCurrentProcessingTime());
    readiness.rereading(rereads.retrying());
    recorder.update();
    if (overdue == null) {
      return;
    }
    int[] buckets = overdue.buckets();
    String which = Arrays.stream(buckets).mapToObj(String::valueOf).collect(Collectors.joining(", "));
    recorder.rereading(buckets.length, (buckets.length == 1 ? "bucket " : "buckets ") + which + " still mismatched "
        + overdue.longestMillis() + " ms of event time after " + (buckets.length == 1 ? "its newest change" : "their newest changes")
        + "; read again from the source");
    read = SourceRead.ofBuckets(buckets);
    source.reread(buckets);
  }

  @Override
  public void close() throws InterruptedException {
    if (source != null) {
      source.close();
    }
  }

  // ---- the outcomes of a step, handed to the task's thread ----------------------------------------

  @Override
  public void checked(SourceOfTruth.Verdict verdict) throws Exception {
    if (verdict.target() == null) {
      recorder.gapChecked(GapCheck.GAP, verdict.result().reason());
      LOG.warn("Gap check failed, the restored fences cannot be trusted and are rebuilt from the source: {}", verdict.result().reason());
      readiness.distrust(verdict.result().reason());
    } else {
      // Either way the versions prove it; with the slot ahead, they alone can.
      recorder.gapChecked(GapCheck.COVERED, verdict.result().slotAhead()
          ? verdict.result().reason() + "; proven by the bucket versions at " + Lsn.format(verdict.target().lsn()) : null);
      readiness.coveredUpTo(verdict.target().lsn(), verdict.target().bucketVersions());
      recorder.catchUpBacklog(readiness.catchUpBacklog());
      decision = CatchUpChoice.choose(catchUp.mode(), readiness.catchUpBacklog(), ledger.fences().liveCount(),
          verdict.target().fenceCount(), catchUp.parallelism(), catchUp.locationsReplayDowntime());
      if (loadChosenAtRestore != null) {
        // The fences without members were never read: only the load can bring them.
        decision = new CatchUpChoice.Decision(CatchUp.LOAD, decision.replayMillis(), decision.readMillis(), decision.loadMillis(),
            decision.path() == CatchUp.LOAD ? decision.reason() + "; decided before the restore read the fences"
                : loadChosenAtRestore + ", decided before the restore read the fences (at the gap check: " + decision.reason() + ")");
      }
      recorder.catchUp(decision);
      LOG.info("Gap check: {}; catching up to {} ({} fences in this subtask's buckets at the source, {} transactions of them since"
              + " the restored state){}; catch-up by {}: {}", verdict.result().reason(), Lsn.format(verdict.target().lsn()),
          verdict.target().fenceCount(), readiness.catchUpBacklog(),
          verdict.result().slotAhead() ? ", where every bucket version of this subtask must have arrived" : "",
          decision.path().label(), decision.reason());
      if (decision.path() != CatchUp.REPLAY) {
        readiness.readingChanged();
        catchUp.reading().run();
      } else {
        streamFrom(0);
      }
      readiness.proveVersionsOnceCaughtUp();
    }
    recorder.record();
    stepped();
  }

  @Override
  public void rows(List<SourceOfTruth.Row> rows) throws Exception {
    for (SourceOfTruth.Row row : rows) {
      FenceChange change = row.change();
      if (change.kind != FenceChange.Kind.FENCE) {
        readiness.versionKnown(change.bucket, change.seq);
      } else {
        read.read(change.fenceId);
      }
      if (change.kind == FenceChange.Kind.FENCE && !read.ofAll()) {
        // What a re-read heals is worth saying: it is what the stream or the state had lost.
        long held = ledger.fences().seqOf(change.fenceId);
        boolean wasLive = ledger.fences().isLive(change.fenceId);
        ledger.read(decoder.decode(change, row.decoded()));
        if (ledger.fences().seqOf(change.fenceId) != held || ledger.fences().isLive(change.fenceId) != wasLive) {
          healed.add(change.fenceId + " " + (wasLive ? "live" : held == 0 ? "unknown" : "deleted") + " at seq " + held + " -> "
              + (ledger.fences().isLive(change.fenceId) ? "live" : "deleted") + " at seq " + ledger.fences().seqOf(change.fenceId));
        }
      } else {
        ledger.read(decoder.decode(change, row.decoded()));
      }
    }
    recorder.update();
    settled.run();
  }

  /**
   * The read is complete: fences held here that the source has no row of at all (and that the
   * stream did not bring meanwhile) are deleted, and the index is trusted.
   */
  @Override
  public void read(BucketRead.Result result) throws Exception {
    List<String> gone = deleteGone(ledger.fences().liveIds());
    if (!read.ofAll()) {
      finishReread(result, gone);
    } else {
      boolean loaded = readiness.loading();
      // A catch-up's load that a rebuild took over (the index distrusted while the load was tried
      // again) is over too: the rebuild read every fence, and checkpoints are whole again.
      heldBeforeLoad = null;
      read = null;
      LOG.info("{} the fence index from the source in {} ms: {} fences and {} tombstones read as of {}, {} held fences gone",
          loaded ? "Loaded" : "Rebuilt", result.millis(), result.fences(), result.tombstones(), Lsn.format(result.lsn()), gone.size());
      readiness.rebuilt(result.lsn());
    }
    stepped();
  }

  /**
   * The read of what changed is complete: held fences the source has no row of at all (and that
   * the stream did not bring meanwhile) are deleted, the bucket rows read are the proof, and
   * locations stamped before the read are refused from now on.
   */
  @Override
  public void readChanged(ChangedRead.Result result) throws Exception {
    List<String> gone = deleteGone(result.missing());
    read = null;
    boolean loaded = heldBeforeLoad != null;
    heldBeforeLoad = null;
    streamFrom(readiness.distrust() == null ? result.streamFrom() : 0);
    if (readiness.distrust() == null) {
      catchUp.readAt().accept(result.readTime());
      readiness.readChanged(result.lsn());
      if (loaded) {
        LOG.info("Caught up by loading this subtask's buckets anew in {} ms: {} fences read whole, {} tombstones of held fences,"
                + " {} held fences gone, as of {}; locations stamped before {} are BEFORE_READ dead letters here", result.millis(),
            result.changed(), result.tombstones(), gone.size(), Lsn.format(result.lsn()), Instant.ofEpochMilli(result.readTime()));
      } else {
        keysCompared += result.keys();
        LOG.info("Caught up by reading what changed since the restored state in {} ms (the key pass {} ms): {} fences' keys"
                + " compared{}, {} read whole, {} tombstones of held fences, {} held fences gone, as of {}; locations stamped"
                + " before {} are BEFORE_READ dead letters here", result.millis(), result.keyPassMillis(), result.keys(),
            result.narrowed() ? " (those written since the restored transaction horizon " + horizon + ")" : " (every one)",
            result.changed(), result.tombstones(), gone.size(), Lsn.format(result.lsn()), Instant.ofEpochMilli(result.readTime()));
      }
    }
    stepped();
  }

  /**
   * Whether a catch-up's load has set the restored fences aside and not yet read them all: state
   * checkpointed meanwhile holds only part of them, and must not be trusted when restored.
   */
  boolean loadUnderWay() {
    return heldBeforeLoad != null;
  }

  /** A re-read of some buckets is complete. */
  private void finishReread(BucketRead.Result result, List<String> gone) {
    int[] buckets = read.buckets();
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
        + " unmatched; fences changed by it: {}", buckets.length, result.millis(), result.fences(), result.tombstones(),
        Lsn.format(result.lsn()), gone.size(), gone.isEmpty() ? "" : " " + gone, readiness.fingerprints().unmatched(),
        readiness.fingerprints().ownedBuckets(), healed.isEmpty() ? "none" : String.join(", ", healed));
    healed.clear();
    read = null;
  }

  @Override
  public void unreachable(String reason) throws Exception {
    if (read != null && !read.ofAll()) {
      // Tried again after their backoff, if the buckets are still mismatched.
      rereads.stillUnmatched(read.buckets());
      read = null;
    }
    if (!readiness.verified() && readiness.distrust() == null) {
      recorder.gapChecked(GapCheck.UNREACHABLE, reason);
    }
    LOG.warn("The fence database at {} is unreachable ({}); the index is not ready, trying again in {} ms", sourceUrl, reason,
        RETRY_INTERVAL_MS);
    // The change stream is not held for it: the CDC source meets the outage itself, and a read
    // tried again later merges with the stream as any read does. Except for a load: the index it
    // emptied would take the stream's edits of fences it has not read again as seq gaps, and be
    // rebuilt after it. The stream waits for the load tried again, as it waits for a load that
    // goes well.
    if (!loadUnderWay()) {
      streamFrom(0);
    }
    recorder.record();
    time.registerTimer(time.getCurrentProcessingTime() + RETRY_INTERVAL_MS, at -> next());
    settled.run();
  }

  /** A step ended: the next one, if any, and the index may be ready now. */
  private void stepped() throws Exception {
    next();
    recorder.update();
    settled.run();
  }

  /**
   * Of {@code live} (fences held live), deletes those the read under way shows the source has no
   * row of at all; returns their ids.
   */
  private List<String> deleteGone(Iterable<String> live) throws Exception {
    List<String> gone = read.gone(live);
    long now = System.currentTimeMillis();
    for (String id : gone) {
      // A load has emptied the set: the version it set aside is the one the members entered.
      ledger.deleteGone(id, heldBeforeLoad != null ? heldBeforeLoad.seqOf(id) : 0, now);
    }
    return gone;
  }
}
