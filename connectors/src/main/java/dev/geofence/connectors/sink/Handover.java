package dev.geofence.connectors.sink;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.util.Optional;

/**
 * The {@code geofence_handover} row of a job name: which instance of the job writes its outputs,
 * up to which event time, and to whom they are being handed over (docs/design.md#bluegreen-deploys).
 * Each statement is one atomic update whose WHERE clause is the rule it keeps, so that two
 * instances and a deploy command may act on the row at once:
 *
 * <ul>
 *   <li>the writer extends its lease only while no handover is asked for ({@link #extend}), so an
 *       ask ({@link #ask}) freezes the lease, and the writer can never have written a trigger at
 *       or after the frozen lease T; the next writer's lease then grows from T with what it
 *       writes, so that it too is covered when it is asked to hand over in turn;
 *   <li>the next writer becomes the writer only once every subtask of the old one has said it
 *       committed its whole share ({@link #markDone}, {@link #takeOver}).
 * </ul>
 *
 * <p>Times are event times in epoch milliseconds.
 */
public final class Handover {

  /** No time: a lease before the first trigger, or no handover. */
  public static final long NONE = Long.MIN_VALUE;

  /**
   * One job name's row.
   *
   * @param writerSince the T the writer took over at, or {@link #NONE} if it took the outputs
   *     without a handover
   * @param writesUntil the writer's lease, or {@link #NONE} before its first trigger
   * @param nextWriter the instance taking over, or null
   * @param handoverAt the frozen lease T of an asked handover, or {@link #NONE}
   * @param subtasksDone how many of the writer's subtasks committed everything before T
   * @param writerSilentMillis how long ago the writer last said it runs
   * @param standby the instance started to take over, until it asks, or null
   * @param standbyReady whether every subtask of the standby has its index ready
   */
  public record Row(String writer, int writerParallelism, long writerSince, long writesUntil, String nextWriter,
      long handoverAt, int subtasksDone, long writerSilentMillis, String standby, boolean standbyReady) {

    /** Whether every subtask of the writer has committed its share before T. */
    public boolean writerDone() {
      return nextWriter != null && subtasksDone >= writerParallelism;
    }
  }

  private static final String COLUMNS = "writer, writer_parallelism, writer_since, writes_until, next_writer, handover_at,"
      + " cardinality(writer_done), (extract(epoch FROM now() - writer_seen_at) * 1000)::bigint, standby,"
      + " standby IS NOT NULL AND cardinality(standby_ready) >= standby_parallelism";

  private Handover() {}

  /** The row of {@code jobName}, if any instance ever wrote it. */
  public static Optional<Row> read(Connection db, String jobName) throws SQLException {
    try (PreparedStatement s = db.prepareStatement("SELECT " + COLUMNS + " FROM geofence_handover WHERE job_name = ?")) {
      s.setString(1, jobName);
      return row(s);
    }
  }

