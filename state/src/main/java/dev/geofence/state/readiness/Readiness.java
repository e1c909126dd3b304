package dev.geofence.state.readiness;

/**
 * Whether one subtask's fence index is provably complete, and which warm-up phase it is in
 * (docs/design.md#readiness). Ready means all of:
 *
 * <ul>
 *   <li>the restored position is proven covered by the change stream, or the index was read from
 *       the source (a fresh start's load, a rebuild), or there was nothing to prove;
 *   <li>nothing has made the index untrusted since: a failed gap check, a seq gap or a bucket
 *       version jump in the stream, restored state of a format this release cannot read (distrust
 *       lasts until a rebuild);
 *   <li>the stream has passed the catch-up target, and every bucket version the source held there
 *       has arrived ({@link BucketVersions}), or a catch-up by read of what changed has read them;
 *   <li>every owned bucket's fingerprint matches the source's ({@link BucketFingerprints}).
 * </ul>
 *
 * The owner feeds it what the stream and the source say; it decides, and tells its {@link
 * Listener} when the index becomes ready and when it becomes untrusted. Plain Java, not
 * thread-safe: one operator thread drives it.
 */
public final class Readiness {

  /** Told of the transitions of readiness. */
  public interface Listener {
    /** The index has become provably complete (again). */
    void becameReady();

    /** The index became untrusted: it is to be read again from the source. */
    void distrusted(String reason);
  }

  private final BucketFingerprints fingerprints;
  private final Listener listener;
  private boolean wasReady;
  private final BucketVersions versions = new BucketVersions();
  private boolean verified;
  /** A fresh start that reads the source itself: nothing is verified until that read is done. */
  private boolean loading;
  private String distrust;
  /** Whether buckets that stayed mismatched are being read again from the source ({@link Rereads}). */
  private boolean rereading;
  /** A catch-up by read of what changed is under way: nothing is ready until it is {@link #readChanged}. */
  private boolean readingChanged;
  private long catchUpTarget;
  private long streamLsn;
  private long streamTime;

  /**
   * @param keyGroupStart first key group of the subtask's range (inclusive)
   * @param keyGroupEnd last key group of the subtask's range (inclusive)
   */
  public Readiness(BucketFingerprints fingerprints, Listener listener) {
    this.fingerprints = fingerprints;
    this.listener = listener;
    fingerprints.onMatchChanged(this::settle);
  }

  /** Tells the listener if the index has just become ready. */
  private void settle() {
    boolean ready = ready();
    if (ready && !wasReady) {
      listener.becameReady();
    }
    wasReady = ready;
  }

  /** The fingerprints of the fences held and of the source's, per owned bucket. */
  public BucketFingerprints fingerprints() {
    return fingerprints;
  }

  /** A bucket's version the state or a read of the source holds: known, so nothing to prove of it. */
  public void versionKnown(int bucket, long version) {
    versions.known(bucket, version);
    settle();
  }

  /**
   * A bucket's version the stream delivered: it must follow the last one known by one, or the stream
   * skipped a transaction of the bucket and the index is distrusted.
   */
  public void versionStreamed(int bucket, long version) {
    distrust(versions.streamed(bucket, version));
    settle();
  }

  /** A fresh start fed by the stream alone (a snapshot and the stream are one consistent read): nothing to prove. */
  public void nothingToProve() {
    verified = true;
    settle();
  }

  /** A fresh start that reads the source of truth itself: ready once that read is {@link #rebuilt} and caught up. */
  public void loadFromSource() {
    loading = true;
  }

  /** Whether a fresh start's read from the source is still to come. */
  public boolean loading() {
    return loading;
  }

  /** Whether the restored position is proven covered (or there was none, or a rebuild made it so). */
  public boolean verified() {
    return verified;
  }

  /**
   * The gap check found the stream able to cover the restored position: ready once the stream
   * passes {@code target}, where every version in {@code versionsAtTarget} (-1: none to prove) must
   * have arrived.
   */
  public void coveredUpTo(long target, long[] versionsAtTarget) {
    verified = true;
    catchUpTarget = target;
    versions.expectAtTarget(versionsAtTarget);
    settle();
  }

  /**
   * The transactions (per bucket) the catch-up replays: the versions the source held at the
   * catch-up target less those restored, over the owned buckets; 0 before the gap check.
   */
  public long catchUpBacklog() {
    return versions.backlog();
  }

