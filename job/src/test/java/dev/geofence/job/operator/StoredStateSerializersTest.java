package dev.geofence.job.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.readiness.StreamPosition;
import java.io.IOException;
import java.util.Random;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.junit.jupiter.api.Test;

class StoredStateSerializersTest {

  @Test
  void fingerprintsAndPositionsReadBackAsWritten() throws Exception {
    Random random = new Random(7);
    for (int i = 0; i < 1000; i++) {
      BucketFingerprint f = new BucketFingerprint(random.nextInt(4096), random.nextLong(), random.nextLong(), random.nextLong(),
          random.nextLong(), random.nextLong());
      DataOutputSerializer out = new DataOutputSerializer(64);
      StoredStateSerializers.FingerprintSerializer.INSTANCE.serialize(f, out);
      StreamPosition p = new StreamPosition(random.nextLong(), random.nextLong(), random.nextLong());
      StoredStateSerializers.PositionSerializer.INSTANCE.serialize(p, out);
      DataInputDeserializer in = new DataInputDeserializer(out.getCopyOfBuffer());
      assertThat(StoredStateSerializers.FingerprintSerializer.INSTANCE.deserialize(in)).isEqualTo(f);
      assertThat(StoredStateSerializers.PositionSerializer.INSTANCE.deserialize(in)).isEqualTo(p);
      assertThat(in.available()).isZero();
    }
  }

  @Test
  void aPositionOfTheFirstFormatIsReadWithoutAHorizon() throws Exception {
    DataOutputSerializer out = new DataOutputSerializer(64);
    out.writeByte(1);
    out.writeLong(11);
    out.writeLong(12);
    DataInputDeserializer in = new DataInputDeserializer(out.getCopyOfBuffer());
    assertThat(StoredStateSerializers.PositionSerializer.INSTANCE.deserialize(in)).isEqualTo(new StreamPosition(11, 12, 0));
    assertThat(in.available()).isZero();
  }

  @Test
  void aValueOfALaterFormatFailsTheRestoreNamingIt() throws Exception {
    DataOutputSerializer out = new DataOutputSerializer(64);
    out.writeByte(3);
    out.writeLong(1);
    out.writeLong(2);
    out.writeLong(3);
    out.writeLong(4);
    assertThatThrownBy(() -> StoredStateSerializers.PositionSerializer.INSTANCE.deserialize(new DataInputDeserializer(out.getCopyOfBuffer())))
        .isInstanceOf(IOException.class)
        .hasMessage("a stream position in the fence index's state is of format 3, this release reads formats up to 2");
  }
}
