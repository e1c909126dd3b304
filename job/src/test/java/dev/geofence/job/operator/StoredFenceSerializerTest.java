package dev.geofence.job.operator;

import dev.geofence.state.ledger.StoredFence;
import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.job.GeneratedFences;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.time.StayRules;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.junit.jupiter.api.Test;

/** Format 1 of the fence state, byte for byte, and read back whole from a stream as a heap restore reads it. */
class StoredFenceSerializerTest {

  private final FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());

  @Test
  void writesFormatOneByteForByteAsDocumented() throws Exception {
    for (StoredFence fence : fences(300)) {
      DataOutputSerializer written = new DataOutputSerializer(64);
      StoredFenceSerializer.INSTANCE.duplicate().serialize(fence, written);
      assertThat(written.getCopyOfBuffer()).as("%s", fence).isEqualTo(formatOne(fence));
    }
  }

  @Test
  void readsWhatItWroteThroughAStreamThatHandsOutFewBytesPerRead() throws Exception {
    List<StoredFence> fences = fences(300);
    StoredFenceSerializer serializer = (StoredFenceSerializer) StoredFenceSerializer.INSTANCE.duplicate();
    DataOutputSerializer written = new DataOutputSerializer(64);
    for (StoredFence fence : fences) {
      serializer.serialize(fence, written);
    }
    // A file stream Flink does not buffer may return fewer bytes than asked: readFully must cope.
    InputStream trickle = new ByteArrayInputStream(written.getCopyOfBuffer()) {
      @Override
      public synchronized int read(byte[] b, int off, int len) {
        return super.read(b, off, Math.min(len, 7));
      }
    };
    DataInputViewStreamWrapper in = new DataInputViewStreamWrapper(trickle);
    for (StoredFence expected : fences) {
      StoredFence read = serializer.deserialize(in);
      assertThat(read.seq()).isEqualTo(expected.seq());
      assertThat(read.deleted()).isEqualTo(expected.deleted());
      assertThat(read.tenant()).isEqualTo(expected.tenant());
      assertThat(read.dwellDelay()).isEqualTo(expected.dwellDelay());
      assertThat(read.commitLsn()).isEqualTo(expected.commitLsn());
      assertThat(read.commitTime()).isEqualTo(expected.commitTime());
      if (expected.geometry() == null) {
        assertThat(read.geometry()).isNull();
      } else {
        assertThat(read.geometry().coordinates()).containsExactly(expected.geometry().coordinates());
        assertThat(read.geometry().ringStarts()).containsExactly(expected.geometry().ringStarts());
        assertThat(read.geometry().polygonStarts()).containsExactly(expected.geometry().polygonStarts());
      }
    }
  }

  @Test
  void aValueOfAnotherFormatIsSkippedWholeAndReadAsUnreadable() throws Exception {
    DataOutputSerializer written = new DataOutputSerializer(64);
    new StoredFenceSerializer((byte) 9).serialize(fences(1).get(0), written);
    StoredFence after = fences(2).get(1);
    StoredFenceSerializer.INSTANCE.duplicate().serialize(after, written);
    DataInputViewStreamWrapper in = new DataInputViewStreamWrapper(new ByteArrayInputStream(written.getCopyOfBuffer()));
    assertThat(StoredFenceSerializer.INSTANCE.duplicate().deserialize(in).unreadable()).isTrue();
    assertThat(StoredFenceSerializer.INSTANCE.duplicate().deserialize(in).seq()).isEqualTo(after.seq());
  }

  @Test
  void aGeometryThatDoesNotDescribeClosedRingsIsReadAsUnreadable() throws Exception {
    DataOutputSerializer body = new DataOutputSerializer(64);
    body.writeLong(3);
    body.writeByte(2);
    body.writeLong(0);
    body.writeLong(0);
    body.writeInt(2); // polygon starts {0, 1}
    body.writeInt(0);
    body.writeInt(1);
    body.writeInt(2); // ring starts {0, 4}
    body.writeInt(0);
    body.writeInt(4);
    body.writeInt(8);
    for (double v : new double[] {0, 0, 1, 0, 1, 1, 0, 1}) { // four vertices, the last not the first
      body.writeDouble(v);
    }
    DataOutputSerializer value = new DataOutputSerializer(64);
    value.writeByte(1);
    value.writeInt(body.length());
    value.write(body.getCopyOfBuffer());
    DataInputViewStreamWrapper in = new DataInputViewStreamWrapper(new ByteArrayInputStream(value.getCopyOfBuffer()));
    assertThat(StoredFenceSerializer.INSTANCE.duplicate().deserialize(in).unreadable()).isTrue();
  }

  @Test
  void aValueWrittenBeforeDwellDelaysIsAFenceWithoutOne() throws Exception {
    StoredFence withDelay = fences(300).stream().filter(f -> f.dwellDelay() > 0).findFirst().orElseThrow();
    StoredFence without = new StoredFence(withDelay.seq(), withDelay.deleted(), withDelay.geometry(), withDelay.tenant(),
        StayRules.NO_FENCE_DELAY, withDelay.commitLsn(), withDelay.commitTime());
    // The earlier release's bytes are this release's without the flag and the delay: read as a fence without one.
    StoredFence read = StoredFenceSerializer.INSTANCE.duplicate().deserialize(new DataInputDeserializer(formatOne(without)));
    assertThat(read.dwellDelay()).isEqualTo(StayRules.NO_FENCE_DELAY);
    assertThat(read.seq()).isEqualTo(withDelay.seq());
    byte[] bytes = formatOne(withDelay);
    assertThat(StoredFenceSerializer.INSTANCE.duplicate().deserialize(new DataInputDeserializer(bytes)).dwellDelay())
        .isEqualTo(withDelay.dwellDelay());
  }

  /** Live fences of generated shapes, a multipolygon with a hole, tombstones, refused-only versions, tenants, dwell delays. */
  private List<StoredFence> fences(int n) throws Exception {
    SplittableRandom random = new SplittableRandom(7);
    List<StoredFence> fences = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      FenceGeometry geometry = switch (i % 5) {
        case 0 -> null;
        case 1 -> reader.readWkt("MULTIPOLYGON(((0 0, 10 0, 10 10, 0 10, 0 0), (2 2, 2 8, 8 8, 8 2, 2 2)), ((20 20, 30 20, 25 30, 20 20)))").geometry();
        default -> reader.readWkb(new org.locationtech.jts.io.WKBWriter().write(
            GeneratedFences.star(random, random.nextDouble(170), random.nextDouble(80), 0.01 + random.nextDouble(), 4 + random.nextInt(400)))).geometry();
      };
      boolean deleted = i % 5 == 0 && i % 2 == 0;
      String tenant = i % 3 == 0 ? null : "tenant-é-" + (i % 7);
      long delay = geometry == null || i % 4 != 1 ? StayRules.NO_FENCE_DELAY : i % 8 == 1 ? 0 : random.nextLong(1L << 40);
      fences.add(new StoredFence(1 + random.nextInt(1000), deleted, geometry, tenant, delay, random.nextLong(), random.nextLong()));
    }
    return fences;
  }

  /** The format as its javadoc states it, written field by field with no help of the serializer's. */
  private static byte[] formatOne(StoredFence fence) throws Exception {
    DataOutputSerializer body = new DataOutputSerializer(64);
    body.writeLong(fence.seq());
    boolean delay = fence.dwellDelay() != StayRules.NO_FENCE_DELAY;
    body.writeByte((fence.deleted() ? 1 : 0) | (fence.geometry() != null ? 2 : 0) | (fence.tenant() != null ? 4 : 0) | (delay ? 8 : 0));
    body.writeLong(fence.commitLsn());
    body.writeLong(fence.commitTime());
    if (fence.tenant() != null) {
      body.writeUTF(fence.tenant());
    }
    if (fence.geometry() != null) {
      for (int[] ints : new int[][] {fence.geometry().polygonStarts(), fence.geometry().ringStarts()}) {
        body.writeInt(ints.length);
        for (int v : ints) {
          body.writeInt(v);
        }
      }
      body.writeInt(fence.geometry().coordinates().length);
      for (double v : fence.geometry().coordinates()) {
        body.writeDouble(v);
      }
    }
    if (delay) {
      body.writeLong(fence.dwellDelay());
    }
    DataOutputSerializer value = new DataOutputSerializer(64);
    value.writeByte(1);
    value.writeInt(body.length());
    value.write(body.getCopyOfBuffer());
    return value.getCopyOfBuffer();
  }
}
