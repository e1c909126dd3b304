package dev.geofence.job.operator;

import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.readiness.StreamPosition;
import java.io.IOException;
import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
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
 * (longs). Format 1 of a position: version, LSN, commit time; format 2 adds the transaction horizon
 * (a long), and a position of format 1 is read with none (0).
 */
public final class StoredStateSerializers {

  /** A fingerprint's format. */
  public static final byte FINGERPRINT_FORMAT_VERSION = 1;
  /** A position's format: 2 since it carries the transaction horizon. */
  public static final byte POSITION_FORMAT_VERSION = 2;

  private StoredStateSerializers() {}

  /** Of {@link BucketFingerprint}. */
  public static final class FingerprintSerializer extends VersionedSerializer<BucketFingerprint> {

    private static final long serialVersionUID = 1L;

    public static final FingerprintSerializer INSTANCE = new FingerprintSerializer();

    private FingerprintSerializer() {
      super("bucket fingerprint", FINGERPRINT_FORMAT_VERSION);
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
    BucketFingerprint read(int version, DataInputView in) throws IOException {
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
  public static final class PositionSerializer extends VersionedSerializer<StreamPosition> {

    private static final long serialVersionUID = 1L;

    public static final PositionSerializer INSTANCE = new PositionSerializer();

    private PositionSerializer() {
      super("stream position", POSITION_FORMAT_VERSION);
    }

    @Override
    void write(StreamPosition p, DataOutputView out) throws IOException {
      out.writeLong(p.lsn());
      out.writeLong(p.commitTime());
      out.writeLong(p.horizon());
    }

    @Override
    StreamPosition read(int version, DataInputView in) throws IOException {
      return new StreamPosition(in.readLong(), in.readLong(), version == 1 ? 0 : in.readLong());
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
