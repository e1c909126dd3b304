package dev.geofence.state.snapshot;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.time.StayRules;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.impl.UnionListWriter;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * The columnar snapshot file: an Arrow IPC file with a row per fence (live or tombstone) of a
 * {@link FenceSnapshot}: {@code id}, {@code seq}, {@code deleted}, {@code tenant}, {@code
 * dwell_delay_ms} (the fence's own dwell delay, 0 when it never DWELLs; null when it has none and
 * the job's holds), the bounding box ({@code min_x} ... {@code max_y}), the geometry as the job
 * holds it ({@code polygon_starts}, {@code ring_starts} and flat {@code coordinates}, as {@link
 * FenceGeometry}'s arrays) and the objects inside it ({@code members}, {@code member_since}). The
 * schema's metadata carries the file format version, the stream position with its commit time and
 * transaction horizon (absent from files of earlier releases: read as none, 0), the max parallelism and every bucket fingerprint with its version. Geometries read back are rebuilt
 * with {@link FenceGeometry#fromArrays}, so a corrupt file fails to read rather than answering
 * queries wrongly.
 *
 * <p>Format 2 is format 1 with a dwell delay in {@code dwell_delay_ms}. A file none of whose
 * fences has a delay of its own is written in format 1, which an earlier release reads, while one
 * with delays is refused by it rather than read without them. Files of format 1 written before the
 * column existed have no {@code dwell_delay_ms}: their fences read as having no delay of their own.
 *
 * <p>Stateless; Arrow needs {@code --add-opens=java.base/java.nio=ALL-UNNAMED} on Java 17.
 */
public final class ArrowSnapshotFile {

  /** The newest format, which a file with dwell delays is written in; a file of another fails to read with a clear error. */
  public static final int FORMAT_VERSION = 2;
  /** The format of a file without dwell delays, read too. */
  static final int FORMAT_WITHOUT_DELAYS = 1;

  static final String FORMAT_KEY = "geofence.snapshot.format";
  static final String LSN_KEY = "geofence.stream.lsn";
  static final String COMMIT_TIME_KEY = "geofence.stream.commit_time";
  static final String HORIZON_KEY = "geofence.stream.horizon";
  static final String MAX_PARALLELISM_KEY = "geofence.max_parallelism";
  static final String BUCKETS_KEY = "geofence.bucket_fingerprints";
  static final String DWELL_DELAY = "dwell_delay_ms";

  private static final int BATCH = 8192;
  private static final String[] BOX = {"min_x", "min_y", "max_x", "max_y"};

  private ArrowSnapshotFile() {}

  private static Schema schema(Map<String, String> metadata) {
    FieldType int32 = FieldType.notNullable(new ArrowType.Int(32, true));
    FieldType float64 = FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE));
    List<Field> fields = new ArrayList<>(List.of(
        Field.notNullable("id", ArrowType.Utf8.INSTANCE),
        Field.notNullable("seq", new ArrowType.Int(64, true)),
        Field.notNullable("deleted", ArrowType.Bool.INSTANCE),
        Field.nullable("tenant", ArrowType.Utf8.INSTANCE),
        Field.nullable(DWELL_DELAY, new ArrowType.Int(64, true))));
    for (String corner : BOX) {
      fields.add(Field.nullable(corner, new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)));
    }
    fields.addAll(List.of(
        new Field("polygon_starts", FieldType.nullable(ArrowType.List.INSTANCE), List.of(new Field("item", int32, null))),
        new Field("ring_starts", FieldType.nullable(ArrowType.List.INSTANCE), List.of(new Field("item", int32, null))),
        new Field("coordinates", FieldType.nullable(ArrowType.List.INSTANCE), List.of(new Field("item", float64, null))),
        new Field("members", FieldType.notNullable(ArrowType.List.INSTANCE),
            List.of(new Field("item", FieldType.notNullable(ArrowType.Utf8.INSTANCE), null))),
        new Field("member_since", FieldType.notNullable(ArrowType.List.INSTANCE),
            List.of(new Field("item", FieldType.notNullable(new ArrowType.Int(64, true)), null)))));
    return new Schema(fields, metadata);
  }

  /**
   * Writes {@code snapshot} to {@code file} (replacing it), calling {@code written} after each
   * fence (for progress).
   */
  public static void write(Path file, FenceSnapshot snapshot, Runnable written) throws IOException {
    ObjectMapper json = new ObjectMapper();
    ArrayNode buckets = json.createArrayNode();
    for (SnapshotBucket b : snapshot.buckets()) {
      buckets.add(json.createArrayNode().add(b.bucket()).add(b.fenceCount()).add(b.checksum()).add(b.version()));
    }
    List<SnapshotFence> fences = snapshot.fences();
    boolean delays = fences.stream().anyMatch(f -> f.dwellDelay() != StayRules.NO_FENCE_DELAY);
    Map<String, String> metadata = Map.of(
        FORMAT_KEY, Integer.toString(delays ? FORMAT_VERSION : FORMAT_WITHOUT_DELAYS),
        LSN_KEY, Lsn.format(snapshot.lsn()),
        COMMIT_TIME_KEY, Long.toString(snapshot.commitTime()),
        HORIZON_KEY, Long.toString(snapshot.horizon()),
        MAX_PARALLELISM_KEY, Integer.toString(snapshot.maxParallelism()),
        BUCKETS_KEY, buckets.toString());
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(schema(metadata), allocator);
        FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        ArrowFileWriter writer = new ArrowFileWriter(root, null, channel)) {
      writer.start();
      for (int from = 0; from < fences.size(); from += BATCH) {
        int n = Math.min(BATCH, fences.size() - from);
        root.allocateNew();
        for (int i = 0; i < n; i++) {
          writeRow(root, i, fences.get(from + i));
          written.run();
        }
        root.setRowCount(n);
        writer.writeBatch();
      }
      writer.end();
    }
  }

  private static void writeRow(VectorSchemaRoot root, int i, SnapshotFence fence) {
    ((VarCharVector) root.getVector("id")).setSafe(i, fence.id().getBytes(StandardCharsets.UTF_8));
    ((BigIntVector) root.getVector("seq")).setSafe(i, fence.seq());
    ((BitVector) root.getVector("deleted")).setSafe(i, fence.deleted() ? 1 : 0);
    VarCharVector tenant = (VarCharVector) root.getVector("tenant");
    if (fence.tenant() == null) {
      tenant.setNull(i);
    } else {
      tenant.setSafe(i, fence.tenant().getBytes(StandardCharsets.UTF_8));
    }
    BigIntVector delay = (BigIntVector) root.getVector(DWELL_DELAY);
    if (fence.dwellDelay() == StayRules.NO_FENCE_DELAY) {
      delay.setNull(i);
    } else {
      delay.setSafe(i, fence.dwellDelay());
    }
    UnionListWriter members = ((ListVector) root.getVector("members")).getWriter();
    members.setPosition(i);
    members.startList();
    for (String member : fence.memberIds()) {
      members.writeVarChar(member);
    }
    members.endList();
    UnionListWriter since = ((ListVector) root.getVector("member_since")).getWriter();
    since.setPosition(i);
    since.startList();
    for (long t : fence.memberSince()) {
      since.writeBigInt(t);
    }
    since.endList();
    FenceGeometry geometry = fence.geometry();
    if (geometry == null) {
      for (String corner : BOX) {
        ((Float8Vector) root.getVector(corner)).setNull(i);
      }
      return;
    }
    double[] bounds = {geometry.minX(), geometry.minY(), geometry.maxX(), geometry.maxY()};
    for (int b = 0; b < BOX.length; b++) {
      ((Float8Vector) root.getVector(BOX[b])).setSafe(i, bounds[b]);
    }
    writeInts((ListVector) root.getVector("polygon_starts"), i, geometry.polygonStarts());
    writeInts((ListVector) root.getVector("ring_starts"), i, geometry.ringStarts());
    UnionListWriter coordinates = ((ListVector) root.getVector("coordinates")).getWriter();
    coordinates.setPosition(i);
    coordinates.startList();
    for (double v : geometry.coordinates()) {
      coordinates.writeFloat8(v);
    }
    coordinates.endList();
  }

  private static void writeInts(ListVector vector, int i, int[] values) {
    UnionListWriter writer = vector.getWriter();
    writer.setPosition(i);
    writer.startList();
    for (int v : values) {
      writer.writeInt(v);
    }
    writer.endList();
  }

  /**
   * Reads a file {@link #write} wrote, or an earlier release's.
   *
   * @throws IllegalArgumentException for a file of another format version, not one of ours, or
   *     with a geometry that does not describe closed rings or an impossible dwell delay
   */
  public static FenceSnapshot read(Path file) throws IOException {
    try (BufferAllocator allocator = new RootAllocator();
        FileChannel channel = FileChannel.open(file, StandardOpenOption.READ);
        ArrowFileReader reader = new ArrowFileReader(channel, allocator)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      Map<String, String> metadata = root.getSchema().getCustomMetadata();
      String format = metadata == null ? null : metadata.get(FORMAT_KEY);
      if (format == null) {
        throw new IllegalArgumentException(file + " is not a geofence snapshot file (no " + FORMAT_KEY + " in its schema)");
      }
      if (!format.equals(Integer.toString(FORMAT_VERSION)) && !format.equals(Integer.toString(FORMAT_WITHOUT_DELAYS))) {
        throw new IllegalArgumentException(file + " is of snapshot format " + format
            + ", which this release cannot read (it reads " + FORMAT_WITHOUT_DELAYS + " and " + FORMAT_VERSION + ")");
      }
      List<SnapshotFence> fences = new ArrayList<>();
      while (reader.loadNextBatch()) {
        for (int i = 0; i < root.getRowCount(); i++) {
          fences.add(fence(root, i));
        }
      }
      List<SnapshotBucket> buckets = new ArrayList<>();
      for (JsonNode bucket : new ObjectMapper().readTree(metadata.get(BUCKETS_KEY))) {
        buckets.add(new SnapshotBucket(bucket.get(0).asInt(), bucket.get(1).asLong(), bucket.get(2).asLong(), bucket.get(3).asLong()));
      }
      return new FenceSnapshot(Lsn.parse(metadata.get(LSN_KEY)), Long.parseLong(metadata.get(COMMIT_TIME_KEY)),
          Long.parseLong(metadata.getOrDefault(HORIZON_KEY, "0")), Integer.parseInt(metadata.get(MAX_PARALLELISM_KEY)), buckets, fences);
    }
  }

  private static SnapshotFence fence(VectorSchemaRoot root, int i) {
    ListVector members = (ListVector) root.getVector("members");
    ListVector since = (ListVector) root.getVector("member_since");
    VarCharVector memberIds = (VarCharVector) members.getDataVector();
    BigIntVector memberSince = (BigIntVector) since.getDataVector();
    int first = members.getElementStartIndex(i);
    String[] ids = new String[members.getElementEndIndex(i) - first];
    long[] times = new long[ids.length];
    int firstTime = since.getElementStartIndex(i);
    for (int m = 0; m < ids.length; m++) {
      ids[m] = new String(memberIds.get(first + m), StandardCharsets.UTF_8);
      times[m] = memberSince.get(firstTime + m);
    }
    String id = new String(((VarCharVector) root.getVector("id")).get(i), StandardCharsets.UTF_8);
    VarCharVector tenant = (VarCharVector) root.getVector("tenant");
    // Absent from a file written before delays.
    BigIntVector delay = (BigIntVector) root.getVector(DWELL_DELAY);
    ListVector coordinates = (ListVector) root.getVector("coordinates");
    FenceGeometry geometry = null;
    if (!coordinates.isNull(i)) {
      geometry = FenceGeometry.fromArrays(doubles(coordinates, i), ints((ListVector) root.getVector("ring_starts"), i),
          ints((ListVector) root.getVector("polygon_starts"), i));
    }
    return new SnapshotFence(id, ((BigIntVector) root.getVector("seq")).get(i), ((BitVector) root.getVector("deleted")).get(i) == 1,
        tenant.isNull(i) ? null : new String(tenant.get(i), StandardCharsets.UTF_8),
        delay == null || delay.isNull(i) ? StayRules.NO_FENCE_DELAY : delay.get(i), geometry, ids, times);
  }

  private static int[] ints(ListVector vector, int i) {
    IntVector values = (IntVector) vector.getDataVector();
    int start = vector.getElementStartIndex(i);
    int[] out = new int[vector.getElementEndIndex(i) - start];
    for (int k = 0; k < out.length; k++) {
      out[k] = values.get(start + k);
    }
    return out;
  }

  private static double[] doubles(ListVector vector, int i) {
    Float8Vector values = (Float8Vector) vector.getDataVector();
    int start = vector.getElementStartIndex(i);
    double[] out = new double[vector.getElementEndIndex(i) - start];
    for (int k = 0; k < out.length; k++) {
      out[k] = values.get(start + k);
    }
    return out;
  }
}
