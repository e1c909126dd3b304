package dev.geofence.job.index;

import dev.geofence.connectors.model.Location;
import dev.geofence.job.hold.HoldReport;
import dev.geofence.job.operator.FenceIndexUnionState;
import dev.geofence.state.ledger.FenceLedger;
import dev.geofence.state.readiness.Readiness;
import org.apache.flink.annotation.Internal;
import org.apache.flink.runtime.state.KeyGroupRange;

/**
 * The path of the locations through one fence index subtask (docs/design.md#time-rules): each
 * location is refused by the time rules, evaluated at once (the clock has passed it and the index
 * is ready), or held; each step of the clock releases what it passed in time order, the fence
 * edits due between the locations, so that each location sees the fences of its time. Public, like
 * the parts it drives, for the benchmark of this path (bench/run path); not an API.
 */
@Internal
public final class LocationPath {

  private final EventClock clock;
  private final Readiness readiness;
  private final Admission admission;
  private final Evaluation evaluation;
  private final FenceLedger ledger;
  private final HoldReport hold;
  /** Told after each edit the clock releases: the warm-up's phase may have moved. */
  private final Runnable edited;
  private final int keyGroupStart;
  private final int keyGroupEnd;
  private final EventClock.Due due = new EventClock.Due() {
    @Override
    public void applyPending(String key, long time) throws Exception {
      // The locations released before this edit see the fences without it.
      evaluation.flush();
      ledger.release(key, time);
      edited.run();
    }

    @Override
    public void evaluate(Location location, int start, int end) throws Exception {
      if (!admission.beforeRead(location)) {
        evaluation.add(location, start, end);
      }
    }

    @Override
    public void exitDeleted(String fenceId) throws Exception {
      // The locations released before these EXITs enter and leave the fence first.
      evaluation.flush();
      ledger.releaseExit(fenceId);
    }
  };
  /** Set when the index becomes ready, and acted on once what made it so is done. */
  private boolean releaseDue;

  /** For the key groups [{@code keyGroupStart}, {@code keyGroupEnd}] the subtask owns. */
  public LocationPath(EventClock clock, Readiness readiness, Admission admission, Evaluation evaluation, FenceLedger ledger,
      HoldReport hold, Runnable edited, int keyGroupStart, int keyGroupEnd) {
    this.clock = clock;
    this.readiness = readiness;
    this.admission = admission;
    this.evaluation = evaluation;
    this.ledger = ledger;
    this.hold = hold;
    this.edited = edited;
    this.keyGroupStart = keyGroupStart;
    this.keyGroupEnd = keyGroupEnd;
  }

  /** A location of the stream: refused, evaluated, or held (in state, none lost) until it is due. */
  public void location(Location location) throws Exception {
    if (admission.tooLate(location, clock.time())) {
      return;
    }
    if (location.timestamp <= clock.time() && readiness.ready()) {
      if (admission.beforeRead(location)) {
        return;
      }
      admission.late();
      evaluation.evaluate(location, keyGroupStart, keyGroupEnd);
    } else {
      clock.hold(location, keyGroupStart, keyGroupEnd);
      reportHold();
    }
  }

  /**
   * The clock moves to {@code time} if that is later: what it passed is released, and the history
   * no location can need any more is forgotten. Says whether it moved.
   */
  public boolean advanceTo(long time) throws Exception {
    if (!clock.advanceTo(time)) {
      return false;
    }
    release();
    ledger.pruneHistory();
    evaluation.maybeForgetOlderThan(clock.historyHorizon());
    return true;
  }

  /** The watermark of the locations alone: how far behind them the clock is, for the hold's lag. */
  void locationWatermark(long watermark) {
    clock.locationWatermark(watermark);
  }

  /** Where the clock is: the event time up to which locations have been released. */
  long time() {
    return clock.time();
  }

  /**
   * The event time before which every trigger has been emitted, or {@link Long#MIN_VALUE} while the
   * index is not ready: the clock, but not past a location still held nor a DWELL or silence the
   * clock has yet to decide (at most the allowed lateness behind it).
   */
  long emittedUpTo() {
    if (!readiness.ready()) {
      return Long.MIN_VALUE;
    }
    long upTo = Math.min(clock.time(), evaluation.undecidedFrom() - 1);
    long held = clock.oldestHeld();
    return held == Long.MAX_VALUE ? upTo : Math.min(upTo, held - 1);
  }

  /** A fence was deleted: its members EXIT it, after the locations released before the delete. */
  void deleted(String fenceId, Iterable<String> members, long deletedAt, long seq) throws Exception {
    evaluation.flush();
    evaluation.deleted(fenceId, members, deletedAt, seq);
  }

  /**
   * What every subtask shares across a rescale: the held locations, the clock and each object's
   * newest time; {@code untrusted} is why the index is not to be trusted when restored, or null.
   */
  void checkpoint(FenceIndexUnionState union, String untrusted, int subtask, int parallelism) throws Exception {
    evaluation.forgetOlderThan(clock.historyHorizon());
    union.write(clock.held(), clock.time(), untrusted, evaluation::forEachNewest, subtask, parallelism,
        admission.readTime() > clock.historyHorizon() ? admission.readTime() : 0, new KeyGroupRange(keyGroupStart, keyGroupEnd));
  }

  /** How many objects the evaluation holds. */
  int objects() {
    return evaluation.objects();
  }

  /** How many stays' DWELLs are still to be decided. */
  int pendingDwells() {
    return evaluation.pendingDwells();
  }

  /** The time rules' counts, for the operator's view in tests. */
  Admission admission() {
    return admission;
  }

  /** The index became ready: what is held is released once what made it so is done ({@link #releaseIfDue}). */
  void becameReady() {
    releaseDue = true;
  }

  /** Releases the held locations if the index has become ready since the last release. */
  void releaseIfDue() throws Exception {
    if (releaseDue) {
      release();
    }
  }

  /** Tells the coordinator whether the hold is full or has room again. */
  void reportHold() {
    hold.held(clock.heldLocations(), readiness.ready(), clock.lagBehindHeld());
  }

  /** Applies and evaluates what the clock has let through, locations in batches. */
  private void release() throws Exception {
    releaseDue = false;
    clock.releaseUpTo(clock.time(), readiness::ready, due);
    evaluation.flush();
    if (readiness.ready()) {
      // Every location up to the clock is evaluated: what the clock alone decides comes after them.
      evaluation.clockPassed(clock.time());
      clock.indexReady();
    }
    reportHold();
  }
}
