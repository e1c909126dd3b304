package dev.geofence.job.operator;

import dev.geofence.state.geom.FenceGeometry;
import java.io.IOException;
import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * The binary format of {@link StoredFence} in keyed state. Every value starts with a format
 * version byte, so that a release meeting state it cannot read says so (and the index is rebuilt
 * from the source) instead of misreading it.
 *
 * <p>Format 1: version, seq, flags (1 = deleted, 2 = has geometry, 4 = has tenant), commit LSN,
 * commit time, [tenant], [polygon count, polygon offsets, ring count, ring offsets, vertex count,
 * coordinates].
 */
public final class StoredFenceSerializer extends TypeSerializerSingleton<StoredFence> {

  private static final long serialVersionUID = 1L;

  public static final byte FORMAT_VERSION = 1;
  public static final StoredFenceSerializer INSTANCE = new StoredFenceSerializer();

  private static final int DELETED = 1;
  private static final int HAS_GEOMETRY = 2;
  private static final int HAS_TENANT = 4;

  /** Thrown for a stored value of a format this release does not know. */
  public static final class UnknownFormatException extends IOException {
    private static final long serialVersionUID = 1L;

    UnknownFormatException(int version) {
      super("stored fence format " + version + " is unknown to this release (it reads " + FORMAT_VERSION + ")");
    }
  }

  @Override
  public boolean isImmutableType() {
    return true;
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
    out.writeByte(FORMAT_VERSION);
    out.writeLong(fence.seq);
    int flags = (fence.deleted ? DELETED : 0) | (fence.geometry != null ? HAS_GEOMETRY : 0) | (fence.tenant != null ? HAS_TENANT : 0);
    out.writeByte(flags);
    out.writeLong(fence.commitLsn);
    out.writeLong(fence.commitTime);
    if (fence.tenant != null) {
      out.writeUTF(fence.tenant);
    }
    if (fence.geometry != null) {
      writeInts(out, fence.geometry.polygonStarts());
      writeInts(out, fence.geometry.ringStarts());
      double[] xy = fence.geometry.coordinates();
      out.writeInt(xy.length);
      for (double v : xy) {
        out.writeDouble(v);
      }
    }
  }

  @Override
  public StoredFence deserialize(DataInputView in) throws IOException {
    int version = in.readByte();
    if (version != FORMAT_VERSION) {
      throw new UnknownFormatException(version);
    }
    long seq = in.readLong();
    int flags = in.readByte();
    long lsn = in.readLong();
    long time = in.readLong();
    String tenant = (flags & HAS_TENANT) != 0 ? in.readUTF() : null;
    FenceGeometry geometry = null;
    if ((flags & HAS_GEOMETRY) != 0) {
      int[] polygons = readInts(in);
      int[] rings = readInts(in);
      double[] xy = new double[in.readInt()];
      for (int i = 0; i < xy.length; i++) {
        xy[i] = in.readDouble();
      }
      geometry = FenceGeometry.fromArrays(xy, rings, polygons);
    }
    return new StoredFence(seq, (flags & DELETED) != 0, geometry, tenant, lsn, time);
  }

  @Override
  public StoredFence deserialize(StoredFence reuse, DataInputView in) throws IOException {
    return deserialize(in);
  }

  @Override
  public void copy(DataInputView source, DataOutputView target) throws IOException {
    serialize(deserialize(source), target);
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
  public TypeSerializerSnapshot<StoredFence> snapshotConfiguration() {
    return new Snapshot();
  }

  /** Serializer snapshot; the per-value version byte carries the format's evolution. */
  public static final class Snapshot extends SimpleTypeSerializerSnapshot<StoredFence> {
    public Snapshot() {
      super(() -> INSTANCE);
    }
  }
}
