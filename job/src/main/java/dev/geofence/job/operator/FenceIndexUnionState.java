package dev.geofence.job.operator;

import dev.geofence.connectors.model.Location;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.OperatorStateStore;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.state.KeyGroupRange;

/**
 * The fence index operator's operator state, all of it union list state: every subtask reads what
 * every subtask of the run before wrote, and takes its own part. Locations not yet evaluated, each
 * with the key groups it is still owed to (a restore at another parallelism hands each to the
 * subtasks whose key groups overlap); the clock (the newest restored wins); why the index could not
 * be trusted; each object's newest evaluated time (each subtask writes its share of the objects,
 * as every subtask evaluates every location; if two wrote one, the newest wins).
 */
public final class FenceIndexUnionState {

  /** What a restore finds, for the subtask that owns key groups {@code [start, end]}. */
  public interface Restored {
    /** A location still owed to key groups {@code [start, end]} of this subtask's. */
    void held(Location location, int start, int end);

    void clock(long time);

    void untrusted(String reason);

    void objectNewest(String objectId, long time);
  }

  private final ListState<PendingLocation> held;
  private final ListState<Long> clock;
  private final ListState<String> untrusted;
  private final ListState<Tuple2<String, Long>> objectTimes;

  public FenceIndexUnionState(OperatorStateStore store) throws Exception {
    held = store.getUnionListState(new ListStateDescriptor<>("pending-locations", TypeInformation.of(PendingLocation.class)));
    clock = store.getUnionListState(new ListStateDescriptor<>("clock", Types.LONG));
    untrusted = store.getUnionListState(new ListStateDescriptor<>("untrusted", Types.STRING));
    objectTimes = store.getUnionListState(new ListStateDescriptor<>("object-times", Types.TUPLE(Types.STRING, Types.LONG)));
  }

  /** Reads what every subtask wrote, and hands over this subtask's part. */
  public void read(KeyGroupRange own, Restored restored) throws Exception {
    // Each old subtask wrote what it still owed; take what is owed to key groups now ours.
    for (PendingLocation owed : held.get()) {
      int start = Math.max(owed.keyGroupStart, own.getStartKeyGroup());
      int end = Math.min(owed.keyGroupEnd, own.getEndKeyGroup());
      if (start <= end) {
        restored.held(owed.location, start, end);
      }
    }
    for (Long time : clock.get()) {
      restored.clock(time);
    }
    for (String reason : untrusted.get()) {
      restored.untrusted(reason);
    }
    for (Tuple2<String, Long> newest : objectTimes.get()) {
      restored.objectNewest(newest.f0, newest.f1);
    }
  }

  /**
   * Writes this subtask's part before a snapshot: the locations it holds, its clock, why its index
   * cannot be trusted (null: it can), and, of every object's newest evaluated time ({@code
   * newest} gives each), the share of subtask {@code subtask} of {@code subtasks}.
   */
  public void write(List<PendingLocation> heldNow, long clockNow, String untrustedNow, Consumer<BiConsumer<String, Long>> newest,
      int subtask, int subtasks) throws Exception {
    held.update(heldNow);
    clock.update(List.of(clockNow));
    untrusted.update(untrustedNow == null ? List.of() : List.of(untrustedNow));
    List<Tuple2<String, Long>> share = new ArrayList<>();
    newest.accept((object, time) -> {
      if (Math.floorMod(object.hashCode(), subtasks) == subtask) {
        share.add(Tuple2.of(object, time));
      }
    });
    objectTimes.update(share);
  }
}
