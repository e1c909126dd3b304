package dev.geofence.state.readiness;

/**
 * Which catch-up a restored subtask takes (docs/design.md#the-choice), from what the gap check
 * knows: the backlog (transactions per bucket since the restored state), how many fences the
 * subtask holds and the source has in its buckets, and the job's parallelism. Each path is estimated from costs measured on the
 * reference machine (docs/performance.md, "Catch-up"):
 *
 * <ul>
 *   <li>replay: every transaction of the backlog applied by this subtask, and every transaction of
 *       the job's backlog (about this subtask's times the parallelism) decoded by the stream's one
 *       reader;
 *   <li>read: the key pass over the subtask's fences and one whole row per fence the backlog
 *       changed (a fence changed many times is read once), as many as {@link #changed} expects.
 *       The stream then starts where the reads were, so nothing of the backlog is decoded again:
 *       if every subtask reads, which they do when their shares are alike; one that replays has
 *       the others wait for the stream too.
 *   <li>load: every fence the source has in the subtask's buckets, read and loaded as a fresh start
 *       does, into an index emptied first: what a read costs once most fences changed, without
 *       the key pass and without replacing each restored fence (a changed fence read over a
 *       restored one cost about twice a fresh start's, docs/performance.md "Catch-up"). The
 *       stream starts where the loads were, as after reads.
 * </ul>
 *
 * The estimates are what is logged, recorded and exported, beside the path taken; a forced path is
 * taken whatever they say. Plain Java.
 */
public final class CatchUpChoice {

  /** The stream's reader, per transaction of the whole job's backlog (Debezium decoding pgoutput). */
  static final double STREAM_MICROS = 33;
  /** A subtask applying one transaction of its backlog (decode, seq check, history, index). */
  static final double APPLY_MICROS = 56;
  /** The key pass, per fence the subtask holds (one scan of the heap, each subtask its buckets). */
  static final double KEY_MICROS = 4.7;
  /**
   * One fence read whole and loaded, as a fresh start loads one: the load's cost per fence, and
   * the read's per changed fence (44 µs measured at a six-hour backlog, docs/performance.md
   * "Catch-up"). At an hour's the read's was 60 to 85 µs, but {@link #changed} counts about 2.5x
   * too many fences there, and the two errors cancel: which the choice between replay and read was
   * calibrated on.
   */
  static final double LOAD_MICROS = 44;

  /**
   * @param path the path taken: {@link CatchUp#REPLAY}, {@link CatchUp#READ} or {@link CatchUp#LOAD}
   * @param replayMillis the replay's estimate
   * @param readMillis the read's estimate
   * @param loadMillis the load's estimate
   * @param reason why this path, in one sentence for the log and {@code hydration_history}
   */
  public record Decision(CatchUp path, long replayMillis, long readMillis, long loadMillis, String reason) {}

  private CatchUpChoice() {}

  /**
   * @param mode the configured mode
   * @param backlog transactions (per bucket) of this subtask's buckets since its restored state
   * @param fences the fences this subtask holds
   * @param fencesAtSource the live fences the source has in this subtask's buckets
   * @param parallelism the job's parallelism
   * @param locationsReplayDowntime whether the location source resumes from its restored position,
   *     so that locations older than a read or a load will come (either would make them dead letters)
   */
  public static Decision choose(CatchUp mode, long backlog, long fences, long fencesAtSource, int parallelism,
      boolean locationsReplayDowntime) {
    long replay = micros(backlog * (Math.max(1, parallelism) * STREAM_MICROS + APPLY_MICROS));
    long read = micros(fences * KEY_MICROS + changed(backlog, Math.max(fences, fencesAtSource)) * LOAD_MICROS);
    long load = micros(fencesAtSource * LOAD_MICROS);
    String estimates = "replay estimated at " + replay + " ms, read at " + read + " ms, load at " + load + " ms";
    CatchUp cheapest = replay <= read && replay <= load ? CatchUp.REPLAY : read <= load ? CatchUp.READ : CatchUp.LOAD;
    return switch (mode) {
      case REPLAY, READ, LOAD -> new Decision(mode, replay, read, load, forced(mode) + "; " + estimates);
      case AUTO -> cheapest == CatchUp.REPLAY ? new Decision(CatchUp.REPLAY, replay, read, load, "replay is the cheapest: " + estimates)
          : locationsReplayDowntime ? new Decision(CatchUp.REPLAY, replay, read, load, "replay, though the " + cheapest.label()
              + " is the cheapest (" + estimates + "), since the location source resumes from its restored position and a "
              + cheapest.label() + " would make the locations older than it dead letters")
          : new Decision(cheapest, replay, read, load, cheapest.label() + " is the cheapest: " + estimates);
    };
  }

  /** Why a path the configuration forces is taken, as the log and {@code hydration_history} say it. */
  public static String forced(CatchUp mode) {
    return mode.label() + " forced by the configuration";
  }

  /**
   * How many of {@code fences} a backlog of {@code backlog} transactions is expected to have
   * changed, were each transaction an edit of one fence at random: {@code fences * (1 - e^(-backlog
   * / fences))}. Edits that favour some fences change fewer (the evenly spread edits change the
   * most, for a given count), so the read is not under-estimated by a skew (a transaction editing
   * many fences of a bucket counts once, here as before); counting one fence
   * per transaction, as before, put a six-hour backlog's read at twice its cost and chose the load
   * from about 7.4 hours, where the read was still twice as fast (docs/performance/journal.md,
   * "2026-12-06: six hours of edits, the read against the load").
   */
  static long changed(long backlog, long fences) {
    return fences == 0 ? 0 : Math.round(-fences * Math.expm1(-(double) backlog / fences));
  }

  private static long micros(double micros) {
    return (long) Math.ceil(micros / 1000);
  }
}
