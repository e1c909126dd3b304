package dev.geofence.job.operator;

import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.time.StayRules;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.core.memory.DataOutputView;

/**
 * The binary format of {@link StoredFence} in keyed state. Every value starts with a format
 * version byte, so that a release meeting state it cannot read says so (and the index is rebuilt
 * from the source) instead of misreading it.
 *
 * <p>Every format starts with its version byte and the length of the rest, so that a value of a
 * format this release does not know is skipped whole and read as {@link StoredFence#UNREADABLE},
 * on either state backend, and the operator rebuilds from the source instead of failing to restore.
 *
 * <p>Format 1: version, length, seq, flags (1 = deleted, 2 = has geometry, 4 = has tenant, 8 = has
 * a dwell delay), commit LSN, commit time, [tenant], [polygon count, polygon offsets, ring count,
 * ring offsets, vertex count, coordinates], [dwell delay], all big-endian. The dwell delay came
 * last, after the format's first release: a release before it reads such a value as the same
 * fence without its delay, and this one reads that release's values as fences without one.
 *
 * <p>A value is read and written whole, in one call on the stream: a heap backend restores from
 * (and checkpoints to) a file stream that Flink does not buffer, where a call per coordinate costs
 * a system call each. The body goes through a buffer of this instance's, so an instance is used by
 * one thread at a time ({@link #duplicate()} gives each its own).
 */
public final class StoredFenceSerializer extends TypeSerializer<StoredFence> {

  private static final long serialVersionUID = 1L;

  public static final byte FORMAT_VERSION = 1;
  /** The prototype: Flink duplicates it for every state and thread that uses it. */
  public static final StoredFenceSerializer INSTANCE = new StoredFenceSerializer();

  private static final int DELETED = 1;
  private static final int HAS_GEOMETRY = 2;
  private static final int HAS_TENANT = 4;
  private static final int HAS_DWELL_DELAY = 8;

  /** The version written; the current one, except in tests of what an older release meets. */
  private final byte writtenVersion;
  private transient DataOutputSerializer writeBuffer;
  /** The bytes of a value being read, or of the coordinates being written. */
  private transient byte[] bytes;

  private StoredFenceSerializer() {
    this(FORMAT_VERSION);
  }

  public StoredFenceSerializer(byte writtenVersion) {
    this.writtenVersion = writtenVersion;
  }

  @Override
  public boolean isImmutableType() {
    return true;
  }

  @Override
  public TypeSerializer<StoredFence> duplicate() {
    return new StoredFenceSerializer(writtenVersion);
  }

  @Override
  public StoredFence createInstance() {
    return null;
  }

  @Override
  public StoredFence copy(StoredFence from) {
    return from;
  }

  @Override
  public StoredFence copy(StoredFence from, StoredFence reuse) {
    return from;
  }

  @Override
  public int getLength() {
    return -1;
  }

  @Override
  public void serialize(StoredFence fence, DataOutputView out) throws IOException {
    if (writeBuffer == null) {
      writeBuffer = new DataOutputSerializer(4096);
    }
    DataOutputSerializer body = writeBuffer;
    body.clear();
    body.writeByte(writtenVersion);
    body.writeInt(0); // the body's length, set below
    body.writeLong(fence.seq());
    int flags = (fence.deleted() ? DELETED : 0) | (fence.geometry() != null ? HAS_GEOMETRY : 0) | (fence.tenant() != null ? HAS_TENANT : 0)
        | (fence.dwellDelay() != StayRules.NO_FENCE_DELAY ? HAS_DWELL_DELAY : 0);
    body.writeByte(flags);
    body.writeLong(fence.commitLsn());
    body.writeLong(fence.commitTime());
    if (fence.tenant() != null) {
      body.writeUTF(fence.tenant());
    }
    if (fence.geometry() != null) {
      writeInts(body, fence.geometry().polygonStarts());
      writeInts(body, fence.geometry().ringStarts());
      int values = 2 * fence.geometry().vertexCount();
      body.writeInt(values);
      byte[] coordinates = buffer(8 * values);
      fence.geometry().putCoordinates(ByteBuffer.wrap(coordinates, 0, 8 * values).asDoubleBuffer());
      body.write(coordinates, 0, 8 * values);
    }
    if (fence.dwellDelay() != StayRules.NO_FENCE_DELAY) {
      body.writeLong(fence.dwellDelay());
    }
    int length = body.length() - 5;
    ByteBuffer.wrap(body.getSharedBuffer(), 1, 4).putInt(length);
    out.write(body.getSharedBuffer(), 0, body.length());
  }

