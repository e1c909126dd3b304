package dev.geofence.job.handover;

import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.sink.Handover;
import dev.geofence.connectors.sink.JdbcOutputs;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.metrics.Counter;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.checkpoint.SnapshotType;
import org.apache.flink.runtime.state.CheckpointStreamFactory;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.OperatorSnapshotFutures;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.OutputTag;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Lets through the triggers this instance of the job writes, and no other (docs/design.md#bluegreen-deploys):
 * while two instances run at once, both compute every trigger, and the {@code geofence_handover}
 * row ({@link Handover}) says which writes which. The writer writes those before its lease,
 * extended as it goes; once a handover is asked for, the lease is frozen as T, the old writer keeps
 * those before T and the next writer writes those from T on. Presence goes out on {@link #PRESENCE}:
 * the next writer holds it, reduced to the last trigger per (object, fence), until every subtask of
 * the old writer has committed its share, so that a late row of the old writer can never move a
 * presence backwards.
 *
 * <p>The old writer's share is whole once its clock is past T by the allowed lateness (no location
 * before T can be admitted after that) and a checkpoint that covers that point has completed (its
 * rows are flushed and its topic transaction committed); it then says so in the row, a subtask at a
 * time, and the next writer takes the outputs over.
 *
 * <p>A standby (an instance started to take over) holds the triggers it computes at or after the
 * writer's lease in its state until it is asked to take over, and drops the rest: the writer's
 * lease only grows until it is frozen, so those below it can never be the standby's.
 */
public final class HandoverGate extends AbstractStreamOperator<GeofenceTrigger>
    implements OneInputStreamOperator<GeofenceTrigger, GeofenceTrigger> {

  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(HandoverGate.class);

  /** The triggers whose presence rows this instance writes. */
  public static final OutputTag<GeofenceTrigger> PRESENCE = new OutputTag<>("presence", TypeInformation.of(GeofenceTrigger.class));

  /**
   * How far past a trigger the writer extends its lease: a statement per this much event time and
   * subtask, and how far a standby may run ahead of the writer before it holds triggers.
   */
  static final long LEASE_AHEAD_MS = 10_000;
  /** How often each subtask reads the row while it runs (and a writer says it runs). */
  static final long POLL_MS = 1_000;
  /** How long a statement on the row may wait for the database. */
  static final long NETWORK_TIMEOUT_MS = 30_000;
  /**
   * How long a writer may stay silent before the instance taking over from it warns, and before an
   * instance restored beside it takes it for gone.
   */
  public static final long SILENT_WRITER_MS = 30_000;
  /** How often subtask 0 tidies the slots of savepoints. */
  static final long TIDY_MS = 5_000;

  /** What this instance writes, by the row (in the order of {@link HandoverMetrics#roleWords}). */
  enum Role {
    /** Every trigger below its lease, which it extends as it goes. */
    WRITER,
    /** Asked to hand over: those before T, until its share is committed. */
    HANDING_OVER,
    /** Started to take over: holds what may become its share. */
    STANDBY,
    /** Asked to take over: those from T on; presence once the old writer is done. */
    TAKING_OVER,
    /** Another instance writes the outputs now. */
    RETIRED
  }

  private final JdbcConnectionOptions sink;
  private final boolean standby;
  private final String resumes;
  private final long allowedLatenessMs;
  private final SavepointSlots slots;

  private transient Connection db;
  private transient String jobName;
  private transient String instance;
  private transient int subtask;
  private transient int parallelism;
  private transient Role role;
  /** The writer's lease: for a writer or next writer its own, for a standby the writer's as last read. */
  private transient long lease;
  /** T: where the old writer's share ends and the next writer's begins. */
  private transient long handoverAt;
  private transient boolean oldWriterDone;
  private transient long clock;
  /** The checkpoint after which this subtask's share before T is committed, or -1. */
  private transient long shareCommittedAfter;
  private transient boolean saidDone;
  private transient boolean saidReady;
  private transient long warnedAt;
  private transient List<GeofenceTrigger> held;
  private transient Map<List<String>, GeofenceTrigger> heldPresence;
  private transient ListState<GeofenceTrigger> heldState;
  private transient ListState<GeofenceTrigger> heldPresenceState;
  private transient Counter leftToOther;
  private transient ListState<String> slotsState;
  private transient SnapshotType snapshotType;
  private transient long tidiedAt;

  /**
   * @param sink the database of the output tables, which holds the handover row
   * @param standby whether this instance starts as the standby of the running writer, rather than
   *     taking the outputs over at once (the classic deploy, from the savepoint of a stopped job)
   * @param resumes the writer, a job that ended, whose seat this instance takes, or null
   * @param allowedLatenessMs the allowed lateness of locations, which bounds how long after T a
   *     trigger before T can still come
   * @param slots the slots per savepoint, or null
   */
  public HandoverGate(JdbcConnectionOptions sink, boolean standby, String resumes, long allowedLatenessMs, SavepointSlots slots) {
    this.sink = sink;
    this.standby = standby;
    this.resumes = resumes;
    this.allowedLatenessMs = allowedLatenessMs;
    this.slots = slots;
    // In the fence index's task, as the sinks were before it: the triggers cross no network.
    setChainingStrategy(ChainingStrategy.ALWAYS);
  }

  @Override
  public void initializeState(StateInitializationContext context) throws Exception {
    super.initializeState(context);
    TypeInformation<GeofenceTrigger> type = TypeInformation.of(GeofenceTrigger.class);
    heldState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("held-triggers", type));
    heldPresenceState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("held-presence", type));
    held = new ArrayList<>();
    heldPresence = new LinkedHashMap<>();
    heldState.get().forEach(held::add);
    heldPresenceState.get().forEach(this::holdPresence);
    slotsState = context.getOperatorStateStore().getUnionListState(SavepointSlots.STATE);
    if (slots != null) {
      slots.restore(slotsState.get());
    }
  }

  @Override
  public void open() throws Exception {
    super.open();
    jobName = getRuntimeContext().getJobInfo().getJobName();
    instance = getRuntimeContext().getJobInfo().getJobId().toString();
    subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
    leftToOther = getMetricGroup().counter(HandoverMetrics.TRIGGERS_LEFT);
    getMetricGroup().gauge(HandoverMetrics.ROLE, () -> role == null ? -1 : role.ordinal());
    clock = Long.MIN_VALUE;
    shareCommittedAfter = -1;
    Handover.Row row = sql(db -> standby
        ? Handover.read(db, jobName).orElseThrow(() -> new IllegalStateException("the standby " + instance
            + " has no writer to take over from: no instance of " + jobName + " keeps a row in geofence_handover"
            + " (start the running one with geofence.handover.enabled)"))
        // Restored from the ended writer's last checkpoint, it goes on where that one's outputs
        // were committed: its share before T, or the writer's seat before any ask.
        : resumes != null ? Handover.resume(db, jobName, resumes, instance, parallelism)
        : Handover.claim(db, jobName, instance, parallelism));
    adopt(row);
    if (role == Role.STANDBY) {
      sql(db -> {
        Handover.registerStandby(db, jobName, instance, parallelism);
        return null;
      });
    }
    schedulePoll();
  }

  @Override
  public void processElement(StreamRecord<GeofenceTrigger> element) throws Exception {
    accept(element.getValue());
  }

  private void accept(GeofenceTrigger t) throws SQLException {
    switch (role) {
      case WRITER, TAKING_OVER -> {
        // For a writer, T is where it took over (none if it took the outputs without a handover).
        if (handoverAt != Handover.NONE && t.eventTime < handoverAt) {
          leftToOther.inc();
          return;
        }
        if (t.eventTime >= lease) {
          long extended = sql(db -> Handover.extend(db, jobName, instance, t.eventTime + LEASE_AHEAD_MS));
          if (extended == Handover.NONE) {
            // A handover was asked for (or finished) meanwhile: decide again by the row as it is.
            adopt(sql(db -> Handover.read(db, jobName).orElseThrow()));
            accept(t);
            return;
          }
          lease = extended;
        }
        write(t);
      }
      case HANDING_OVER -> {
        if (t.eventTime < handoverAt && !saidDone) {
          write(t);
        } else {
          leftToOther.inc();
        }
      }
      case STANDBY -> {
        if (t.eventTime >= lease) {
          held.add(t);
        }
      }
      case RETIRED -> leftToOther.inc();
    }
  }

  private void write(GeofenceTrigger t) {
    output.collect(new StreamRecord<>(t));
    if (role == Role.TAKING_OVER && !oldWriterDone) {
      holdPresence(t);
    } else {
      output.collect(PRESENCE, new StreamRecord<>(t));
    }
  }

  private void holdPresence(GeofenceTrigger t) {
    List<String> key = List.of(t.objectId, t.fenceId);
    // Re-inserted, so that the order of the held rows stays the order of their last triggers.
    heldPresence.remove(key);
    heldPresence.put(key, t);
  }

  /** Takes the role the row gives this instance, and lets go of what it held for it. */
  private void adopt(Handover.Row row) throws SQLException {
    Role before = role;
    if (row.writer().equals(instance)) {
      role = row.nextWriter() == null ? Role.WRITER : Role.HANDING_OVER;
      handoverAt = row.nextWriter() == null ? row.writerSince() : row.handoverAt();
    } else if (instance.equals(row.nextWriter())) {
      role = Role.TAKING_OVER;
      handoverAt = row.handoverAt();
      oldWriterDone = row.writerDone();
    } else {
      role = standby && before != Role.TAKING_OVER && before != Role.WRITER ? Role.STANDBY : Role.RETIRED;
      handoverAt = Handover.NONE;
    }
    lease = row.writesUntil();
    if (role != before) {
      LOG.info("Outputs of {}: subtask {} of {} is {} (T {}, lease {})", jobName, subtask, instance, role, time(handoverAt),
          time(lease));
    }
    if (role == Role.WRITER || (role == Role.TAKING_OVER && oldWriterDone)) {
      oldWriterDone = true;
      List<GeofenceTrigger> presence = new ArrayList<>(heldPresence.values());
      heldPresence.clear();
      presence.forEach(t -> output.collect(PRESENCE, new StreamRecord<>(t)));
    }
    if (role == Role.STANDBY) {
      held.removeIf(t -> t.eventTime < lease);
    } else if (!held.isEmpty()) {
      List<GeofenceTrigger> mine = new ArrayList<>(held);
      held.clear();
      if (role == Role.TAKING_OVER || role == Role.WRITER) {
        for (GeofenceTrigger t : mine) {
          accept(t);
        }
      }
    }
  }

  private void schedulePoll() {
    getProcessingTimeService().registerTimer(getProcessingTimeService().getCurrentProcessingTime() + POLL_MS, now -> {
      poll();
      schedulePoll();
    });
  }

  private void poll() throws SQLException {
    Handover.Row row = sql(db -> Handover.read(db, jobName).orElseThrow());
    adopt(row);
    long now = System.currentTimeMillis();
    if (slots != null && subtask == 0 && now - tidiedAt >= TIDY_MS) {
      tidiedAt = now;
      slots.tidy(role == Role.WRITER, role == Role.HANDING_OVER || role == Role.RETIRED, now);
    }
    switch (role) {
      case WRITER, HANDING_OVER -> {
        sql(db -> {
          Handover.seen(db, jobName, instance);
          return null;
        });
        // A lease ahead of the clock even while no trigger comes, so that a handover can be asked for.
        if (role == Role.WRITER && clock != Long.MIN_VALUE && clock + LEASE_AHEAD_MS / 2 >= lease) {
          long extended = sql(db -> Handover.extend(db, jobName, instance, clock + LEASE_AHEAD_MS));
          lease = extended == Handover.NONE ? lease : extended;
        }
      }
      case STANDBY -> {
        if (instance.equals(row.standby()) && row.standbyReady()) {
          try {
            long t = sql(db -> Handover.ask(db, jobName, row.writer(), instance));
            LOG.info("Outputs of {}: every subtask of the standby {} is ready; asked {} to hand over at T {}", jobName, instance,
                row.writer(), time(t));
          } catch (IllegalStateException e) {
            // Another subtask asked first, or the writer has no clock yet: the row says which next time.
            LOG.debug("Outputs of {}: {}", jobName, e.getMessage());
          }
          adopt(sql(db -> Handover.read(db, jobName).orElseThrow()));
        }
      }
      case TAKING_OVER -> {
        if (oldWriterDone) {
          if (sql(db -> Handover.takeOver(db, jobName, instance, parallelism))) {
            adopt(sql(db -> Handover.read(db, jobName).orElseThrow()));
          }
        } else if (row.writerSilentMillis() > SILENT_WRITER_MS && System.currentTimeMillis() - warnedAt > 60_000) {
          warnedAt = System.currentTimeMillis();
          LOG.warn("Outputs of {}: the writer {} has not said it runs for {} s and has not committed its triggers before T {}:"
              + " those it had not committed are missing, and presence waits; restore this job the classic way to take the"
              + " outputs over (docs/operations.md, a handover that does not finish)", jobName, row.writer(),
              row.writerSilentMillis() / 1000, time(handoverAt));
        }
      }
      case RETIRED -> { }
    }
  }

  @Override
  public void processWatermark(Watermark mark) throws Exception {
    clock = mark.getTimestamp();
    // The fence index passes no watermark on until it is ready: the first says this subtask is.
    if (role == Role.STANDBY && !saidReady) {
      sql(db -> {
        Handover.standbyReady(db, jobName, instance, subtask);
        return null;
      });
      saidReady = true;
    }
    super.processWatermark(mark);
  }

  /** Notes whether this snapshot is a checkpoint, a savepoint or a stop, which the state-only call below is not told. */
  @Override
  public OperatorSnapshotFutures snapshotState(long checkpointId, long timestamp, CheckpointOptions checkpointOptions,
      CheckpointStreamFactory factory) throws Exception {
    snapshotType = checkpointOptions.getCheckpointType();
    return super.snapshotState(checkpointId, timestamp, checkpointOptions, factory);
  }

  @Override
  public void snapshotState(StateSnapshotContext context) throws Exception {
    super.snapshotState(context);
    slotsState.update(slots != null && subtask == 0 && snapshotType != null
        ? slots.snapshot(context.getCheckpointId(), snapshotType, System.currentTimeMillis()) : List.of());
    heldState.update(held);
    heldPresenceState.update(new ArrayList<>(heldPresence.values()));
    // Every trigger before T this subtask will ever get has come once its clock is past T by the
    // allowed lateness: the fence index evaluates an on-time location before it lets the clock pass
    // it, and refuses one later than the lateness.
    if (role == Role.HANDING_OVER && shareCommittedAfter < 0 && clock != Long.MIN_VALUE
        && clock - allowedLatenessMs >= handoverAt) {
      shareCommittedAfter = context.getCheckpointId();
    }
  }

  @Override
  public void notifyCheckpointComplete(long checkpointId) throws Exception {
    super.notifyCheckpointComplete(checkpointId);
    // One checkpoint later than the one that covers the share: the topic's committer commits a
    // checkpoint's transaction when it hears of that checkpoint, which may be after this operator.
    if (role == Role.HANDING_OVER && shareCommittedAfter >= 0 && checkpointId > shareCommittedAfter && !saidDone) {
      sql(db -> {
        Handover.markDone(db, jobName, instance, subtask);
        return null;
      });
      saidDone = true;
      LOG.info("Outputs of {}: subtask {} of {} committed every trigger before T {}", jobName, subtask, instance,
          time(handoverAt));
    }
  }

  @Override
  public void close() throws Exception {
    closeConnection();
    super.close();
  }

  private interface Call<T> {
    T on(Connection db) throws SQLException;
  }

  /** Runs {@code call}, once more on a new connection if the first fails. */
  private <T> T sql(Call<T> call) throws SQLException {
    for (int attempt = 0; ; attempt++) {
      try {
        return call.on(connection());
      } catch (SQLException e) {
        closeConnection();
        if (attempt >= 1) {
          throw e;
        }
        LOG.warn("Reading or writing geofence_handover failed, trying again on a new connection: {}", e.getMessage());
      }
    }
  }

  private Connection connection() throws SQLException {
    if (db == null) {
      db = JdbcOutputs.connect(sink);
      // A database that stops answering fails the statement, and so the task, instead of holding
      // the task's thread for good.
      db.setNetworkTimeout(Runnable::run, (int) NETWORK_TIMEOUT_MS);
    }
    return db;
  }

  private void closeConnection() {
    if (db != null) {
      try {
        db.close();
      } catch (SQLException e) {
        LOG.debug("Closing the handover connection", e);
      }
      db = null;
    }
  }

  private static String time(long millis) {
    return millis == Handover.NONE ? "none" : Instant.ofEpochMilli(millis).toString();
  }
}
