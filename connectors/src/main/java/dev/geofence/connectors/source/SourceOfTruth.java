package dev.geofence.connectors.source;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceDecoder;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.state.edit.HeldFences;
import dev.geofence.state.readiness.GapCheck;
import dev.geofence.state.readiness.SlotState;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The fence index's one way to its source of truth (design: "Start, restore and readiness"): the
 * gap check of a restore, a read of a subtask's buckets (a fresh start's, a rebuild's, a re-read's
 * of some, a catch-up's of what changed), and the drop of a slot whose WAL is lost. Each step runs
 * on a thread of its own, with connect and socket timeouts, so that the task goes on taking
 * checkpoints and applying the stream while the database answers (or does not), and decodes the
 * geometries it reads there too. What a step finds is handed to the task's thread through {@link
 * TaskThread} (Flink's mailbox) as it comes: a read's rows in batches, at most {@link
 * #BATCHES_AHEAD} ahead of the task, so that a slow task slows the read rather than filling the
 * heap.
 *
 * <p>One step at a time: the task's thread starts a step and is told its outcome; not thread-safe
 * apart from that hand-over.
 */
public final class SourceOfTruth implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(SourceOfTruth.class);

  /** How long connecting may take, and how long one read may wait for the server, in seconds. */
  public static final int CONNECT_TIMEOUT_S = 10;
  public static final int SOCKET_TIMEOUT_S = 120;

  /** Rows handed to the task at a time. */
  static final int BATCH = 2_000;
  /** Batches handed over and not yet taken before a read waits for the task. */
  static final int BATCHES_AHEAD = 4;

  private static final long SLOT_POLL_MS = 200;
  private static final long SLOT_WAIT_NOTICE_MS = 30_000;

  /** Runs an action on the task's thread, after what it is doing now (Flink's mailbox). */
  public interface TaskThread {
    void execute(Action action, String description);
  }

  /** Work for the task's thread. */
  public interface Action {
    void run() throws Exception;
  }

  /** A row a read found, its geometry decoded on the read's thread. */
  public record Row(FenceChange change, FenceDecoder.Decoded decoded) {}

  /** The gap check's verdict, with the catch-up target when the stream can cover the restore. */
  public record Verdict(SlotState slot, GapCheck.Result result, SlotProbe.CatchUpTarget target) {}

  /** What the task's thread does with a step's outcomes, each called there, in order. */
  public interface Outcomes {
    void checked(Verdict verdict) throws Exception;

    /** Rows of the read under way, in the order read. */
    void rows(List<Row> rows) throws Exception;

    /** The read is complete: every row of it was handed over before. */
    void read(BucketRead.Result result) throws Exception;

    /** The read of what changed is complete: every row of it was handed over before. */
    void readChanged(ChangedRead.Result result) throws Exception;

    /** The database could not be used; the step is to be tried again. */
    void unreachable(String reason) throws Exception;
  }

  private final FenceSourceOptions source;
  private final FenceDecoder decoder;
  private final int maxParallelism;
  private final int keyGroupStart;
  private final int keyGroupEnd;
  private final TaskThread task;
  private final Outcomes outcomes;
  private final ExecutorService thread;
  private final Semaphore ahead = new Semaphore(BATCHES_AHEAD);
  /** Whether a step is under way: the task's thread's own. */
  private boolean busy;

  public SourceOfTruth(FenceSourceOptions source, FenceDecoder decoder, int maxParallelism, int keyGroupStart, int keyGroupEnd,
      TaskThread task, Outcomes outcomes, String threadName) {
    this.source = source;
    this.decoder = decoder;
    this.maxParallelism = maxParallelism;
    this.keyGroupStart = keyGroupStart;
    this.keyGroupEnd = keyGroupEnd;
    this.task = task;
    this.outcomes = outcomes;
    this.thread = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, threadName);
      t.setDaemon(true);
      return t;
    });
  }

  /** Whether a step is under way (its last outcome not handed over yet). */
  public boolean busy() {
    return busy;
  }

  /** Reads the slot and, if the stream can cover {@code restoredLsn}, the catch-up target. */
  public void checkGap(long restoredLsn) {
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
      Verdict verdict = new Verdict(slot, result, target);
      return () -> outcomes.checked(verdict);
    });
  }

  /** Reads all of the subtask's buckets in one consistent read (a rebuild). */
  public void readAll() {
    start(db -> read(db, null));
  }

  /** Reads only {@code buckets}, as {@link #readAll} reads them all: a bucket that no longer matches is healed on its own. */
  public void reread(int[] buckets) {
    start(db -> read(db, buckets));
  }

  /**
   * Reads what changed in the subtask's buckets since {@code held} (its live fences and their
   * seqs as of now), comparing only the rows written since {@code horizon} (the
   * restored state's transaction horizon; 0 for none): the catch-up by read; or, if {@code whole},
   * the catch-up's load, every fence of the subtask's buckets read whole, for a subtask that set its
   * fences aside ({@link ChangedRead}).
   */
  public void readChanged(HeldFences held, long horizon, boolean whole) {
    start(db -> inBatches(rows -> ChangedRead.read(db, source.columns(), maxParallelism, keyGroupStart, keyGroupEnd, held, horizon,
        whole, rows), result -> () -> outcomes.readChanged(result)));
  }

  /**
   * A fresh start's read: once the job's replication slot exists (the CDC source creates it when it
   * first streams), reads the subtask's buckets as {@link #readAll} does. The slot comes first
   * because it holds every change committed after its creation: the stream then redelivers what
   * the read saw (older by seq, ignored) and nothing after the read is lost.
   */
  public void initialRead() {
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
        Thread.sleep(SLOT_POLL_MS);
      }
      return read(db, null);
    });
  }

  private Action read(Connection db, int[] buckets) throws SQLException, InterruptedException {
    return inBatches(rows -> buckets == null
            ? BucketRead.read(db, source.columns(), maxParallelism, keyGroupStart, keyGroupEnd, rows)
            : BucketRead.readBuckets(db, source.columns(), buckets, rows),
        result -> () -> outcomes.read(result));
  }

  /** A read of the source that hands each row to {@code rows} as it reads it. */
  private interface Read<R> {
    R run(Consumer<FenceChange> rows) throws SQLException, InterruptedException;
  }

  /**
   * Runs {@code read}, its rows decoded here and handed to the task's thread in batches; returns
   * what the task's thread does once the last batch is handed over.
   */
  private <R> Action inBatches(Read<R> read, Function<R, Action> outcome) throws SQLException, InterruptedException {
    List<Row> batch = new ArrayList<>(BATCH);
    R result;
    try {
      result = read.run(change -> {
        batch.add(new Row(change, decoder.decode(change)));
        if (batch.size() == BATCH) {
          handOver(batch);
        }
      });
    } catch (Interrupted e) {
      throw new InterruptedException();
    }
    handOver(batch);
    return outcome.apply(result);
  }

  /** Hands the rows so far to the task's thread, waiting while it is {@link #BATCHES_AHEAD} behind. */
  private void handOver(List<Row> batch) {
    if (batch.isEmpty()) {
      return;
    }
    List<Row> rows = List.copyOf(batch);
    batch.clear();
    try {
      ahead.acquire();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new Interrupted();
    }
    task.execute(() -> {
      try {
        outcomes.rows(rows);
      } finally {
        ahead.release();
      }
    }, "rows read from the source of truth");
  }

  /** A step's work, on the step's thread: returns what the task's thread does with its outcome. */
  private interface Step {
    Action run(Connection db) throws SQLException, InterruptedException;
  }

  private void start(Step step) {
    if (busy) {
      throw new IllegalStateException("a step against the source of truth is under way");
    }
    busy = true;
    thread.execute(() -> {
      Action last;
      try (Connection db = connect(source, "geofence warm-up")) {
        last = step.run(db);
      } catch (SQLException e) {
        String reason = e.getMessage();
        last = () -> outcomes.unreachable(reason);
      } catch (InterruptedException | Interrupted e) {
        return; // closed while running
      } catch (RuntimeException | Error e) {
        // A fault of the step's own, not the database's: thrown on the task's thread, it fails the
        // task as any of its code's would, where on this one it ended the step with no outcome and
        // left the warm-up waiting for ever.
        task.execute(() -> {
          throw e;
        }, "a step against the source of truth failed");
        return;
      }
      Action outcome = last;
      task.execute(() -> {
        busy = false;
        outcome.run();
      }, "a step against the source of truth ended");
    });
  }

  /** A connection to the source of truth, which gives up on a database that stops answering. */
  public static Connection connect(FenceSourceOptions source, String applicationName) throws SQLException {
    Properties properties = new Properties();
    properties.setProperty("user", source.username());
    properties.setProperty("password", source.password());
    properties.setProperty("connectTimeout", Integer.toString(CONNECT_TIMEOUT_S));
    properties.setProperty("socketTimeout", Integer.toString(SOCKET_TIMEOUT_S));
    properties.setProperty("ApplicationName", applicationName);
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

  /** The step's thread was interrupted (the task closed) while it handed over rows. */
  private static final class Interrupted extends RuntimeException {
    private static final long serialVersionUID = 1L;
  }

  @Override
  public void close() throws InterruptedException {
    thread.shutdownNow();
    thread.awaitTermination(10, TimeUnit.SECONDS);
  }
}