  /** The transactions (per bucket) between the versions known here and {@code versions}, one per bucket (-1: not asked for). */
  public long backlogTo(long[] versions) {
    return this.versions.backlogTo(versions);
  }

  /**
   * The stream lost edits, or the restored index cannot be trusted: nothing is ready until {@link
   * #rebuilt}.
   *
   * @return whether this made the index untrusted (it was trusted before)
   */
  public boolean distrust(String reason) {
    if (reason == null || distrust != null) {
      return false;
    }
    distrust = reason;
    wasReady = false;
    listener.distrusted(reason);
    return true;
  }

  /** Why the index cannot be trusted, or null. */
  public String distrust() {
    return distrust;
  }

  /**
   * The covered index catches up by reading what changed (or by loading its buckets anew, a read of
   * them whole) instead of replaying: not ready until {@link #readChanged}.
   */
  public void readingChanged() {
    readingChanged = true;
    wasReady = false;
    // The read's bucket rows will prove the buckets, as a rebuild's do: the versions at the gap
    // check's target need not arrive (a stream passing the target during the read would else
    // distrust the index for what the read holds).
    versions.proven();
  }

  /** Whether a catch-up by read of what changed, or a load, is under way. */
  public boolean isReadingChanged() {
    return readingChanged;
  }

  /**
   * What changed since the restored state was read at {@code lsn}, with the bucket rows of that
   * instant: they are the proof, as after a rebuild; ready once the stream passes it.
   */
  public void readChanged(long lsn) {
    readingChanged = false;
    versions.proven();
    if (Long.compareUnsigned(lsn, catchUpTarget) > 0) {
      catchUpTarget = lsn;
    }
    settle();
  }

  /** The index was read afresh from the source at {@code lsn}: trusted, ready once the stream passes it. */
  public void rebuilt(long lsn) {
    readingChanged = false;
    versions.proven();
    distrust = null;
    verified = true;
    loading = false;
    catchUpTarget = lsn;
    settle();
  }

  /** A record of the stream at {@code lsn} (0 for a snapshot read, which has none), committed at {@code commitTime}. */
  public void streamed(long lsn, long commitTime) {
    if (Long.compareUnsigned(lsn, streamLsn) > 0) {
      streamLsn = lsn;
    }
    streamTime = Math.max(streamTime, commitTime);
    settle();
  }

  /**
   * Once the stream has passed the catch-up target, every bucket version the source held there
   * must have arrived; if one has not, the index is distrusted.
   *
   * @return whether this made the index untrusted
   */
  public boolean proveVersionsOnceCaughtUp() {
    if (versions.proofPending() && Long.compareUnsigned(streamLsn, catchUpTarget) >= 0) {
      boolean distrusted = distrust(versions.targetReached());
      settle();
      return distrusted;
    }
    return false;
  }

  /** The stream has passed the catch-up target, and the bucket versions there are proven. */
  public boolean caughtUp() {
    return Long.compareUnsigned(streamLsn, catchUpTarget) >= 0 && !versions.proofPending();
  }

  /**
   * Whether buckets that stayed mismatched past the bound are being healed: read again from the
   * source, or waiting for their next try. Only the phase says it; readiness is the fingerprints'.
   */
  public void rereading(boolean rereading) {
    this.rereading = rereading;
  }

  /** Provably complete: locations may be evaluated. */
  public boolean ready() {
    return verified && distrust == null && !readingChanged && caughtUp() && fingerprints.ready();
  }

  /** The phase once the state is restored and indexed: what the index waits for, or {@link LoadPhase#READY}. */
  public LoadPhase phase() {
    return distrust != null ? LoadPhase.REBUILDING
        : loading ? LoadPhase.LOADING
        : !verified ? LoadPhase.GAP_CHECK
        : readingChanged || !caughtUp() ? LoadPhase.CATCHING_UP
        : !fingerprints.ready() ? (rereading ? LoadPhase.REREADING : LoadPhase.VERIFYING)
        : LoadPhase.READY;
  }

  /** The newest LSN the stream has delivered (0 before its first stream record). */
  public long streamLsn() {
    return streamLsn;
  }

  /** The newest commit time the stream has delivered, epoch millis (0 before any). */
  public long streamTime() {
    return streamTime;
  }
}