  /**
   * Makes {@code instance} the writer unless it is already (a failover of the writer keeps the
   * row, a handover asked for included): an instance started the classic way, from a savepoint of
   * a stopped one, takes the outputs over without asking. Returns the row as it is then.
   */
  public static Row claim(Connection db, String jobName, String instance, int parallelism) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "INSERT INTO geofence_handover AS h (job_name, writer, writer_parallelism) VALUES (?, ?, ?)"
            + " ON CONFLICT (job_name) DO UPDATE SET writer = excluded.writer, writer_parallelism = excluded.writer_parallelism,"
            + " writer_since = NULL, writer_seen_at = now(), next_writer = NULL, handover_at = NULL, writer_done = '{}',"
            + " standby = NULL, standby_ready = '{}', updated_at = now() WHERE h.writer <> excluded.writer")) {
      s.setString(1, jobName);
      s.setString(2, instance);
      s.setInt(3, parallelism);
      s.executeUpdate();
    }
    return read(db, jobName).orElseThrow();
  }

  /**
   * Puts {@code instance} in the seat of {@code writer}, a writer that ended (a deploy restores
   * its last checkpoint as {@code instance}): it keeps the handover under way as it is, T and the
   * next writer, and says again which of its subtasks committed their share. Unlike {@link #claim}
   * it takes the outputs from nobody else: once the next writer has taken over, or for a writer
   * that is not {@code writer}, it changes nothing. Returns the row as it is then.
   */
  public static Row resume(Connection db, String jobName, String writer, String instance, int parallelism) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE geofence_handover SET writer = ?, writer_parallelism = ?, writer_seen_at = now(), writer_done = '{}',"
            + " updated_at = now() WHERE job_name = ? AND writer = ?")) {
      s.setString(1, instance);
      s.setInt(2, parallelism);
      s.setString(3, jobName);
      s.setString(4, writer);
      s.executeUpdate();
    }
    return read(db, jobName).orElseThrow(() -> new IllegalStateException(
        "no instance of " + jobName + " keeps a row in geofence_handover, so " + instance + " has no writer to resume"));
  }

  /** Says that {@code writer} runs: a standby taking over from a writer that stopped saying so warns. */
  public static void seen(Connection db, String jobName, String writer) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE geofence_handover SET writer_seen_at = now() WHERE job_name = ? AND writer = ?")) {
      s.setString(1, jobName);
      s.setString(2, writer);
      s.executeUpdate();
    }
  }

  /**
   * Registers {@code standby} as the instance that takes over once ready, unless a handover is
   * under way; its subtasks then say when their index is ready ({@link #standbyReady}).
   */
  public static void registerStandby(Connection db, String jobName, String standby, int parallelism) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE geofence_handover SET standby = ?, standby_parallelism = ?, standby_ready = '{}', updated_at = now()"
            + " WHERE job_name = ? AND next_writer IS NULL AND writer <> ?")) {
      s.setString(1, standby);
      s.setInt(2, parallelism);
      s.setString(3, jobName);
      s.setString(4, standby);
      s.executeUpdate();
    }
  }

  /**
   * Withdraws {@code standby} unless it has asked already: true if it can no longer ask (and may
   * be cancelled without leaving the outputs to nobody), false if it asked.
   */
  public static boolean withdrawStandby(Connection db, String jobName, String standby) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE geofence_handover SET standby = NULL, standby_ready = '{}', updated_at = now()"
            + " WHERE job_name = ? AND standby = ?")) {
      s.setString(1, jobName);
      s.setString(2, standby);
      s.executeUpdate();
    }
    return read(db, jobName).map(r -> !standby.equals(r.nextWriter()) && !standby.equals(r.writer())).orElse(true);
  }

  /** Says that {@code subtask} of {@code standby} has its index ready. */
  public static void standbyReady(Connection db, String jobName, String standby, int subtask) throws SQLException {
    addSubtask(db, "standby_ready", "standby = ?", jobName, standby, subtask);
  }

  /** Adds {@code subtask} to the int[] {@code column} (once) where {@code instance} matches {@code condition}. */
  private static void addSubtask(Connection db, String column, String condition, String jobName, String instance, int subtask)
      throws SQLException {
    try (PreparedStatement s = db.prepareStatement("UPDATE geofence_handover SET " + column + " = CASE WHEN ? = ANY ("
        + column + ") THEN " + column + " ELSE " + column + " || ? END, updated_at = now() WHERE job_name = ? AND " + condition)) {
      s.setInt(1, subtask);
      s.setInt(2, subtask);
      s.setString(3, jobName);
      s.setString(4, instance);
      s.executeUpdate();
    }
  }

  /**
   * Extends the lease of {@code instance} to at least {@code until}, if it is the writer and no
   * handover is asked for, or if it is the next writer (whose lease, once it is the writer, must
   * cover what it wrote while taking over). Returns the lease then, or {@link #NONE} if it was not
   * extended.
   */
  public static long extend(Connection db, String jobName, String instance, long until) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE geofence_handover SET writes_until = greatest(writes_until, ?), updated_at = now()"
            + " WHERE job_name = ? AND ((writer = ? AND next_writer IS NULL) OR next_writer = ?) RETURNING writes_until")) {
      s.setTimestamp(1, new Timestamp(until));
      s.setString(2, jobName);
      s.setString(3, instance);
      s.setString(4, instance);
      try (ResultSet r = s.executeQuery()) {
        return r.next() ? r.getTimestamp(1).getTime() : NONE;
      }
    }
  }

  /**
   * Asks {@code writer} to hand the outputs over to {@code next}: freezes the writer's lease as
   * T and returns it.
   *
   * @throws IllegalStateException in one sentence, if {@code writer} is not the writer, a handover
   *     is asked for already, {@code next} is not the registered standby ({@link #registerStandby}),
   *     or the writer has no clock yet (no lease to freeze)
   */
  public static long ask(Connection db, String jobName, String writer, String next) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE geofence_handover SET next_writer = ?, handover_at = writes_until, standby = NULL, standby_ready = '{}',"
            + " updated_at = now() WHERE job_name = ? AND writer = ? AND next_writer IS NULL AND writes_until IS NOT NULL"
            + " AND standby = ? RETURNING handover_at")) {
      s.setString(1, next);
      s.setString(2, jobName);
      s.setString(3, writer);
      s.setString(4, next);
      try (ResultSet r = s.executeQuery()) {
        if (r.next()) {
          return r.getTimestamp(1).getTime();
        }
      }
    }
    Optional<Row> row = read(db, jobName);
    String why = row.isEmpty() ? "no instance of " + jobName + " keeps a handover row (is geofence.handover.enabled set?)"
        : !row.get().writer().equals(writer) ? "the outputs of " + jobName + " are written by " + row.get().writer() + ", not " + writer
        : row.get().nextWriter() != null ? "a handover to " + row.get().nextWriter() + " is under way already"
        : !next.equals(row.get().standby()) ? next + " is not the registered standby"
        : writer + " has no clock yet, so it has no lease to hand over; try again once it has";
    throw new IllegalStateException("cannot hand the outputs over to " + next + ": " + why);
  }

  /** Says that {@code subtask} of {@code writer} committed its whole share before T. */
  public static void markDone(Connection db, String jobName, String writer, int subtask) throws SQLException {
    addSubtask(db, "writer_done", "writer = ? AND next_writer IS NOT NULL", jobName, writer, subtask);
  }

  /**
   * Makes {@code next} the writer, from T on, once the old one is done; true if it is the writer
   * afterwards (this call or an earlier one of another of its subtasks made it so).
   */
  public static boolean takeOver(Connection db, String jobName, String next, int parallelism) throws SQLException {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE geofence_handover SET writer = next_writer, writer_parallelism = ?, writer_since = handover_at,"
            + " writer_seen_at = now(), writes_until = greatest(writes_until, handover_at), next_writer = NULL,"
            + " handover_at = NULL, writer_done = '{}', updated_at = now()"
            + " WHERE job_name = ? AND next_writer = ? AND cardinality(writer_done) >= writer_parallelism")) {
      s.setInt(1, parallelism);
      s.setString(2, jobName);
      s.setString(3, next);
      s.executeUpdate();
    }
    return read(db, jobName).map(r -> r.writer().equals(next)).orElse(false);
  }

  private static Optional<Row> row(PreparedStatement s) throws SQLException {
    try (ResultSet r = s.executeQuery()) {
      if (!r.next()) {
        return Optional.empty();
      }
      return Optional.of(new Row(r.getString(1), r.getInt(2), millis(r.getTimestamp(3)), millis(r.getTimestamp(4)),
          r.getString(5), millis(r.getTimestamp(6)), r.getInt(7), r.getLong(8), r.getString(9), r.getBoolean(10)));
    }
  }

  private static long millis(Timestamp t) {
    return t == null ? NONE : t.getTime();
  }
}
