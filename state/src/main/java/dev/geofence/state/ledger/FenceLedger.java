package dev.geofence.state.ledger;

import dev.geofence.state.edit.CoalescedEdit;
import dev.geofence.state.edit.EditCoalescer;
import dev.geofence.state.edit.EditKind;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.EditOutcome;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.readiness.BucketFingerprints;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.time.FenceHistory;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A subtask's fences as the edits of the source make them (design: "Edit semantics"): the fence
 * set (each fence's stored version, the spatial index of the live ones, the live count), the
 * history of versions superseded within the allowed lateness, the buckets' fingerprints of what it
 * holds, and the {@link Schedule} of what waits for the clock, all changed together by the edit
 * path and written through one {@link LedgerStore}.
 *
 * <p>An edit of the stream is applied at once when no location still to be evaluated can precede
 * it ({@link Clock#appliesAtOnce}), else queued until the clock releases it ({@link #release}); a
 * read of the source's rows is applied at once, merged by seq. A fence's edits released together
 * are coalesced so that only the newest version reaches the index (every version between two
 * locations is still kept in the history, for a late location that falls between them), split
 * after each delete so that its EXITs are never folded away by a re-creation. A delete EXITs the
 * fence's members that entered a version before it at once, or, applied ahead of a location older
 * than it (or of the clock while the index warms up), once those are evaluated. Plain Java, not thread-safe: one task thread drives it.
 */
public final class FenceLedger {

  /** How far the fence index's event time has got: what decides whether an edit may apply now. */
  public interface Clock {
    /** The clock: every edit committed at or before it has been released. */
    long time();

    /** The time of the oldest location held, or {@link Long#MAX_VALUE}. */
    long oldestHeld();

    /** Whether an edit committed at {@code commitTime} under {@code key} may apply now rather than wait. */
    boolean appliesAtOnce(long commitTime, String key);

    /** Whether the index has not been ready yet: edits then go ahead of held locations. */
    boolean warmingUp();

    /** No location still to be evaluated is older than this: a version that ended at or before it is needed no more. */
    long historyHorizon();
  }

  /** What the ledger tells its owner. */
  public interface Listener {
    /** The stream delivered a seq gap: it lost an edit, so nothing else it delivered can be trusted. */
    void gap(String reason) throws Exception;

    /** Every object inside the deleted fence that entered a version before {@code seq} leaves it now, at the delete's commit time. */
    void exitMembers(String fenceId, long deletedAt, long seq) throws Exception;
  }

  private final FenceSet fences;
  private final FenceHistory history = new FenceHistory();
  private final BucketFingerprints fingerprints;
  private final Schedule schedule;
  private final LedgerStore store;
  private final Clock clock;
  private final Listener listener;
  /** The commit time of the last edit of the stream that was queued: its transaction's fingerprints queue too. */
  private long queuedAt = Long.MIN_VALUE;

  public FenceLedger(FenceSet fences, BucketFingerprints fingerprints, Schedule schedule, LedgerStore store, Clock clock,
      Listener listener) {
    this.fences = fences;
    this.fingerprints = fingerprints;
    this.schedule = schedule;
    this.store = store;
    this.clock = clock;
    this.listener = listener;
  }

  public FenceSet fences() {
    return fences;
  }

  public FenceHistory history() {
    return history;
  }

  public BucketFingerprints fingerprints() {
    return fingerprints;
  }

  /** What waits for the clock. */
  public Schedule schedule() {
    return schedule;
  }

  // ---- the stream, reads of the source, and the clock -----------------------------------------------

  /**
   * A change of the stream: an edit is applied now if no location can see the fence without it,
   * else queued; a fingerprint goes as its transaction's edits went (the stream delivers it after
   * them, with their commit time): queued if one of them was, else applied now. A fingerprint
   * applied ahead of an edit it counts, or one queued behind an edit applied already, would leave
   * its bucket mismatched until the clock passed it, a mismatch that looks like a lost edit.
   * Fingerprints need no order among themselves: the newest version wins.
   */
  public void receive(Queued change) throws Exception {
    boolean now = change.fingerprint() != null ? change.commitTime() != queuedAt
        : clock.appliesAtOnce(change.commitTime(), change.key());
    if (now) {
      apply(List.of(change));
    } else {
      if (change.edit() != null) {
        queuedAt = change.commitTime();
      }
      schedule.queue(change);
    }
  }

  /** A row a read of the source brought: applied now, merged by seq with what the stream brings. */
  public void read(Queued change) throws Exception {
    apply(List.of(change));
  }

  /**
   * Applies the key's queued changes committed at or before {@code upTo}: every edit of the fence up
   * to the next location at once, since no location sees the versions between.
   */
  public void release(String key, long upTo) throws Exception {
    List<Queued> due = schedule.takeEdits(key, upTo);
    if (!due.isEmpty()) {
      apply(due);
    }
  }

  /** EXITs the members of the fence for its oldest delete whose EXITs waited. */
  public void releaseExit(String fenceId) throws Exception {
    Schedule.Exit delete = schedule.takeExit(fenceId);
    if (delete != null) {
      listener.exitMembers(fenceId, delete.time(), delete.seq());
    }
  }

  /**
   * Deletes a live fence that a read of the source found no row of at all (as of {@code now}), as
   * the version after {@code heldSeq} (a load's set-aside version, 0 if none) or the one held here,
   * so that every member, whichever version it entered, leaves.
   */
  public void deleteGone(String fenceId, long heldSeq, long now) throws Exception {
    long seq = Math.max(fences.seqOf(fenceId), heldSeq) + 1;
    applyCoalesced(CoalescedEdit.of(FenceEdit.delete(fenceId, seq, EditOrigin.SNAPSHOT, 0, now)));
  }

  /**
   * Forgets every fence held, in memory and in the store, before a catch-up's load reads them all
   * anew (docs/design.md#catch-up); their members, superseded versions and queued changes stay.
   */
  public void clearFences() throws Exception {
    fences.clear();
    fingerprints.clearHeld();
    store.clearFences();
  }

  /** Drops the superseded versions no location can need any more. */
  public void pruneHistory() {
    history.pruneUpTo(clock.historyHorizon());
  }

  /**
   * Brings the store to what the ledger holds, before a snapshot: the history's versions still kept
   * (those pruned since the last checkpoint removed), the schedule's keys changed since, and
   * whatever the store held back.
   */
  public void checkpoint() throws Exception {
    long horizon = clock.historyHorizon();
    FenceHistory.Checkpoint checkpoint = history.checkpoint(horizon);
    for (FenceHistory.Kept kept : checkpoint.write()) {
      FenceHistory.Version version = kept.version();
      store.keepVersion(kept.fenceId(), version.until(),
          new StoredFence(version.seq(), version.geometry() == null, version.geometry(), version.tenant(), version.dwellDelay(), 0, 0));
    }
    for (String fenceId : checkpoint.forgetUpToHorizon()) {
      store.forgetVersionsUpTo(fenceId, horizon);
    }
    schedule.checkpoint(store);
    store.flush();
  }

  // ---- a restore: what the store held, read back --------------------------------------------------

  /**
   * A fence's stored version read back, counted in the fingerprint of the bucket it was stored in.
   * Over a version its bucket's segment holds (the segment's overlay: the fence stored since the
   * segment was written), it replaces that version in the fingerprint; an older one changes nothing.
   */
  public void restore(int bucket, String fenceId, StoredFence stored) {
    long before = fences.seqOf(fenceId);
    boolean wasLive = fences.isLive(fenceId);
    if (fences.apply(stored.asSnapshotEdit(fenceId)) != EditOutcome.APPLIED) {
      return;
    }
    if (wasLive) {
      fingerprints.remove(fenceId, before);
    }
    if (!stored.deleted()) {
      fingerprints.add(bucket, fenceId, stored.seq());
    }
  }

  /**
   * A bucket's stored fences read back as one segment, counted in that bucket's fingerprint. Read
   * after edits of its fences (a rebuild reads the buckets a restore left unread), the versions
   * those edits left stay, in the fingerprint too.
   */
  public void restore(int bucket, FenceSegment segment) {
    Map<String, Long> leftOut = fences.load(bucket, segment);
    fingerprints.add(bucket, segment.liveCount(), segment.checksum());
    leftOut.forEach(fingerprints::remove);
  }

  /** A superseded version read back. */
  public void restoreVersion(String fenceId, long until, StoredFence version) {
    history.restored(fenceId, new FenceHistory.Version(version.seq(), version.geometry(), version.tenant(), version.dwellDelay(), until));
  }

  /** Changes the store held queued under a key; held in an earlier release's form, they are written anew at the next checkpoint. */
  public void restoreQueued(List<Queued> changes, boolean earlierForm) {
    for (Queued change : changes) {
      if (earlierForm) {
        schedule.queue(change);
      } else {
        schedule.restore(change);
      }
    }
  }

  /** A fence's deletes whose EXITs waited when the store was written: commit time to seq. */
  public void restoreExits(String fenceId, Map<Long, Long> exits) {
    exits.forEach((time, seq) -> schedule.restoreExit(fenceId, time, seq));
  }

  /** Removes a restored fence of a format this release cannot read, before a rebuild reads it again. */
  public void removeUnreadable(String fenceId) throws Exception {
    store.removeFence(fenceId);
  }

  // ---- the edit path --------------------------------------------------------------------------------

  /**
   * Applies changes of one key, oldest first: fingerprints take effect if not older than the one
   * held; a fence's edits are coalesced so that only the newest version reaches the index, split
   * after each delete.
   */
  private void apply(List<Queued> changes) throws Exception {
    List<FenceEdit> run = new ArrayList<>();
    // The version in force before each edit, for the history; read only when an edit needs it.
    FenceHistory.Version inForce = null;
    for (Queued change : changes) {
      if (change.fingerprint() != null) {
        fingerprint(change.fingerprint());
        continue;
      }
      FenceEdit edit = change.edit();
      // A version no newer than the stored one (a redelivery) never takes effect.
      if (edit.kind() == EditKind.DELETE || edit.seq() > fences.seqOf(edit.fenceId())) {
        inForce = keepHistory(edit, inForce);
      }
      run.add(edit);
      if (edit.kind() == EditKind.DELETE) {
        applyCoalesced(EditCoalescer.coalesce(run).get(0));
        run.clear();
      }
    }
    if (!run.isEmpty()) {
      applyCoalesced(EditCoalescer.coalesce(run).get(0));
    }
  }

  private void fingerprint(BucketFingerprint fingerprint) throws Exception {
    // The newest wins: after a read, the stream may still deliver the rows it read past.
    if (fingerprints.expect(fingerprint.bucket(), fingerprint.fenceCount(), fingerprint.checksum(), fingerprint.version())) {
      store.fingerprint(fingerprint);
    }
  }

  /**
   * Keeps the version an edit supersedes in the history, if a location still to be evaluated may
   * be older than the edit, and returns the version the edit puts in force. A read of the source
   * says nothing of a fence's past, which is forgotten.
   */
  private FenceHistory.Version keepHistory(FenceEdit edit, FenceHistory.Version inForce) throws Exception {
    String id = edit.fenceId();
    if (edit.origin() == EditOrigin.SNAPSHOT) {
      if (!history.of(id).isEmpty()) {
        history.forget(id);
        store.forgetVersionsUpTo(id, Long.MAX_VALUE);
      }
      return null;
    }
    long seqBefore = inForce != null ? inForce.seq() : fences.seqOf(id);
    if (edit.seq() <= seqBefore) {
      return inForce;
    }
    FenceGeometry geometryBefore = inForce != null ? inForce.geometry() : fences.index().get(id);
    long until = edit.commitTimeMillis();
    if (until > clock.historyHorizon()) {
      String tenantBefore = inForce != null ? inForce.tenant() : tenantInForce(id);
      long delayBefore = delayBefore(id, inForce);
      // In memory only until a checkpoint: a catch-up sweeps past most versions within seconds.
      history.superseded(id, new FenceHistory.Version(seqBefore, geometryBefore, tenantBefore, delayBefore, until));
    }
    // A refused upsert leaves the geometry in force as it was.
    FenceGeometry after = edit.kind() == EditKind.DELETE ? null : edit.geometry() != null ? edit.geometry() : geometryBefore;
    long delayAfter = edit.isUpsert() ? edit.dwellDelay() : delayBefore(id, inForce);
    return new FenceHistory.Version(edit.seq(), after, edit.tenant(), delayAfter, Long.MAX_VALUE);
  }

  private long delayBefore(String id, FenceHistory.Version inForce) {
    return inForce != null ? inForce.dwellDelay() : fences.index().dwellDelayOf(id);
  }

  /** Seq-checks one coalesced edit, then updates the fingerprints, the store and the index, and EXITs on delete. */
  private void applyCoalesced(CoalescedEdit coalesced) throws Exception {
    FenceEdit edit = coalesced.latest();
    String id = edit.fenceId();
    boolean wasLive = fences.isLive(id);
    long storedSeq = fences.seqOf(id);
    EditOutcome outcome = fences.apply(coalesced);
    if (!outcome.changesState()) {
      return;
    }
    if (wasLive) {
      fingerprints.remove(id, storedSeq);
    }
    if (edit.kind() != EditKind.DELETE) {
      fingerprints.add(id, edit.seq());
    }
    if (outcome == EditOutcome.GAP) {
      listener.gap("seq gap on fence " + id + ": seq " + edit.seq() + " arrived after " + storedSeq + ", the change stream lost an edit");
    }
    boolean deleted = edit.kind() == EditKind.DELETE;
    FenceEdit shaping = coalesced.shaping();
    // The store is read only when neither the edit nor the index says the tenant: on RocksDB a read
    // per edit (of a key that a snapshot never finds) was most of a cold start's time.
    String tenant = shaping != null && shaping.isUpsert() ? shaping.tenant() : tenantInForce(id);
    // The index's, as for the geometry: a refused upsert leaves the delay in force, and a fence without a geometry has none.
    long dwellDelay = deleted ? StayRules.NO_FENCE_DELAY : fences.index().dwellDelayOf(id);
    store.fence(id, new StoredFence(edit.seq(), deleted, deleted ? null : fences.index().get(id), tenant, dwellDelay, edit.commitLsn(),
        edit.commitTimeMillis()));
    boolean aheadOfTheClock = clock.warmingUp() && edit.origin() == EditOrigin.STREAM && edit.commitTimeMillis() > clock.time();
    if (deleted && (clock.oldestHeld() < edit.commitTimeMillis() || aheadOfTheClock)) {
      // Applied ahead of a held location older than it, or of the clock while warming up: a
      // location older than the delete must still find who was inside, so the EXITs wait for it,
      // as in time order. (A read's delete waits only for held locations, as it always has.)
      schedule.queueExit(id, edit.commitTimeMillis(), edit.seq());
    } else if (deleted) {
      listener.exitMembers(id, edit.commitTimeMillis(), edit.seq());
    }
  }

  /**
   * The tenant of the fence's version in force: the index's, for a fence it holds (without a read
   * of the store that decodes its geometry: a fifth of a catch-up's applying in a profile), else the
   * stored version's.
   */
  private String tenantInForce(String fenceId) throws Exception {
    return fences.index().contains(fenceId) ? fences.index().tenantOf(fenceId) : store.storedTenant(fenceId);
  }
}