  @Override
  public StoredFence deserialize(DataInputView in) throws IOException {
    int version = in.readByte();
    int length = in.readInt();
    if (version != FORMAT_VERSION) {
      in.skipBytesToRead(length);
      return StoredFence.UNREADABLE;
    }
    byte[] value = buffer(length);
    in.readFully(value, 0, length);
    DataInputDeserializer body = new DataInputDeserializer(value, 0, length);
    long seq = body.readLong();
    int flags = body.readByte();
    long lsn = body.readLong();
    long time = body.readLong();
    String tenant = (flags & HAS_TENANT) != 0 ? body.readUTF() : null;
    FenceGeometry geometry = null;
    if ((flags & HAS_GEOMETRY) != 0) {
      int[] polygons = readInts(body);
      int[] rings = readInts(body);
      double[] xy = new double[body.readInt()];
      int at = body.getPosition();
      ByteBuffer.wrap(value, at, 8 * xy.length).asDoubleBuffer().get(xy);
      body.skipBytesToRead(8 * xy.length);
      try {
        geometry = FenceGeometry.ofOwnedArrays(xy, rings, polygons);
      } catch (IllegalArgumentException corrupt) {
        // Bytes of the right format that do not describe closed rings: never used as a fence,
        // the index is rebuilt from the source instead.
        return StoredFence.UNREADABLE;
      }
    }
    long dwellDelay = (flags & HAS_DWELL_DELAY) != 0 ? body.readLong() : StayRules.NO_FENCE_DELAY;
    if (!StayRules.isFenceDelay(dwellDelay)) {
      return StoredFence.UNREADABLE;
    }
    return new StoredFence(seq, (flags & DELETED) != 0, geometry, tenant, dwellDelay, lsn, time);
  }

  @Override
  public StoredFence deserialize(StoredFence reuse, DataInputView in) throws IOException {
    return deserialize(in);
  }

  @Override
  public void copy(DataInputView source, DataOutputView target) throws IOException {
    // Byte for byte, so that a value of an unknown format survives a copy too.
    target.writeByte(source.readByte());
    int length = source.readInt();
    target.writeInt(length);
    target.write(source, length);
  }

  private byte[] buffer(int length) {
    if (bytes == null || bytes.length < length) {
      bytes = new byte[Math.max(length, 4096)];
    }
    return bytes;
  }

  private static void writeInts(DataOutputView out, int[] values) throws IOException {
    out.writeInt(values.length);
    for (int v : values) {
      out.writeInt(v);
    }
  }

  private static int[] readInts(DataInputView in) throws IOException {
    int[] values = new int[in.readInt()];
    for (int i = 0; i < values.length; i++) {
      values[i] = in.readInt();
    }
    return values;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof StoredFenceSerializer && ((StoredFenceSerializer) o).writtenVersion == writtenVersion;
  }

  @Override
  public int hashCode() {
    return StoredFenceSerializer.class.hashCode() + writtenVersion;
  }

  @Override
  public TypeSerializerSnapshot<StoredFence> snapshotConfiguration() {
    return new Snapshot();
  }

  /** Serializer snapshot; the per-value version byte carries the format's evolution. */
  public static final class Snapshot extends SimpleTypeSerializerSnapshot<StoredFence> {
    public Snapshot() {
      // A new instance each time: a restore may read with it while another subtask does too.
      super(StoredFenceSerializer::new);
    }
  }
}
