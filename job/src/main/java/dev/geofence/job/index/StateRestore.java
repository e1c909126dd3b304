package dev.geofence.job.index;

import dev.geofence.connectors.model.Location;
import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceIndexUnionState;
import dev.geofence.job.operator.StoredFenceSerializer;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.ledger.FenceLedger;
import dev.geofence.state.ledger.Queued;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.readiness.Readiness;
import dev.geofence.state.readiness.StreamPosition;
import dev.geofence.state.segment.FenceSegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.IntPredicate;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A subtask's restore of its keyed state into the parts that hold it in memory (design: "Start,
 * restore and readiness"): the fences into the ledger, in two phases (reading them, then indexing
 * them, each timed in the episode), only those of buckets with members if the catch-up will load
 * the rest anew ({@link CatchUpProbe}); then the fingerprints, stream positions and bucket versions
 * into the readiness, the members into the evaluation, the superseded versions and what waited for
 * the clock into the ledger.
 */
record StateRestore(FenceIndexState keyed, FenceLedger ledger, Readiness readiness, EventClock clock, Evaluation evaluation,
    WarmUp warmUp, HydrationRecorder recorder, EditDecoder decoder, Admission admission, CatchUpProbe probe) {

  private static final Logger LOG = LoggerFactory.getLogger(StateRestore.class);

  /** A fence read back, with the bucket it was stored in. */
  private record Read(int bucket, String fenceId, StoredFence stored) {}

  /** A bucket's segment read back. */
  private record ReadSegment(int bucket, FenceSegment segment) {}

  /**
   * Reads everything the keyed state of these key groups holds ({@code restored}: there is any),
   * then what every subtask shares.
   */
  void read(boolean restored, int maxParallelism, KeyGroupRange own, FenceIndexUnionState union) throws Exception {
    readKeyed(restored, maxParallelism, own);
    union.read(own, new FenceIndexUnionState.Restored() {
      @Override
      public void held(Location location, int start, int end) {
        clock.hold(location, start, end);
      }

      @Override
      public void clock(long time) {
        clock.advanceTo(time);
      }

      @Override
      public void untrusted(String reason) {
        // Distrust outlives restarts: state restored across a gap stays untrusted until rebuilt.
        readiness.distrust(reason);
      }

      @Override
      public void objectNewest(String objectId, long time) {
        evaluation.restoreNewest(objectId, time);
      }

      @Override
      public void readAt(long time) {
        admission.readAt(time);
      }
    });
    evaluation.restored(clock.time());
    if (warmUp.unreadableCount() > 0) {
      readiness.distrust(warmUp.unreadableCount() + " restored fences are of a state format this release cannot read (it reads "
          + StoredFenceSerializer.FORMAT_VERSION + ")");
    }
  }

  private void readKeyed(boolean restored, int maxParallelism, KeyGroupRange own) throws Exception {
    if (restored) {
      recorder.restoring();
    }
    List<Integer> readFingerprints = new ArrayList<>();
    Reading into = new Reading(readFingerprints);
    // Each fence counts in the fingerprint of the bucket it is stored in, which the read knows:
    // hashing its id again would cost an MD5 per fence, and where it is stored is what this
    // subtask answers for.
    keyed.readFences(maxParallelism, own, restored ? bucketsToRead() : bucket -> true, into);
    if (restored) {
      recorder.fencesRestored();
    }
    into.index();
    keyed.readTheRest(into, change -> decoder.decode(change));
    // A key group without a position (none streamed before its state was taken) holds fences read
    // at an unknown horizon: then none narrows the catch-up.
    warmUp.horizon(into.positions == own.getNumberOfKeyGroups() ? into.horizon : 0);
    // A restored bucket that stays mismatched is healed like any other: a fingerprint a read took
    // carries no commit time, and is as old as the newest the state had streamed, which every
    // restored queued edit is no newer than.
    for (int bucket : readFingerprints) {
      warmUp.restored(bucket, readiness.streamTime());
    }
    if (restored) {
      recorder.indexed();
    }
  }

  /**
   * The buckets whose fences the restore reads: all, unless the catch-up will load them anew
   * ({@link CatchUpProbe}); then only those of fences with members, since the load's EXITs
   * need the versions their members entered (a tombstone newer than the version held EXITs them,
   * an older one must not). The rest are read later if the load does not happen after all.
   */
  private IntPredicate bucketsToRead() throws Exception {
    if (probe == null) {
      return bucket -> true;
    }
    long[] fences = new long[1];
    keyed.readFingerprints(f -> {
      readiness.versionKnown(f.bucket(), f.version());
      fences[0] += f.fenceCount();
    });
    String load = probe.loads(readiness, fences[0]);
    if (load == null) {
      return bucket -> true;
    }
    Set<Integer> withMembers = new HashSet<>();
    for (String id : keyed.fencesWithMembers()) {
      withMembers.add(FenceBuckets.of(id));
    }
    LOG.info("Reading only the {} buckets of restored fences with members, since the catch-up will load the rest anew: {}",
        withMembers.size(), load);
    warmUp.fencesLeftUnread(load, this::readLeftFences);
    return withMembers::contains;
  }

  /** Reads the fences {@link #bucketsToRead} left unread, into the index, before anything else needs them. */
  private void readLeftFences() throws Exception {
    Reading into = new Reading(new ArrayList<>());
    int buckets = keyed.readLeftFences(into);
    into.index();
    LOG.info("Read the fences of the {} buckets the restore had left unread", buckets);
  }

  /** What the keyed state's reads find, into the parts that hold it; fences collected until {@link #index}. */
  private final class Reading implements FenceIndexState.Restored {
    private final List<Read> fences = new ArrayList<>();
    private final List<ReadSegment> segments = new ArrayList<>();
    private final List<Integer> readFingerprints;
    /** How many key groups' positions were read, and the least of their transaction horizons. */
    private int positions;
    private long horizon = Long.MAX_VALUE;

    Reading(List<Integer> readFingerprints) {
      this.readFingerprints = readFingerprints;
    }

    @Override
    public void segment(int bucket, FenceSegment segment) {
      segments.add(new ReadSegment(bucket, segment));
    }

    @Override
    public void unreadableSegment(int bucket, String reason) {
      readiness.distrust("bucket " + bucket + "'s restored fence segment cannot be read: " + reason);
    }

    @Override
    public void fence(int bucket, String fenceId, StoredFence stored) {
      if (stored.unreadable()) {
        warmUp.unreadable(fenceId);
      } else {
        fences.add(new Read(bucket, fenceId, stored));
      }
    }

    @Override
    public void fingerprint(BucketFingerprint stats) {
      readiness.fingerprints().expect(stats.bucket(), stats.fenceCount(), stats.checksum(), stats.version());
      readiness.versionKnown(stats.bucket(), stats.version());
      readiness.streamed(stats.lsn(), stats.commitTime());
      if (stats.commitTime() > 0) {
        warmUp.restored(stats.bucket(), stats.commitTime());
      } else {
        readFingerprints.add(stats.bucket());
      }
    }

    @Override
    public void position(StreamPosition position) {
      readiness.streamed(position.lsn(), position.commitTime());
      positions++;
      horizon = Math.min(horizon, position.horizon());
    }

    @Override
    public void member(String fenceId, String objectId, long since) {
      evaluation.restoreMember(fenceId, objectId, since);
    }

    @Override
    public void version(String fenceId, long until, StoredFence version) {
      ledger.restoreVersion(fenceId, until, version);
    }

    @Override
    public void queued(String key, List<Queued> changes, boolean earlierForm) {
      for (Queued change : changes) {
        if (change.fingerprint() != null) {
          readiness.versionKnown(change.fingerprint().bucket(), change.fingerprint().version());
        }
      }
      ledger.restoreQueued(changes, earlierForm);
    }

    @Override
    public void waitingExits(String fenceId, Map<Long, Long> exits) {
      ledger.restoreExits(fenceId, exits);
    }

    /** The fences read so far into the ledger's index, packed. */
    void index() {
      // A bucket's segment first: the fences of its overlay replace the segment's versions.
      for (ReadSegment read : segments) {
        FenceSegment segment = read.segment();
        long lsn = 0;
        long time = 0;
        for (int i = 0; i < segment.size(); i++) {
          lsn = Long.compareUnsigned(segment.commitLsn(i), lsn) > 0 ? segment.commitLsn(i) : lsn;
          time = Math.max(time, segment.commitTime(i));
        }
        readiness.streamed(lsn, time);
        ledger.restore(read.bucket(), segment);
      }
      for (Read read : fences) {
        readiness.streamed(read.stored().commitLsn(), read.stored().commitTime());
        ledger.restore(read.bucket(), read.fenceId(), read.stored());
      }
      segments.clear();
      fences.clear();
      // Packed now, while the CDC source restarts, not by the first query once ready: that repack
      // of every fence held the first locations after a restore (a fifth of the restoring threads'
      // CPU in a profile: docs/performance/journal.md, "2026-12-03: the index packed by the restore").
      ledger.fences().index().prepareForQuery();
    }
  }
}
