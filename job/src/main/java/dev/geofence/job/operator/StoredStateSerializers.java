package dev.geofence.job.operator;

import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.readiness.StreamPosition;
import java.io.IOException;
import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * The binary formats of the fence index's small state records, a bucket's fingerprint
 * ({@link BucketFingerprint}) and a key group's stream position ({@link StreamPosition}): a format version byte, then the fields, big-endian. They are the
 * project's own types rather than the stream's {@code FenceChange}, so that a savepoint's format
 * does not change with the connector's record. A value of a version this release does not know
 * fails the restore with a message naming it (the values are a few per bucket: nothing to skip
 * and rebuild around).
 *
 * <p>Format 1 of a fingerprint: version, bucket (int), count, checksum, version, LSN, commit time
 * (longs). Format 1 of a position: version, LSN, commit time.
 */
public final class StoredStateSerializers {

  public static final byte FORMAT_VERSION = 1;

  private StoredStateSerializers() {}

  private abstract static class Versioned<T> extends TypeSerializerSingleton<T> {

    private static final long serialVersionUID = 1L;

    private final String what;

    Versioned(String what) {
      this.what = what;
    }

    @Override
    public boolean isImmutableType() {
      return true;
    }

    @Override
    public T createInstance() {
      return null;
    }

    @Override
    public T copy(T from) {
      return from;
    }

    @Override
    public T copy(T from, T reuse) {
      return from;
    }

    @Override
    public int getLength() {
      return -1;
    }

    @Override
    public void serialize(T value, DataOutputView out) throws IOException {
      out.writeByte(FORMAT_VERSION);
      write(value, out);
    }

    @Override
    public T deserialize(DataInputView in) throws IOException {
      int version = in.readByte();
      if (version != FORMAT_VERSION) {
        throw new IOException("a " + what + " in the fence index's state is of format " + version
            + ", this release reads format " + FORMAT_VERSION);
      }
      return read(in);
    }

    @Override
    public T deserialize(T reuse, DataInputView in) throws IOException {
      return deserialize(in);
    }

    @Override
    public void copy(DataInputView source, DataOutputView target) throws IOException {
      serialize(deserialize(source), target);
    }

    abstract void write(T value, DataOutputView out) throws IOException;

    abstract T read(DataInputView in) throws IOException;
  }

  /** Of {@link BucketFingerprint}. */
  public static final class FingerprintSerializer extends Versioned<BucketFingerprint> {

    private static final long serialVersionUID = 1L;

    public static final FingerprintSerializer INSTANCE = new FingerprintSerializer();

    private FingerprintSerializer() {
      super("bucket fingerprint");
    }

    @Override
    void write(BucketFingerprint f, DataOutputView out) throws IOException {
      out.writeInt(f.bucket());
      out.writeLong(f.fenceCount());
      out.writeLong(f.checksum());
      out.writeLong(f.version());
      out.writeLong(f.lsn());
      out.writeLong(f.commitTime());
    }

    @Override
    BucketFingerprint read(DataInputView in) throws IOException {
      return new BucketFingerprint(in.readInt(), in.readLong(), in.readLong(), in.readLong(), in.readLong(), in.readLong());
    }

    @Override
    public TypeSerializerSnapshot<BucketFingerprint> snapshotConfiguration() {
      return new FingerprintSnapshot();
    }
  }

  /** Serializer snapshot of {@link FingerprintSerializer}; the version byte carries the format's evolution. */
  public static final class FingerprintSnapshot extends SimpleTypeSerializerSnapshot<BucketFingerprint> {
    public FingerprintSnapshot() {
      super(() -> FingerprintSerializer.INSTANCE);
    }
  }

  /** Of {@link StreamPosition}. */
  public static final class PositionSerializer extends Versioned<StreamPosition> {

    private static final long serialVersionUID = 1L;

    public static final PositionSerializer INSTANCE = new PositionSerializer();

    private PositionSerializer() {
      super("stream position");
    }

    @Override
    void write(StreamPosition p, DataOutputView out) throws IOException {
      out.writeLong(p.lsn());
      out.writeLong(p.commitTime());
    }

    @Override
    StreamPosition read(DataInputView in) throws IOException {
      return new StreamPosition(in.readLong(), in.readLong());
    }

    @Override
    public TypeSerializerSnapshot<StreamPosition> snapshotConfiguration() {
      return new PositionSnapshot();
    }
  }

  /** Serializer snapshot of {@link PositionSerializer}. */
  public static final class PositionSnapshot extends SimpleTypeSerializerSnapshot<StreamPosition> {
    public PositionSnapshot() {
      super(() -> PositionSerializer.INSTANCE);
    }
  }
}
