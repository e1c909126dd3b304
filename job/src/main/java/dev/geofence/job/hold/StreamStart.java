package dev.geofence.job.hold;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.state.readiness.Lsn;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.IntConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * When the change stream starts, and where (docs/design.md#catch-up): the fence source holds its
 * split until every subtask of the fence index has said where it needs the stream from ({@link
 * StreamStartEvent}). If every one caught up by reading what changed, each at a position its read
 * was paired with, the job's slot is moved to the least of them first, so that PostgreSQL streams
 * from there and the edits the reads already hold are never decoded again; if any one needs the
 * stream from its restored position (a replay, a fresh start, a rebuild), the slot is left where it
 * is. Then the gate opens, once for the job's life: a failover later streams from wherever its
 * checkpoint says, as always.
 *
 * <p>A subtask that reads or loads waits to begin until it is told the slot is ready ({@link
 * SlotReadyEvent}). Once every subtask has said it reads or loads, the slot is created anew at the
 * head of the WAL first, as it was (its plugin and options), instead of being moved over the
 * backlog: a move decodes the WAL from the slot's restart position, which after a day's edits at
 * 1.2 M fences cost PostgreSQL about 8 CPU-seconds and the restore 4.9 s of its 34.4 s
 * (docs/performance/journal.md, "2026-12-06: the slot created anew by the job"). The reads begin
 * after it, so each is paired with a position at or after the new slot's, and the move after them
 * decodes only what was written while they read. If any subtask replays or rebuilds, the readers
 * are told as soon as it says so; if the slot is not there or in use, once that is found; if a
 * transaction that was running when they all said so is still running {@link #RUNNING_WAIT} later,
 * once that is found: the slot is then only moved.
 *
 * <p>A slot's move keeps its restart position near where it was (a slot keeps one candidate
 * restart position at a time): after a single move, the stream decoded the whole backlog again
 * before it sent anything (10.8 s after a day's edits at 1.2 M fences). So each move is made twice,
 * the second bringing the restart position up to the last one before the target.
 *
 * <p>Part of the fence index's coordinator; its methods run on the coordinator's thread, the slot's
 * creation and moves on a thread of its own (the database may be slow to answer).
 */
final class StreamStart implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(StreamStart.class);
  /** SQLSTATE of a slot's creation under a name that exists. */
  private static final String DUPLICATE_OBJECT = "42710";
  /** How long to wait before trying again to create the slot anew. */
  private static final long RETRY_MS = 2_000;
  /**
   * How long the transactions running when every subtask said it reads may take to end before the
   * slot is kept instead (a creation would wait for them, the reads with it): about what the move
   * over a day's backlog at 1.2 M fences costs the restore instead (4.9 s, the class comment).
   */
  static final Duration RUNNING_WAIT = Duration.ofSeconds(5);
  /** How often the transactions running are looked at while they are waited for. */
  private static final long RUNNING_POLL_MS = 100;

  private final String token;
  /** The source of truth whose slot is moved, or null (tests without one): then nothing is moved. */
  private final FenceSourceOptions source;
  /** Tells a subtask that reads or loads that the slot is ready for it to begin. */
  private final IntConsumer slotReady;
  private final Duration runningWait;
  private final ExecutorService mover;
  /** Per subtask, where it needs the stream from: -1 not said yet, 0 from the restored position. */
  private long[] from = new long[0];
  /**
   * Per subtask, whether it said it reads or loads. Told more than once that the slot is ready, a
   * subtask takes no step twice: so telling every one of them again costs nothing.
   */
  private boolean[] reading = new boolean[0];
  /** Whether the slot's creation anew has begun (once: then whether it has ended). */
  private boolean creating;
  private boolean created;

  StreamStart(String token, FenceSourceOptions source, IntConsumer slotReady) {
    this(token, source, slotReady, RUNNING_WAIT);
  }

  /** With {@code runningWait} in place of {@link #RUNNING_WAIT} (tests). */
  StreamStart(String token, FenceSourceOptions source, IntConsumer slotReady, Duration runningWait) {
    this.token = token;
    this.source = source;
    this.slotReady = slotReady;
    this.runningWait = runningWait;
    this.mover = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "geofence-stream-start");
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Subtask {@code subtask} of {@code parallelism} reads or loads: it is told that the slot is ready
   * once every subtask has said what it does, after the slot is created anew if every one reads or
   * loads; at once if one replays or rebuilds, or the slot was created anew already, or the stream
   * runs (a failover).
   */
  synchronized void reading(int subtask, int parallelism) {
    if (StreamGate.of(token).isOpen() || source == null) {
      slotReady.accept(subtask);
      return;
    }
    size(parallelism);
    reading[subtask] = true;
    if (created || (!creating && Arrays.stream(from).anyMatch(f -> f == 0))) {
      slotReady.accept(subtask);
      return;
    }
    if (creating) {
      return;
    }
    for (int i = 0; i < reading.length; i++) {
      if (!reading[i]) {
        return;
      }
    }
    creating = true;
    mover.execute(() -> {
      createAnew();
      synchronized (this) {
        created = true;
        tellReaders();
      }
    });
  }

  /** Subtask {@code subtask} of {@code parallelism} needs the stream from {@code streamFrom} (0: its restored position). */
  synchronized void reported(int subtask, int parallelism, long streamFrom) {
    if (StreamGate.of(token).isOpen()) {
      return;
    }
    size(parallelism);
    from[subtask] = streamFrom;
    if (streamFrom == 0 && !creating) {
      // The slot stays: whoever waits for it reads from it as it is.
      tellReaders();
    }
    if (Arrays.stream(from).anyMatch(f -> f < 0)) {
      return;
    }
    long least = least(from);
    if (least == 0 || source == null) {
      LOG.info("Every subtask of the fence index is ready for the change stream; it starts where the CDC source resumes");
      StreamGate.of(token).open();
      return;
    }
    long[] positions = from.clone();
    // Opened once the slot has moved, or not: a stream from the slot's old position is only longer.
    mover.execute(() -> {
      moveSlot(least, positions);
      StreamGate.of(token).open();
    });
  }

  /** Tells every subtask that said it reads or loads that the slot is ready. */
  private void tellReaders() {
    for (int i = 0; i < reading.length; i++) {
      if (reading[i]) {
        slotReady.accept(i);
      }
    }
  }

  private void size(int parallelism) {
    if (from.length != parallelism) {
      from = new long[parallelism];
      Arrays.fill(from, -1);
      reading = new boolean[parallelism];
    }
  }

  private static long least(long[] positions) {
    return Arrays.stream(positions).reduce((a, b) -> Long.compareUnsigned(a, b) <= 0 ? a : b).orElse(0);
  }

  /** A subtask failed or was reset before the stream started: it says again. */
  synchronized void reset(int subtask) {
    if (subtask < from.length) {
      from[subtask] = -1;
      reading[subtask] = false;
    }
  }

  /**
   * Drops the slot and creates it again at the head of the WAL, with its plugin and options (see
   * the class comment), if it exists, nobody reads it and the transactions running now end within
   * {@link #runningWait}; a slot that cannot be is left as it is. Once dropped, it is created again
   * however long that takes (a creation waits for the transactions running at the time to end,
   * here only those begun since the wait), since the reads that wait for it must be paired with
   * positions the stream will start from.
   */
  private void createAnew() {
    Slot slot;
    try (Connection db = SourceOfTruth.connect(source, "geofence stream start");
        PreparedStatement drop = db.prepareStatement("SELECT pg_drop_replication_slot(?)")) {
      slot = unused(db);
      if (slot == null) {
        LOG.info("Every subtask of the fence index reads or loads; the slot {} is not there or in use, and is not created anew",
            source.slotName());
        return;
      }
      String running = stillRunning(db);
      if (running != null) {
        LOG.warn("Every subtask of the fence index reads or loads, but transaction {} of the fence database was still running {} ms"
            + " later (pg_locks.transactionid, pg_stat_activity.backend_xid); the slot {} is not created anew, which would wait for it: the reads begin,"
            + " and the slot is moved after them", running, runningWait.toMillis(), source.slotName());
        return;
      }
      drop.setString(1, source.slotName());
      drop.execute();
    } catch (SQLException e) {
      LOG.warn("Could not drop the slot {} to create it anew before the fence index's reads ({}): they begin, and the slot is moved"
          + " after them", source.slotName(), e.getMessage());
      return;
    } catch (InterruptedException closed) {
      // The coordinator closes (the job stops or fails over): the slot stays as it was.
      Thread.currentThread().interrupt();
      return;
    }
    // Named, as only the servers that have them know them (two_phase from PostgreSQL 14, failover 17).
    String create = "SELECT lsn::text FROM pg_create_logical_replication_slot(?, ?" + (slot.twoPhase() ? ", twophase => true" : "")
        + (slot.failover() ? ", failover => true" : "") + ")";
    while (!Thread.currentThread().isInterrupted()) {
      try (Connection db = SourceOfTruth.connect(source, "geofence stream start"); PreparedStatement created = db.prepareStatement(create)) {
        created.setString(1, source.slotName());
        created.setString(2, slot.plugin());
        try (ResultSet r = created.executeQuery()) {
          r.next();
          LOG.info("Every subtask of the fence index reads or loads: the slot {} was created anew at {} (it was at {}), so that"
              + " PostgreSQL does not decode the backlog; the reads begin now", source.slotName(), r.getString(1), slot.confirmed());
        }
        return;
      } catch (SQLException e) {
        if (DUPLICATE_OBJECT.equals(e.getSQLState()) && createdMeanwhile()) {
          // An attempt whose answer was lost (a creation outlasting the socket's timeout goes on in
          // its server process) or another client created it, after the drop: at or before the
          // positions the reads will pair with, which is all the reads need of it.
          LOG.info("Every subtask of the fence index reads or loads: the slot {} exists again, created since it was dropped by an"
              + " attempt whose answer was lost or by another client; the reads begin now", source.slotName());
          return;
        }
        LOG.warn("Could not create the slot {} anew ({}): the fence index's reads wait for it; trying again in {} ms", source.slotName(),
            e.getMessage(), RETRY_MS);
      }
      try {
        Thread.sleep(RETRY_MS);
      } catch (InterruptedException closed) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Whether the slot is there, logical, of this database, and no longer in use (its creation over). */
  private boolean createdMeanwhile() {
    try (Connection db = SourceOfTruth.connect(source, "geofence stream start")) {
      return unused(db) != null;
    } catch (SQLException e) {
      return false;
    }
  }

  /** The job's slot, if it is there, logical, of this database and not in use; else null. */
  private Slot unused(Connection db) throws SQLException {
    try (PreparedStatement found = db.prepareStatement("SELECT plugin, confirmed_flush_lsn::text, (to_jsonb(s) ->> 'two_phase')::boolean,"
        + " (to_jsonb(s) ->> 'failover')::boolean FROM pg_replication_slots s WHERE slot_name = ? AND slot_type = 'logical'"
        + " AND database = current_database() AND NOT active")) {
      found.setString(1, source.slotName());
      try (ResultSet r = found.executeQuery()) {
        return r.next() ? new Slot(r.getString(1), r.getString(2), r.getBoolean(3), r.getBoolean(4)) : null;
      }
    }
  }

  /**
   * Waits up to {@link #runningWait} for every transaction running now with a transaction id (in
   * any database of the server: a slot's creation waits for them all) to end; returns the id of one
   * still running then, or null. A transaction holds the lock on its own id until it ends ({@code
   * pg_locks}, which every role may read, unlike other roles' {@code pg_stat_activity} rows).
   */
  private String stillRunning(Connection db) throws SQLException, InterruptedException {
    long deadline = System.nanoTime() + runningWait.toNanos();
    String running = "SELECT %s FROM pg_locks WHERE locktype = 'transactionid' AND mode = 'ExclusiveLock'";
    Array ids;
    try (Statement first = db.createStatement(); ResultSet r = first.executeQuery(running.formatted("array_agg(transactionid::text)"))) {
      r.next();
      ids = r.getArray(1);
    }
    if (ids == null) {
      return null;
    }
    try (PreparedStatement still = db.prepareStatement(running.formatted("min(transactionid::text)") + " AND transactionid::text = ANY(?)")) {
      still.setArray(1, ids);
      while (true) {
        try (ResultSet r = still.executeQuery()) {
          r.next();
          String id = r.getString(1);
          if (id == null || System.nanoTime() >= deadline) {
            return id;
          }
        }
        Thread.sleep(RUNNING_POLL_MS);
      }
    }
  }

  /** What a slot is created anew with, and where it was. */
  private record Slot(String plugin, String confirmed, boolean twoPhase, boolean failover) {}

  /** Moves the slot to {@code to}, twice (see the class comment). */
  private void moveSlot(long to, long[] positions) {
    String advanceIf = "SELECT pg_replication_slot_advance(slot_name, ?::pg_lsn)::text FROM pg_replication_slots"
        + " WHERE slot_name = ? AND NOT active AND confirmed_flush_lsn ";
    try (Connection db = SourceOfTruth.connect(source, "geofence stream start");
        PreparedStatement advance = db.prepareStatement(advanceIf + "< ?::pg_lsn");
        PreparedStatement again = db.prepareStatement(advanceIf + "<= ?::pg_lsn")) {
      // Never past what the server has flushed: PostgreSQL would move it only that far anyway.
      String target = Lsn.format(to);
      try (PreparedStatement flushed = db.prepareStatement("SELECT least(?::pg_lsn, pg_current_wal_flush_lsn())::text")) {
        flushed.setString(1, target);
        try (ResultSet r = flushed.executeQuery()) {
          r.next();
          target = r.getString(1);
        }
      }
      boolean moved = advance(advance, target);
      if (moved) {
        // Again: this one brings the slot's restart position up to the target (the class comment).
        advance(again, target);
      }
      List<String> at = Arrays.stream(positions).mapToObj(Lsn::format).toList();
      LOG.info(moved
          ? "Every subtask of the fence index caught up by reading what changed or loading (at {}): the slot {} moved to {}, from"
              + " where the change stream starts, so the edits the reads hold are not streamed again"
          : "Every subtask of the fence index caught up by reading what changed or loading (at {}): the slot {} was already at {} or"
              + " past it, or in use; the change stream starts where it is", at, source.slotName(), target);
    } catch (SQLException e) {
      LOG.warn("Could not move the slot {} to where the fence index's reads were ({}): the change stream starts where the CDC"
          + " source resumes, and brings again what they hold", source.slotName(), e.getMessage());
    }
  }

  /** Runs a move of the slot to {@code target}; returns whether the slot was in a state to move. */
  private boolean advance(PreparedStatement move, String target) throws SQLException {
    move.setString(1, target);
    move.setString(2, source.slotName());
    move.setString(3, target);
    try (ResultSet r = move.executeQuery()) {
      return r.next();
    }
  }

  @Override
  public void close() {
    mover.shutdownNow();
    StreamGate.release(token);
  }
}
