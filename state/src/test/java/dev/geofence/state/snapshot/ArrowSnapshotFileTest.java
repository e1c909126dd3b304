package dev.geofence.state.snapshot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.shape.Shapes;
import dev.geofence.state.time.StayRules;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.io.WKBWriter;

/**
 * The columnar snapshot file: what is written is what is read, a file without dwell delays is of
 * the format an earlier release reads, one written before delays still reads, and a file of
 * another format is refused.
 */
class ArrowSnapshotFileTest {

  @TempDir Path temp;

  /**
   * Live fences of every shape kind (holes, multipolygons, repaired ones), tombstones and fences
   * with no usable version, with and without tenants, dwell delays (a few of their own, a few 0,
   * most none) and members, across more than one record batch, and a stream position with the high
   * bit set: all read back as written.
   */
  @Test
  void whatIsWrittenIsRead() throws Exception {
    Shapes shapes = new Shapes(new GeometryFactory(), 7);
    SplittableRandom random = shapes.random();
    FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());
    WKBWriter wkb = new WKBWriter();
    List<SnapshotFence> fences = new ArrayList<>();
    for (int i = 0; i < 9_000; i++) {
      int kind = random.nextInt(10);
      FenceGeometry geometry = kind < 2 ? null
          : reader.readWkb(wkb.write(shapes.any(random.nextDouble(-170, 170), random.nextDouble(-80, 80), 0.5))).geometry();
      String[] members = new String[random.nextInt(4)];
      long[] since = new long[members.length];
      for (int m = 0; m < members.length; m++) {
        members[m] = "object-ü-" + random.nextInt(1000);
        since[m] = random.nextLong();
      }
      int delayKind = random.nextInt(10);
      long delay = delayKind == 0 ? 0 : delayKind == 1 ? 1 + random.nextLong(Long.MAX_VALUE - 1) : StayRules.NO_FENCE_DELAY;
      fences.add(new SnapshotFence("fence-" + i, 1 + random.nextInt(100), kind == 0, random.nextBoolean() ? null : "tenant-" + kind,
          delay, geometry, members, since));
    }
    List<SnapshotBucket> buckets = new ArrayList<>();
    for (int b = 0; b < 4096; b++) {
      buckets.add(new SnapshotBucket(b, random.nextInt(500), random.nextLong(), random.nextInt(1 << 20)));
    }
    FenceSnapshot written = new FenceSnapshot(0x8000_0001_0000_0ABCL, 1_764_500_000_123L, 4_294_967_301L, 256, buckets, fences);
    Path file = temp.resolve("fences.arrow");
    AtomicInteger ticks = new AtomicInteger();
    ArrowSnapshotFile.write(file, written, ticks::incrementAndGet);
    assertThat(ticks).as("a progress tick per fence").hasValue(fences.size());

    assertThat(format(file)).as("with dwell delays").isEqualTo("2");

