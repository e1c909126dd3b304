package dev.geofence.job.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.ledger.Queued;
import dev.geofence.state.time.StayRules;
import java.io.IOException;
import java.util.List;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.junit.jupiter.api.Test;

class QueuedSerializerTest {

  /**
   * Edits of the stream (an upsert with its geometry and tenant, a refused upsert, a delete, an
   * upsert keeping the geometry) and fingerprints read back as written.
   */
  @Test
  void queuedChangesReadBackAsWritten() throws Exception {
    FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());
    List<Queued> written = List.of(
        Queued.of(FenceEdit.upsert("a", 3, reader.readWkt("MULTIPOLYGON(((0 0, 10 0, 10 10, 0 10, 0 0), (2 2, 2 8, 8 8, 8 2, 2 2)))")
            .geometry(), "tenant-é", StayRules.NO_FENCE_DELAY, EditOrigin.STREAM, 0x16B3748L, 1_700_000_000_123L)),
        Queued.of(FenceEdit.refusedUpsert("b", 7, null, EditOrigin.STREAM, 5, 6)),
        Queued.of(FenceEdit.delete("c", 2, EditOrigin.STREAM, 8, 9)),
        Queued.of(FenceEdit.upsertKeepingGeometry("d", 4, "acme", 5000, EditOrigin.STREAM, 12, 13)),
        Queued.of(new BucketFingerprint(4095, 12, -9123025917352333894L, 44, 10, 11)));
    DataOutputSerializer out = new DataOutputSerializer(256);
    for (Queued change : written) {
      QueuedSerializer.INSTANCE.serialize(change, out);
    }
    DataInputDeserializer in = new DataInputDeserializer(out.getCopyOfBuffer());
    for (Queued change : written) {
      assertThat(QueuedSerializer.INSTANCE.duplicate().deserialize(in)).isEqualTo(change);
    }
    assertThat(in.available()).isZero();
  }

  @Test
  void aValueOfAnotherFormatFailsTheRestoreNamingIt() throws Exception {
    DataOutputSerializer out = new DataOutputSerializer(16);
    out.writeByte(3);
    assertThatThrownBy(() -> QueuedSerializer.INSTANCE.deserialize(new DataInputDeserializer(out.getCopyOfBuffer())))
        .isInstanceOf(IOException.class)
        .hasMessage("a queued edit in the fence index's state is of format 3, this release reads formats up to 2");
  }

  /** Only an upsert keeping the geometry is written in format 2: a release before it reads the others. */
  @Test
  void onlyAnUpsertKeepingTheGeometryIsWrittenInTheNewerFormat() throws Exception {
    DataOutputSerializer out = new DataOutputSerializer(64);
    QueuedSerializer.INSTANCE.serialize(Queued.of(FenceEdit.delete("c", 2, EditOrigin.STREAM, 8, 9)), out);
    assertThat(out.getCopyOfBuffer()[0]).isEqualTo((byte) 1);
    out.clear();
    QueuedSerializer.INSTANCE.serialize(Queued.of(FenceEdit.upsertKeepingGeometry("d", 4, null, 0, EditOrigin.STREAM, 12, 13)), out);
    assertThat(out.getCopyOfBuffer()[0]).isEqualTo((byte) 2);
  }
}
