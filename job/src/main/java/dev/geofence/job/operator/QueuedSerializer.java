package dev.geofence.job.operator;

import dev.geofence.state.edit.EditKind;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.ledger.Queued;
import dev.geofence.state.ledger.StoredFence;
import java.io.IOException;
import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * The binary format of a change queued for the clock ({@link Queued}) in keyed state: the
 * project's own, so that the savepoint's format does not change with the stream's record (releases
 * before it kept the stream's {@code FenceChange} through Flink's generic serializer). A format
 * version byte first; a value of a version this release does not know fails the restore with a
 * message naming it (queued changes are few and seconds old: nothing to rebuild around).
 *
 * <p>Format 1: version, 0 and the fence's id and its version as {@link StoredFenceSerializer}
 * writes it (an edit of the stream), or 1 and a fingerprint's fields as {@link
 * StoredStateSerializers.FingerprintSerializer} writes them after its version byte. Format 2 adds
 * 2, as 0, for an upsert keeping the geometry in force (its version has none); only such a value
 * is written as format 2, so that a release before it refuses just those.
 */
public final class QueuedSerializer extends VersionedSerializer<Queued> {

  private static final long serialVersionUID = 1L;

  public static final byte FORMAT_VERSION = 2;
  /** The format of every value but an upsert keeping the geometry: what the release before reads. */
  private static final byte FIRST_FORMAT_VERSION = 1;
  public static final QueuedSerializer INSTANCE = new QueuedSerializer();

  private static final int EDIT = 0;
  private static final int FINGERPRINT = 1;
  private static final int EDIT_KEEPING_GEOMETRY = 2;

  /** The edits' versions: a serializer of its own per instance, as it buffers. */
  private final StoredFenceSerializer fences = (StoredFenceSerializer) StoredFenceSerializer.INSTANCE.duplicate();

  public QueuedSerializer() {
    super("queued edit", FORMAT_VERSION);
  }

  @Override
  public TypeSerializer<Queued> duplicate() {
    return new QueuedSerializer();
  }

  @Override
  public void serialize(Queued change, DataOutputView out) throws IOException {
    out.writeByte(keepsGeometry(change) ? FORMAT_VERSION : FIRST_FORMAT_VERSION);
    write(change, out);
  }

  private static boolean keepsGeometry(Queued change) {
    return change.edit() != null && change.edit().kind() == EditKind.UPSERT_KEEPING_GEOMETRY;
  }

  @Override
  void write(Queued change, DataOutputView out) throws IOException {
    if (change.edit() != null) {
      out.writeByte(keepsGeometry(change) ? EDIT_KEEPING_GEOMETRY : EDIT);
      out.writeUTF(change.edit().fenceId());
      fences.serialize(StoredFence.of(change.edit()), out);
    } else {
      out.writeByte(FINGERPRINT);
      StoredStateSerializers.FingerprintSerializer.INSTANCE.write(change.fingerprint(), out);
    }
  }

  @Override
  Queued read(int version, DataInputView in) throws IOException {
    int tag = in.readByte();
    if (tag == EDIT || tag == EDIT_KEEPING_GEOMETRY) {
      String fenceId = in.readUTF();
      StoredFence stored = fences.deserialize(in);
      if (stored.unreadable()) {
        throw new IOException("the queued edit of fence " + fenceId + " in the fence index's state cannot be read");
      }
      return Queued.of(tag == EDIT ? stored.asEdit(fenceId, EditOrigin.STREAM)
          : FenceEdit.upsertKeepingGeometry(fenceId, stored.seq(), stored.tenant(), stored.dwellDelay(), EditOrigin.STREAM,
              stored.commitLsn(), stored.commitTime()));
    }
    return Queued.of(StoredStateSerializers.FingerprintSerializer.INSTANCE.read(StoredStateSerializers.FINGERPRINT_FORMAT_VERSION, in));
  }

  @Override
  public TypeSerializerSnapshot<Queued> snapshotConfiguration() {
    return new Snapshot();
  }

  /** Serializer snapshot; the per-value version byte carries the format's evolution. */
  public static final class Snapshot extends SimpleTypeSerializerSnapshot<Queued> {
    public Snapshot() {
      super(QueuedSerializer::new);
    }
  }
}
