package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.BucketRead;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.state.readiness.GapCheck;
import dev.geofence.state.readiness.SlotState;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The source-of-truth work of a subtask's warm-up (docs/design.md#start-restore-and-readiness): the gap check on restore, the
 * rebuild of an untrusted index and a fresh start's load, done on a thread of its own (which also
 * decodes the geometries it reads) with connect and socket timeouts,
 * so that the task thread goes on taking checkpoints, applying the stream and holding locations
 * while the database answers (or does not). The task thread starts a step and then takes its
 * results with {@link #poll}; a rebuild's rows come through a bounded queue, so a slow task thread
 * slows the read rather than filling the heap.
 *
 * <p>One step at a time; not thread-safe apart from that hand-over.
 */
final class Recovery implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(FenceIndexOperator.class);

  /** How long connecting may take, and how long one read may wait for the server, in seconds. */
  static final int CONNECT_TIMEOUT_S = 10;
  static final int SOCKET_TIMEOUT_S = 120;

  private static final long SLOT_POLL_MS = 200;
  private static final long SLOT_WAIT_NOTICE_MS = 30_000;

  /** What a step yields, in order: rows of a rebuild, then exactly one of the others. */
  sealed interface Outcome {}

  /** The gap check's verdict, with the catch-up target when the stream can cover the restore. */
  record Checked(SlotState slot, GapCheck.Result result, SlotProbe.CatchUpTarget target) implements Outcome {}

  /** A row the read delivered, its geometry decoded on the recovery's thread. */
  record Row(FenceChange change, FenceDecoder.Decoded decoded) implements Outcome {}

  /** The read is complete. */
  record Read(BucketRead.Result result) implements Outcome {}

  /** The database could not be used; the step is to be tried again. */
  record Unreachable(String reason) implements Outcome {}

  private final FenceSourceOptions source;
  private final FenceDecoder decoder;
  private final int maxParallelism;
  private final int keyGroupStart;
  private final int keyGroupEnd;
  private final BlockingQueue<Outcome> outcomes = new ArrayBlockingQueue<>(4096);
  private final ExecutorService thread;
  /** Steps started whose last outcome the task thread has not taken yet (the task thread's own). */
  private int inFlight;

  Recovery(FenceSourceOptions source, FenceDecoder decoder, int maxParallelism, int keyGroupStart, int keyGroupEnd, String threadName) {
    this.source = source;
    this.decoder = decoder;
    this.maxParallelism = maxParallelism;
    this.keyGroupStart = keyGroupStart;
    this.keyGroupEnd = keyGroupEnd;
    this.thread = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, threadName);
      t.setDaemon(true);
      return t;
    });
  }

  /** Whether a step is under way (its last outcome not taken yet). */
  boolean running() {
    return inFlight > 0;
  }

  /** Reads the slot and, if the stream can cover {@code restoredLsn}, the catch-up target. */
  void checkGap(long restoredLsn) {
    start(db -> {
      SlotState slot = SlotProbe.read(db, source.slotName());
      // State checkpointed before the first stream record (during the initial snapshot) has no
      // position of its own: only the slot's existence and WAL are in question.
      long from = restoredLsn == 0 && slot.exists() ? slot.confirmedFlushLsn() : restoredLsn;
      GapCheck.Result result = GapCheck.check(slot, from);
      SlotProbe.CatchUpTarget target = result.covered() || result.slotAhead()
          ? SlotProbe.catchUpTarget(db, source.columns(), maxParallelism, keyGroupStart, keyGroupEnd) : null;
      if (target == null && slot.exists() && "lost".equals(slot.walStatus())) {
        dropLostSlot(db);
      }
      return new Checked(slot, result, target);
    });
  }

  /** Reads this subtask's buckets of the source in one consistent read, row by row. */
  void rebuild() {
    start(this::read);
  }

  /**
   * Reads only {@code buckets} of the source, as {@link #rebuild} reads them all: a bucket that no
   * longer matches the source is healed on its own.
   */
  void reread(int[] buckets) {
    start(db -> new Read(BucketRead.readBuckets(db, source.columns(), buckets, change -> put(new Row(change, decoder.decode(change))))));
  }

  /**
   * A fresh start's load: once the job's replication slot exists (the CDC source creates it when
   * it first streams), reads this subtask's buckets as {@link #rebuild} does. The slot comes first
   * because it holds every change committed after its creation: the stream then redelivers what
   * the read saw (older by seq, ignored) and nothing after the read is lost.
   */
  void initialRead() {
    start(db -> {
      long waitingSince = System.currentTimeMillis();
      boolean said = false;
      for (SlotState slot = SlotProbe.read(db, source.slotName()); !slot.exists() || "lost".equals(slot.walStatus());
          slot = SlotProbe.read(db, source.slotName())) {
        if (slot.exists()) {
          dropLostSlot(db);
        }
        if (!said && System.currentTimeMillis() - waitingSince > SLOT_WAIT_NOTICE_MS) {
          LOG.info("Waiting for the CDC source to create the replication slot {} before reading the fences", source.slotName());
          said = true;
        }
        pause(SLOT_POLL_MS);
      }
      return read(db);
    });
  }

  private Outcome read(Connection db) throws SQLException {
    return new Read(BucketRead.read(db, source.columns(), maxParallelism, keyGroupStart, keyGroupEnd,
        change -> put(new Row(change, decoder.decode(change)))));
  }

  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedStep();
    }
  }

  /** Up to {@code max} outcomes of the step under way, oldest first (none if it has none ready). */
  List<Outcome> poll(int max) {
    List<Outcome> taken = new ArrayList<>(Math.min(max, outcomes.size()));
    outcomes.drainTo(taken, max);
    for (Outcome outcome : taken) {
      if (!(outcome instanceof Row)) {
        inFlight--;
      }
    }
    return taken;
  }

  /** A step's work: rows it puts as it goes, its last outcome it returns. */
  private interface Step {
    Outcome run(Connection db) throws SQLException;
  }

  private void start(Step step) {
    if (inFlight > 0) {
      throw new IllegalStateException("a recovery step is under way");
    }
    inFlight++;
    thread.execute(() -> {
      Outcome last;
      try (Connection db = connect()) {
        last = step.run(db);
      } catch (SQLException e) {
        last = new Unreachable(e.getMessage());
      } catch (InterruptedStep e) {
        return; // closed while running
      }
      try {
        put(last);
      } catch (InterruptedStep e) {
        // closed before the task thread took it
      }
    });
  }

  private Connection connect() throws SQLException {
    Properties properties = new Properties();
    properties.setProperty("user", source.username());
    properties.setProperty("password", source.password());
    properties.setProperty("connectTimeout", Integer.toString(CONNECT_TIMEOUT_S));
    properties.setProperty("socketTimeout", Integer.toString(SOCKET_TIMEOUT_S));
    properties.setProperty("ApplicationName", "geofence recovery");
    return DriverManager.getConnection(source.jdbcUrl(), properties);
  }

  private void dropLostSlot(Connection db) throws SQLException {
    // A slot whose WAL is gone can never stream again: dropped, the CDC source creates it anew.
    try (PreparedStatement drop = db.prepareStatement(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ? AND wal_status = 'lost' AND NOT active")) {
      drop.setString(1, source.slotName());
      drop.execute();
      LOG.warn("Dropped the replication slot {}, whose WAL was lost, so that the CDC source can create it anew", source.slotName());
    }
  }

  private void put(Outcome outcome) {
    try {
      outcomes.put(outcome);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedStep();
    }
  }

  /** The operator closed while a step ran. */
  private static final class InterruptedStep extends RuntimeException {
    private static final long serialVersionUID = 1L;
  }

  @Override
  public void close() throws InterruptedException {
    thread.shutdownNow();
    thread.awaitTermination(10, TimeUnit.SECONDS);
  }
}
