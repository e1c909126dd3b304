package dev.geofence.job.hold;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.state.readiness.Lsn;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
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
 * <p>A move costs PostgreSQL a decoding of the WAL from the slot's restart position, and moving
 * its confirmed position does not move that far (a slot keeps one candidate restart position at a
 * time): after a single move, the stream decoded the whole backlog again before it sent anything
 * (10.8 s after a day's edits at 1.2 M fences). So each move is made twice, the second bringing the
 * restart position up to the last one before the target; and once every subtask has said it reads
 * or loads, the slot is moved to the least of their gap checks' targets while they read, so that
 * the move after the reads has only the WAL since then to decode.
 *
 * <p>Part of the fence index's coordinator; its methods run on the coordinator's thread, the slot's
 * move on a thread of its own (the database may be slow to answer).
 */
final class StreamStart implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(StreamStart.class);

  private final String token;
  /** The source of truth whose slot is moved, or null (tests without one): then nothing is moved. */
  private final FenceSourceOptions source;
  private final ExecutorService mover;
  /** Per subtask, where it needs the stream from: -1 not said yet, 0 from the restored position. */
  private long[] from = new long[0];
  /** Per subtask, the least position its read or load will be paired with: -1 not said (or it does not read). */
  private long[] reading = new long[0];
  /** Whether the slot was moved while the subtasks read. */
  private boolean movedEarly;

  StreamStart(String token, FenceSourceOptions source) {
    this.token = token;
    this.source = source;
    this.mover = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "geofence-stream-start");
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Subtask {@code subtask} of {@code parallelism} reads or loads, paired with a position no earlier
   * than {@code target}: once every subtask has said so, the slot moves to the least of them.
   */
  void reading(int subtask, int parallelism, long target) {
    if (StreamGate.of(token).isOpen() || source == null) {
      return;
    }
    size(parallelism);
    reading[subtask] = target;
    if (movedEarly || Arrays.stream(reading).anyMatch(r -> r <= 0) || Arrays.stream(from).anyMatch(f -> f == 0)) {
      return;
    }
    movedEarly = true;
    long least = least(reading);
    long[] targets = reading.clone();
    mover.execute(() -> moveSlot(least, targets, true));
  }

  /** Subtask {@code subtask} of {@code parallelism} needs the stream from {@code streamFrom} (0: its restored position). */
  void reported(int subtask, int parallelism, long streamFrom) {
    if (StreamGate.of(token).isOpen()) {
      return;
    }
    size(parallelism);
    from[subtask] = streamFrom;
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
      moveSlot(least, positions, false);
      StreamGate.of(token).open();
    });
  }

  private void size(int parallelism) {
    if (from.length != parallelism) {
      from = new long[parallelism];
      Arrays.fill(from, -1);
      reading = new long[parallelism];
      Arrays.fill(reading, -1);
    }
  }

  private static long least(long[] positions) {
    return Arrays.stream(positions).reduce((a, b) -> Long.compareUnsigned(a, b) <= 0 ? a : b).orElse(0);
  }

  /** A subtask failed or was reset before the stream started: it says again. */
  void reset(int subtask) {
    if (subtask < from.length) {
      from[subtask] = -1;
      reading[subtask] = -1;
    }
  }

  /** Moves the slot to {@code to}, twice (see the class comment); {@code early}: while the subtasks read. */
  private void moveSlot(long to, long[] positions, boolean early) {
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
      if (early) {
        LOG.info(moved ? "Every subtask of the fence index reads or loads, from {} on: the slot {} moved to {} while they do"
            : "Every subtask of the fence index reads or loads, from {} on: the slot {} was already at {} or past it, or in use", at,
            source.slotName(), target);
      } else {
        LOG.info(moved
            ? "Every subtask of the fence index caught up by reading what changed (at {}): the slot {} moved to {}, from where the"
                + " change stream starts, so the edits the reads hold are not streamed again"
            : "Every subtask of the fence index caught up by reading what changed (at {}): the slot {} was already at {} or"
                + " past it, or in use; the change stream starts where it is", at, source.slotName(), target);
      }
    } catch (SQLException e) {
      LOG.warn(early ? "Could not move the slot {} while the fence index reads ({}): it is moved once the reads are done"
          : "Could not move the slot {} to where the fence index's reads of what changed were ({}): the change stream starts"
          + " where the CDC source resumes, and brings again what they hold", source.slotName(), e.getMessage());
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
