package dev.geofence.job.handover;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.job.operator.SavepointFiles;
import dev.geofence.job.operator.Uids;
import java.io.Serializable;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.checkpoint.SavepointType;
import org.apache.flink.runtime.checkpoint.SnapshotType;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A replication slot per savepoint, for blue/green deploys made of savepoints alone (the Flink
 * Kubernetes Operator's {@code FlinkBlueGreenDeployment}: both colours start from one template, the
 * new one from a savepoint the operator takes of the running one without stopping it;
 * docs/design.md#bluegreen-deploys).
 *
 * <p>The new instance needs a slot of its own that holds every change its savepoint has not seen.
 * The running instance makes it while it takes the savepoint: its slot has confirmed at most the
 * position of a checkpoint completed before this one (Flink CDC confirms a checkpoint's position
 * only once it completed), so a copy made now ({@code SLOT_CHECKPOINTID}) starts at or before the
 * savepoint's position. The savepoint records what it is (a checkpoint, a savepoint without a
 * stop, or a stop) and the slot the instance ran on, so that the instance restored from it knows
 * ({@link #start}) which slot is its own: the copy after a savepoint without a stop (the running
 * one goes on reading its own), the recorded slot after a stop or from a checkpoint.
 *
 * <p>Slots nobody reads keep WAL forever, so: a copy no instance reads is dropped after the
 * retention once it stayed unread for a while (none was restored from that savepoint, or the one
 * that was is gone); the instance restored from a
 * savepoint without a stop drops the slot of the instance it replaced once it writes the outputs
 * and that slot stayed unread for a while (that instance is gone).
 *
 * <p>Only subtask 0 of the handover operator acts; the record is union state, so that whichever
 * subtask is 0 after a rescale has it.
 */
public final class SavepointSlots implements Serializable {

  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(SavepointSlots.class);

  /** The union list state the record is kept in. */
  static final ListStateDescriptor<String> STATE = new ListStateDescriptor<>("savepoint-slots", Types.STRING);

  /** What a snapshot was: the restored instance decides by it. */
  enum Taken {
    /** A checkpoint: restored (a failover, or a restore from a retained checkpoint), the instance goes on on its slot. */
    CHECKPOINT,
    /** A savepoint without a stop: the instance that took it goes on on its slot; a new one gets the copy. */
    SAVEPOINT,
    /** A savepoint that stopped the job: the restored instance goes on on the stopped one's slot. */
    STOP;

    static Taken of(SnapshotType type) {
      return !type.isSavepoint() ? CHECKPOINT : ((SavepointType) type).isSynchronous() ? STOP : SAVEPOINT;
    }
  }

  /**
   * How an instance starts, by the savepoint it is restored from.
   *
   * @param slot the slot it reads
   * @param besideRunningOne whether the savepoint was taken without a stop: the instance it was
   *     taken of may run on, so this one is its standby if it does
   * @param replaces the slot of the instance this one replaces, to drop once that one is gone, or null
   */
  public record Start(String slot, boolean besideRunningOne, String replaces) {}

  private final FenceSourceOptions source;
  private final String configured;
  private final long retentionMs;
  private final long unreadTimeoutMs;
  private final String replaces;

  /** The copies this instance made at savepoints (or restored the record of), until they are dropped or it hands over. */
  private transient List<Copy> pending;
  /** The replaced instance's slot, once this instance writes. */
  private transient UnreadSlot replaced;

  private record Copy(String slot, long madeAt, UnreadSlot unread) {
    Copy(String slot, long madeAt) {
      this(slot, madeAt, new UnreadSlot(slot));
    }
  }

  /**
   * @param source the source of truth, on the slot this instance reads
   * @param configured the slot name configured ({@code --slot}), which copies are named after
   * @param retention how long a copy waits for an instance to adopt it
   * @param unreadTimeout how long a slot must stay unread before it is taken for no one's: longer
   *     than a restart of the instance that reads it
   * @param replaces the slot of the instance this one replaces, or null ({@link Start#replaces})
   */
  public SavepointSlots(FenceSourceOptions source, String configured, Duration retention, Duration unreadTimeout,
      String replaces) {
    this.source = source;
    this.configured = configured;
    this.retentionMs = retention.toMillis();
    this.unreadTimeoutMs = unreadTimeout.toMillis();
    this.replaces = replaces;
  }

  /** The slot copied at savepoint {@code checkpointId} of an instance configured with {@code configured}. */
  public static String copyName(String configured, long checkpointId) {
    return configured + "_" + checkpointId;
  }

  /**
   * How an instance configured with slot {@code configured} starts when restored from {@code
   * restored} (null for a fresh start).
   */
  public static Start start(String configured, CheckpointMetadata restored) {
    if (restored == null) {
      return new Start(configured, false, null);
    }
    String taken = null;
    String slot = null;
    for (String entry : SavepointFiles.listState(restored, Uids.HANDOVER, STATE, true)) {
      String[] parts = entry.split(" ");
      if (parts[0].equals("taken")) {
        taken = parts[1];
        slot = parts[2];
      }
    }
    if (taken == null) {
      // Taken without slots per savepoint, or by an earlier release: the configured slot, as before.
      return new Start(configured, false, null);
    }
    return Taken.valueOf(taken) == Taken.SAVEPOINT
        ? new Start(copyName(configured, restored.getCheckpointId()), true, slot)
        : new Start(slot, false, null);
  }

  /** Takes back what the last snapshot recorded: the copies still waiting, but for this instance's own slot. */
  void restore(Iterable<String> entries) {
    pending = new ArrayList<>();
    for (String entry : entries) {
      String[] parts = entry.split(" ");
      if (parts[0].equals("copy") && !parts[1].equals(source.slotName())
          && pending.stream().noneMatch(c -> c.slot().equals(parts[1]))) {
        pending.add(new Copy(parts[1], Long.parseLong(parts[2])));
      }
    }
  }

  /**
   * At a snapshot of subtask 0: copies the slot if it is a savepoint without a stop, and returns
   * the record the snapshot keeps. A copy that fails is said in the log, and the savepoint stays
   * good: the instance restored from it reads a new slot, which the gap check proves or rebuilds.
   */
  List<String> snapshot(long checkpointId, SnapshotType type, long now) {
    if (pending == null) {
      restore(List.of());
    }
    Taken taken = Taken.of(type);
    if (taken == Taken.SAVEPOINT) {
      String copy = copyName(configured, checkpointId);
      try (Connection db = SourceOfTruth.connect(source, "geofence savepoint slots")) {
        // A copy of this name left by another line of savepoints (a restore from an older one) is no one's.
        if (ReplicationSlots.isRead(db, copy).filter(read -> !read).isPresent()) {
          drop(db, copy);
        }
        ReplicationSlots.copy(db, source.slotName(), copy);
        pending.removeIf(c -> c.slot().equals(copy));
        pending.add(new Copy(copy, now));
        LOG.info("Savepoint {}: copied the replication slot {} into {}, for the instance restored from this savepoint",
            checkpointId, source.slotName(), copy);
      } catch (SQLException | RuntimeException e) {
        LOG.warn("Savepoint {}: the replication slot {} could not be copied into {} ({}): an instance restored from this"
            + " savepoint reads a new slot, which the gap check proves or rebuilds", checkpointId, source.slotName(), copy,
            e.getMessage());
      }
    }
    List<String> record = new ArrayList<>();
    record.add("taken " + taken.name() + " " + source.slotName());
    pending.forEach(c -> record.add("copy " + c.slot() + " " + c.madeAt()));
    return record;
  }

  /**
   * Now and then on subtask 0, by what this instance is: while it writes the outputs (no handover
   * under way), drops each copy it made once the retention is over and no instance has read it for
   * a while (none was restored from that savepoint, or the one that was is gone), and the slot of
   * the instance it replaced once that one has not read it for a while (it is gone). Once it hands
   * the outputs over, one of its copies is the next writer's slot: it lets go of them all.
   */
  void tidy(boolean writes, boolean handsOver, long now) {
    if (pending == null) {
      restore(List.of());
    }
    if (handsOver) {
      pending.clear();
    }
    boolean pendingDue = writes && pending.stream().anyMatch(c -> now - c.madeAt() >= retentionMs);
    boolean replacedDue = writes && replaces != null && (replaced == null || !replaced.gone);
    if (!pendingDue && !replacedDue) {
      return;
    }
    try (Connection db = SourceOfTruth.connect(source, "geofence savepoint slots")) {
      for (Copy copy : List.copyOf(pending)) {
        if (now - copy.madeAt() < retentionMs) {
          continue;
        }
        if (copy.unread().dropIfUnreadFor(db, now, unreadTimeoutMs)) {
          LOG.info("Dropped the replication slot {}, copied at a savepoint {} s ago: no instance restored from that savepoint"
              + " reads it", copy.slot(), (now - copy.madeAt()) / 1000);
        }
        if (copy.unread().gone) {
          pending.remove(copy);
        }
      }
      if (replacedDue) {
        replaced = replaced == null ? new UnreadSlot(replaces) : replaced;
        if (replaced.dropIfUnreadFor(db, now, unreadTimeoutMs)) {
          LOG.info("Dropped the replication slot {} of the instance this one replaced: unread for {} s", replaces,
              unreadTimeoutMs / 1000);
        }
      }
    } catch (SQLException | RuntimeException e) {
      LOG.warn("Tidying the replication slots of savepoints failed, trying again later: {}", e.getMessage());
    }
  }

  /**
   * A slot to drop once no instance has read it for the unread timeout: seen unread at two
   * looks that far apart, with no reader seen between them, so that an instance that restarts
   * (and lets go of its slot for a moment) keeps it.
   */
  private static final class UnreadSlot {
    final String slot;
    long unreadSince = -1;
    boolean gone;

    UnreadSlot(String slot) {
      this.slot = slot;
    }

    /** True if it dropped the slot now; {@link #gone} once it is dropped or missing. */
    boolean dropIfUnreadFor(Connection db, long now, long timeoutMs) throws SQLException {
      Optional<Boolean> read = ReplicationSlots.isRead(db, slot);
      if (read.isEmpty()) {
        gone = true;
      } else if (read.get()) {
        unreadSince = -1;
      } else if (unreadSince < 0) {
        unreadSince = now;
      } else if (now - unreadSince >= timeoutMs) {
        gone = drop(db, slot);
        unreadSince = gone ? unreadSince : -1;
        return gone;
      }
      return false;
    }
  }

  /** Drops {@code slot} unless an instance took it up meanwhile; true if it did. */
  private static boolean drop(Connection db, String slot) throws SQLException {
    try {
      return ReplicationSlots.dropIfUnused(db, slot);
    } catch (IllegalStateException readMeanwhile) {
      return false;
    }
  }
}
