package dev.geofence.state.ledger;

import java.util.List;
import java.util.Map;

/**
 * Where a {@link FenceLedger} keeps its fences durably: the job's keyed state, which sets the key
 * each call is of itself (a fence's, or its bucket's). Writes may be held back until {@link
 * #flush}, which the owner calls before every snapshot; nothing is read back but a fence's tenant.
 */
public interface LedgerStore extends Schedule.Store {

  /** A fence's version now in force (a tombstone for a delete). */
  void fence(String fenceId, StoredFence version) throws Exception;

  /** Removes a fence's stored version (one of a format this release cannot read, before a rebuild reads it again). */
  void removeFence(String fenceId) throws Exception;

  /** Removes every fence's stored version, tombstones included, of the buckets it holds. */
  void clearFences() throws Exception;

  /** The tenant of a fence's stored version, or null (none stored, or no tenant). */
  String storedTenant(String fenceId) throws Exception;

  /** A bucket's fingerprint as the source last gave it. */
  void fingerprint(BucketFingerprint fingerprint) throws Exception;

  /** A superseded version of a fence, kept for late locations until {@code until} is past their reach. */
  void keepVersion(String fenceId, long until, StoredFence version) throws Exception;

  /** Forgets the fence's superseded versions that ended at or before {@code horizon} (all: {@link Long#MAX_VALUE}). */
  void forgetVersionsUpTo(String fenceId, long horizon) throws Exception;

  /** Writes what was held back. */
  void flush() throws Exception;

  /** What a restore finds in the store, in the order it reads it. */
  interface Restored {
    /** A fence's stored version ({@link StoredFence#UNREADABLE} for one of an unknown format), in the bucket it is stored in. */
    void fence(int bucket, String fenceId, StoredFence stored) throws Exception;

    void fingerprint(BucketFingerprint fingerprint);

    /** A fence's superseded version, the fence's oldest first. */
    void version(String fenceId, long until, StoredFence version);

    /** Changes queued under a key, in order; {@code earlierForm} if the store held them in an earlier release's form. */
    void queued(String key, List<Queued> changes, boolean earlierForm);

    void waitingExits(String fenceId, Map<Long, Long> exits);
  }
}
