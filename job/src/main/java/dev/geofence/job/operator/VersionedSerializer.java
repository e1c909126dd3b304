package dev.geofence.job.operator;

import java.io.IOException;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * A serializer of the fence index's own stored types: immutable values (a copy is the value
 * itself) written after a format version byte. A value of a version this release does not know
 * fails the restore with a message naming what it is; these values are few, nothing to rebuild
 * around (a fence's stored version, which is not, has {@link StoredFenceSerializer}, which skips
 * one it cannot read). Stateless unless a subclass says otherwise in {@link #duplicate()}.
 */
abstract class VersionedSerializer<T> extends TypeSerializer<T> {

  private static final long serialVersionUID = 1L;

  /** What a value is, for the message of one of an unknown format. */
  private final String what;
  private final byte formatVersion;

  VersionedSerializer(String what, byte formatVersion) {
    this.what = what;
    this.formatVersion = formatVersion;
  }

  /** The value's fields, after the version byte. */
  abstract void write(T value, DataOutputView out) throws IOException;

  /**
   * The value's fields, after a version byte of this format or an earlier one ({@code version}):
   * a format that gains a field reads the earlier one without it.
   */
  abstract T read(int version, DataInputView in) throws IOException;

  @Override
  public boolean isImmutableType() {
    return true;
  }

  @Override
  public TypeSerializer<T> duplicate() {
    return this;
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
    out.writeByte(formatVersion);
    write(value, out);
  }

  @Override
  public T deserialize(DataInputView in) throws IOException {
    int version = in.readByte();
    if (version < 1 || version > formatVersion) {
      throw new IOException("a " + what + " in the fence index's state is of format " + version + ", this release reads formats"
          + " up to " + formatVersion);
    }
    return read(version, in);
  }

  @Override
  public T deserialize(T reuse, DataInputView in) throws IOException {
    return deserialize(in);
  }

  @Override
  public void copy(DataInputView source, DataOutputView target) throws IOException {
    serialize(deserialize(source), target);
  }

  @Override
  public boolean equals(Object o) {
    return o != null && o.getClass() == getClass();
  }

  @Override
  public int hashCode() {
    return getClass().hashCode();
  }
}
