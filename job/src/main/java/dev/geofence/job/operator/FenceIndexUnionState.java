package dev.geofence.job.operator;

import dev.geofence.connectors.model.Location;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.OperatorStateStore;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.types.StringValue;
import org.apache.flink.runtime.state.KeyGroupRange;

/**
 * The fence index operator's operator state, all of it union list state: every subtask reads what
 * every subtask of the run before wrote, and takes its own part. Locations not yet evaluated, each
 * with the key groups it is still owed to (a restore at another parallelism hands each to the
 * subtasks whose key groups overlap); the clock (the newest restored wins); why the index could not
 * be trusted; each object's newest evaluated time (each subtask writes its share of the objects,
 * as every subtask evaluates every location; if two wrote one, the newest wins).
 *
 * <p>The objects' newest times are packed, one element per subtask's share: every subtask reads
 * every share at a restore, and Flink reads operator state element by element, through a stream
 * that reads its source a byte at a time. Compressed (the job turns snapshot compression on), that
 * source is Snappy's decoder, which reads the file in blocks, and 200,000 objects cost a restoring
 * subtask 27 ms packed against 951 ms one element per object (and 6.5 s either way uncompressed:
 * docs/performance/journal.md, "2026-12-05: operator state read a byte at a time"). The form of
 * earlier releases, one element per object, is still read.
 */
public final class FenceIndexUnionState {

  /** What a restore finds, for the subtask that owns key groups {@code [start, end]}. */
  public interface Restored {
    /** A location still owed to key groups {@code [start, end]} of this subtask's. */
    void held(Location location, int start, int end);

    void clock(long time);

    void untrusted(String reason);

    void objectNewest(String objectId, long time);

    /** Locations stamped before {@code time} are refused (a catch-up by read of what changed was at it). */
    void readAt(long time);
  }

  private final ListState<PendingLocation> held;
  private final ListState<Long> clock;
  private final ListState<String> untrusted;
  /** Per subtask that caught up by a read still in reach of a location: its read time and key groups. */
  private final ListState<long[]> readTimes;
  private final ListState<byte[]> objectTimes;
  /** Earlier releases' form of the objects' newest times: read, and written only as they wrote it (tests). */
  private final ListState<Tuple2<String, Long>> objectTimesPerObject;
  private final boolean previousLayout;

  /** @param previousLayout whether to write the objects' newest times as earlier releases did (tests of restoring them) */
  public FenceIndexUnionState(OperatorStateStore store, boolean previousLayout) throws Exception {
    held = store.getUnionListState(new ListStateDescriptor<>("pending-locations", TypeInformation.of(PendingLocation.class)));
    clock = store.getUnionListState(new ListStateDescriptor<>("clock", Types.LONG));
    untrusted = store.getUnionListState(new ListStateDescriptor<>("untrusted", Types.STRING));
    readTimes = store.getUnionListState(new ListStateDescriptor<>("read-times", PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
    objectTimes = store.getUnionListState(new ListStateDescriptor<>("object-times-packed", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
    objectTimesPerObject = store.getUnionListState(new ListStateDescriptor<>("object-times", Types.TUPLE(Types.STRING, Types.LONG)));
    this.previousLayout = previousLayout;
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
    // A read's time goes with the key groups it read: whoever owns any of them now refuses what is older.
    for (long[] read : readTimes.get()) {
      if (read[1] <= own.getEndKeyGroup() && read[2] >= own.getStartKeyGroup()) {
        restored.readAt(read[0]);
      }
    }
    for (byte[] packed : objectTimes.get()) {
      DataInputDeserializer in = new DataInputDeserializer(packed);
      int format = in.readInt();
      if (format != OBJECT_TIMES_FORMAT) {
        throw new IllegalStateException("objects' newest times of format " + format + ", which this release cannot read (it reads "
            + OBJECT_TIMES_FORMAT + ")");
      }
      for (int n = in.readInt(); n > 0; n--) {
        restored.objectNewest(StringValue.readString(in), in.readLong());
      }
    }
    for (Tuple2<String, Long> newest : objectTimesPerObject.get()) {
      restored.objectNewest(newest.f0, newest.f1);
    }
  }

  /** The format of a packed share of objects' newest times: a count, then each object's id and time. */
  static final int OBJECT_TIMES_FORMAT = 1;

  /**
   * Writes this subtask's part before a snapshot: the locations it holds, its clock, why its index
   * cannot be trusted (null: it can), and, of every object's newest evaluated time ({@code
   * newest} gives each), the share of subtask {@code subtask} of {@code subtasks}; and the time of
   * its catch-up's read of what changed, if a location may still be older ({@code readTime}, 0 for none),
   * for key groups {@code own}.
   */
  public void write(List<PendingLocation> heldNow, long clockNow, String untrustedNow, Consumer<BiConsumer<String, Long>> newest,
      int subtask, int subtasks, long readTime, KeyGroupRange own) throws Exception {
    held.update(heldNow);
    clock.update(List.of(clockNow));
    untrusted.update(untrustedNow == null ? List.of() : List.of(untrustedNow));
    readTimes.update(readTime == 0 ? List.of() : List.of(new long[] {readTime, own.getStartKeyGroup(), own.getEndKeyGroup()}));
    List<Tuple2<String, Long>> share = new ArrayList<>();
    newest.accept((object, time) -> {
      if (Math.floorMod(object.hashCode(), subtasks) == subtask) {
        share.add(Tuple2.of(object, time));
      }
    });
    if (previousLayout) {
      objectTimes.update(List.of());
      objectTimesPerObject.update(share);
      return;
    }
    DataOutputSerializer out = new DataOutputSerializer(8 + 24 * share.size());
    out.writeInt(OBJECT_TIMES_FORMAT);
    out.writeInt(share.size());
    for (Tuple2<String, Long> object : share) {
      StringValue.writeString(object.f0, out);
      out.writeLong(object.f1);
    }
    objectTimes.update(List.of(out.getCopyOfBuffer()));
    // What an earlier release wrote is read once, and carried on in the packed form.
    objectTimesPerObject.update(List.of());
  }
}