    FenceSnapshot read = ArrowSnapshotFile.read(file);
    assertThat(read.lsn()).isEqualTo(written.lsn());
    assertThat(read.commitTime()).isEqualTo(written.commitTime());
    assertThat(read.horizon()).isEqualTo(written.horizon());
    assertThat(read.maxParallelism()).isEqualTo(256);
    assertThat(read.buckets()).isEqualTo(buckets);
    assertThat(read.fences()).hasSameSizeAs(fences);
    for (int i = 0; i < fences.size(); i++) {
      SnapshotFence expected = fences.get(i);
      SnapshotFence actual = read.fences().get(i);
      assertThat(actual).as("fence %d", i)
          .usingRecursiveComparison().isEqualTo(expected);
    }
  }

  /** The bounding box columns, for readers of the file that do not decode the geometry. */
  @Test
  void theBoundingBoxIsTheGeometrysEnvelope() throws Exception {
    FenceGeometry square = new FenceGeometryReader(GeometryReadOptions.defaults())
        .readWkt("POLYGON ((1 2, 5 2, 5 7, 1 7, 1 2))").geometry();
    Path file = temp.resolve("box.arrow");
    ArrowSnapshotFile.write(file, new FenceSnapshot(1, 2, 0, 128, List.of(), List.of(
        new SnapshotFence("box", 3, false, null, StayRules.NO_FENCE_DELAY, square, new String[0], new long[0]),
        new SnapshotFence("gone", 4, true, null, StayRules.NO_FENCE_DELAY, null, new String[0], new long[0]))), () -> { });
    try (BufferAllocator allocator = new RootAllocator();
        ArrowFileReader reader = new ArrowFileReader(FileChannel.open(file, StandardOpenOption.READ), allocator)) {
      assertThat(reader.loadNextBatch()).isTrue();
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      assertThat(List.of("min_x", "min_y", "max_x", "max_y").stream().map(c -> ((Float8Vector) root.getVector(c)).get(0)))
          .containsExactly(1.0, 2.0, 5.0, 7.0);
      assertThat(((Float8Vector) root.getVector("min_x")).isNull(1)).as("a tombstone has no box").isTrue();
    }
  }

  /**
   * Without a dwell delay of its own in any fence, a file is of format 1, which an earlier release
   * reads: what it does not read there is only the column of nulls. Each fence reads back without one.
   */
  @Test
  void aFileWithoutDwellDelaysIsOfTheFormatBeforeThem() throws Exception {
    Path file = temp.resolve("no-delays.arrow");
    ArrowSnapshotFile.write(file, snapshot(StayRules.NO_FENCE_DELAY), () -> { });
    assertThat(format(file)).isEqualTo("1");
    assertThat(ArrowSnapshotFile.read(file).fences()).extracting(SnapshotFence::dwellDelay)
        .containsExactly(StayRules.NO_FENCE_DELAY, StayRules.NO_FENCE_DELAY);

    ArrowSnapshotFile.write(file, snapshot(0), () -> { });
    assertThat(format(file)).as("a delay of 0 is one of the fence's own").isEqualTo("2");
    assertThat(ArrowSnapshotFile.read(file).fences()).extracting(SnapshotFence::dwellDelay)
        .containsExactly(0L, StayRules.NO_FENCE_DELAY);
  }

  /**
   * A file as a release before dwell delays wrote it (format 1, no {@code dwell_delay_ms} column,
   * no transaction horizon) reads whole, each fence without a delay of its own, the position without
   * a horizon.
   */
  @Test
  void aFileWrittenBeforeDwellDelaysReadsWithoutThem() throws Exception {
    Path current = temp.resolve("current.arrow");
    FenceSnapshot written = snapshot(90_000);
    ArrowSnapshotFile.write(current, written, () -> { });
    Path old = temp.resolve("old.arrow");
    withoutDwellDelays(current, old);

    FenceSnapshot read = ArrowSnapshotFile.read(old);
    assertThat(read.lsn()).isEqualTo(written.lsn());
    assertThat(written.horizon()).isPositive();
    assertThat(read.horizon()).isZero();
    assertThat(read.buckets()).isEqualTo(written.buckets());
    assertThat(read.fences()).extracting(SnapshotFence::dwellDelay).containsOnly(StayRules.NO_FENCE_DELAY);
    assertThat(read.fences()).usingRecursiveFieldByFieldElementComparatorIgnoringFields("dwellDelay")
        .isEqualTo(written.fences());
  }

  @Test
  void aFileOfAnotherFormatIsRefused() throws Exception {
    Path future = file("future.arrow", Map.of(ArrowSnapshotFile.FORMAT_KEY, "3"));
    assertThatThrownBy(() -> ArrowSnapshotFile.read(future)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("snapshot format 3").hasMessageContaining("it reads 1 and 2");
    Path other = file("other.arrow", Map.of("something", "else"));
    assertThatThrownBy(() -> ArrowSnapshotFile.read(other)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is not a geofence snapshot file");
  }

  /** A live fence with a member and this dwell delay, a tombstone, and a bucket fingerprint. */
  private static FenceSnapshot snapshot(long dwellDelay) throws Exception {
    FenceGeometry square = new FenceGeometryReader(GeometryReadOptions.defaults())
        .readWkt("POLYGON ((1 2, 5 2, 5 7, 1 7, 1 2))").geometry();
    return new FenceSnapshot(0x1_0000_0010L, 20, 731, 128, List.of(new SnapshotBucket(7, 1, 99, 3)), List.of(
        new SnapshotFence("live", 3, false, "t", dwellDelay, square, new String[] {"object"}, new long[] {15}),
        new SnapshotFence("gone", 4, true, null, StayRules.NO_FENCE_DELAY, null, new String[0], new long[0])));
  }

  /** The format a file's schema names. */
  private static String format(Path file) throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        ArrowFileReader reader = new ArrowFileReader(FileChannel.open(file, StandardOpenOption.READ), allocator)) {
      return reader.getVectorSchemaRoot().getSchema().getCustomMetadata().get(ArrowSnapshotFile.FORMAT_KEY);
    }
  }

  /**
   * Copies {@code from} to {@code to} as a release before dwell delays wrote it: format 1, without
   * their column and without the position's transaction horizon.
   */
  private static void withoutDwellDelays(Path from, Path to) throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        ArrowFileReader reader = new ArrowFileReader(FileChannel.open(from, StandardOpenOption.READ), allocator)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      Map<String, String> metadata = new HashMap<>(root.getSchema().getCustomMetadata());
      metadata.put(ArrowSnapshotFile.FORMAT_KEY, "1");
      assertThat(metadata.remove(ArrowSnapshotFile.HORIZON_KEY)).isNotNull();
      List<FieldVector> vectors = root.getFieldVectors().stream()
          .filter(v -> !v.getName().equals(ArrowSnapshotFile.DWELL_DELAY)).toList();
      assertThat(vectors).hasSize(root.getFieldVectors().size() - 1);
      // The old file's root shares the vectors the reader loads each batch into.
      VectorSchemaRoot old = new VectorSchemaRoot(new Schema(vectors.stream().map(FieldVector::getField).toList(), metadata), vectors, 0);
      try (FileChannel channel = FileChannel.open(to, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
          ArrowFileWriter writer = new ArrowFileWriter(old, null, channel)) {
        writer.start();
        while (reader.loadNextBatch()) {
          old.setRowCount(root.getRowCount());
          writer.writeBatch();
        }
        writer.end();
      }
    }
  }

  /** An empty Arrow file whose schema has only an id column and {@code metadata}. */
  private Path file(String name, Map<String, String> metadata) throws Exception {
    Path file = temp.resolve(name);
    Schema schema = new Schema(List.of(Field.notNullable("id", ArrowType.Utf8.INSTANCE)), metadata);
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator);
        FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        ArrowFileWriter writer = new ArrowFileWriter(root, null, channel)) {
      writer.start();
      writer.end();
    }
    return file;
  }
}
