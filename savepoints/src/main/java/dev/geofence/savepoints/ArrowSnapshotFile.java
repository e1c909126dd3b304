package dev.geofence.savepoints;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.state.readiness.Lsn;
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
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.LinearRing;
import org.locationtech.jts.geom.Polygon;
import org.locationtech.jts.io.WKBWriter;

/**
 * The columnar snapshot file (issue 5, {@code export} and {@code bootstrap --from-arrow}): an Arrow
 * IPC file with a row per fence (live or tombstone): id, seq, deleted, tenant, bounding box, the
 * geometry as polygon offsets, ring offsets and flat coordinates, as the job holds it, and the
 * objects inside it with since when (so that a job restored from it goes on without new ENTERs). The
 * schema's metadata carries the file format version, the stream position and its commit time, the
 * max parallelism and every bucket fingerprint with its version: all a bootstrap needs to write a
 * savepoint the job restores from, without reading the database.
 */
public final class ArrowSnapshotFile {

  /** The format this release writes and reads; another fails to import with a clear error. */
  public static final int FORMAT_VERSION = 1;

  static final String FORMAT_KEY = "geofence.snapshot.format";
  static final String LSN_KEY = "geofence.stream.lsn";
  static final String COMMIT_TIME_KEY = "geofence.stream.commit_time";
  static final String MAX_PARALLELISM_KEY = "geofence.max_parallelism";
  static final String BUCKETS_KEY = "geofence.bucket_fingerprints";

  private static final int BATCH = 8192;

  /** A file's content: its rows as the bootstrap takes them, and where the stream was. */
  public static final class Content {
    public final List<BootstrapRow> rows;
    public final long lsn;
    public final long commitTime;
    public final int maxParallelism;

    Content(List<BootstrapRow> rows, long lsn, long commitTime, int maxParallelism) {
      this.rows = rows;
      this.lsn = lsn;
      this.commitTime = commitTime;
      this.maxParallelism = maxParallelism;
    }
  }

  private ArrowSnapshotFile() {}

  private static Schema schema(Map<String, String> metadata) {
    FieldType int32 = FieldType.notNullable(new ArrowType.Int(32, true));
    FieldType float64 = FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE));
    return new Schema(List.of(
        Field.notNullable("id", ArrowType.Utf8.INSTANCE),
        Field.notNullable("seq", new ArrowType.Int(64, true)),
        Field.notNullable("deleted", ArrowType.Bool.INSTANCE),
        Field.nullable("tenant", ArrowType.Utf8.INSTANCE),
        Field.nullable("min_x", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
        Field.nullable("min_y", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
        Field.nullable("max_x", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
        Field.nullable("max_y", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
        new Field("polygon_starts", FieldType.nullable(ArrowType.List.INSTANCE), List.of(new Field("item", int32, null))),
        new Field("ring_starts", FieldType.nullable(ArrowType.List.INSTANCE), List.of(new Field("item", int32, null))),
        new Field("coordinates", FieldType.nullable(ArrowType.List.INSTANCE), List.of(new Field("item", float64, null))),
        new Field("members", FieldType.notNullable(ArrowType.List.INSTANCE),
            List.of(new Field("item", FieldType.notNullable(ArrowType.Utf8.INSTANCE), null))),
        new Field("member_since", FieldType.notNullable(ArrowType.List.INSTANCE),
            List.of(new Field("item", FieldType.notNullable(new ArrowType.Int(64, true)), null)))),
        metadata);
  }

  /** Writes the savepoint's fences to {@code file}; returns the number of rows. */
  public static long export(String savepoint, Path file, java.io.PrintStream progress) throws Exception {
    List<FenceStateEntry> fences = new ArrayList<>();
    ObjectMapper json = new ObjectMapper();
    ArrayNode buckets = json.createArrayNode();
    SavepointInspection inspection = SavepointInspection.read(savepoint, 0, entry -> {
      if (entry.kind == FenceStateEntry.Kind.FENCE && !entry.unreadable) {
        fences.add(entry);
      } else if (entry.kind == FenceStateEntry.Kind.BUCKET_STATS) {
        buckets.add(json.createArrayNode().add(Integer.parseInt(entry.id)).add(entry.fenceCount).add(entry.checksum).add(entry.seq));
      }
    }, progress);
    if (inspection.unreadable > 0) {
      throw new IllegalArgumentException(inspection.unreadable + " fences of the savepoint are of a state format this release cannot read");
    }
    Map<String, String> metadata = Map.of(
        FORMAT_KEY, Integer.toString(FORMAT_VERSION),
        LSN_KEY, Lsn.format(inspection.restoredLsn),
        COMMIT_TIME_KEY, Long.toString(inspection.restoredCommitTime),
        MAX_PARALLELISM_KEY, Integer.toString(inspection.maxParallelism),
        BUCKETS_KEY, buckets.toString());
    try (BufferAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(schema(metadata), allocator);
        FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        ArrowFileWriter writer = new ArrowFileWriter(root, null, channel)) {
      writer.start();
      Progress written = new Progress(progress, "write " + file + ", fences", fences.size());
      for (int from = 0; from < fences.size(); from += BATCH) {
        int n = Math.min(BATCH, fences.size() - from);
        root.allocateNew();
        for (int i = 0; i < n; i++) {
          write(root, i, fences.get(from + i));
          written.tick();
        }
        root.setRowCount(n);
        writer.writeBatch();
      }
      writer.end();
      written.finish();
    }
    return fences.size();
  }

  private static void write(VectorSchemaRoot root, int i, FenceStateEntry fence) {
    ((VarCharVector) root.getVector("id")).setSafe(i, fence.id.getBytes(StandardCharsets.UTF_8));
    ((BigIntVector) root.getVector("seq")).setSafe(i, fence.seq);
    ((BitVector) root.getVector("deleted")).setSafe(i, fence.live ? 0 : 1);
    VarCharVector tenant = (VarCharVector) root.getVector("tenant");
    if (fence.tenant == null) {
      tenant.setNull(i);
    } else {
      tenant.setSafe(i, fence.tenant.getBytes(StandardCharsets.UTF_8));
    }
    UnionListWriter members = ((ListVector) root.getVector("members")).getWriter();
    members.setPosition(i);
    members.startList();
    for (String member : fence.memberIds) {
      members.writeVarChar(member);
    }
    members.endList();
    UnionListWriter since = ((ListVector) root.getVector("member_since")).getWriter();
    since.setPosition(i);
    since.startList();
    for (long t : fence.memberSince) {
      since.writeBigInt(t);
    }
    since.endList();
    double[] xy = fence.coordinates;
    String[] box = {"min_x", "min_y", "max_x", "max_y"};
    if (xy == null) {
      for (String name : box) {
        ((Float8Vector) root.getVector(name)).setNull(i);
      }
      return;
    }
    double[] bounds = {Double.MAX_VALUE, Double.MAX_VALUE, -Double.MAX_VALUE, -Double.MAX_VALUE};
    for (int v = 0; v < xy.length; v += 2) {
      bounds[0] = Math.min(bounds[0], xy[v]);
      bounds[1] = Math.min(bounds[1], xy[v + 1]);
      bounds[2] = Math.max(bounds[2], xy[v]);
      bounds[3] = Math.max(bounds[3], xy[v + 1]);
    }
    for (int b = 0; b < 4; b++) {
      ((Float8Vector) root.getVector(box[b])).setSafe(i, bounds[b]);
    }
    writeInts((ListVector) root.getVector("polygon_starts"), i, fence.polygonStarts);
    writeInts((ListVector) root.getVector("ring_starts"), i, fence.ringStarts);
    UnionListWriter coordinates = ((ListVector) root.getVector("coordinates")).getWriter();
    coordinates.setPosition(i);
    coordinates.startList();
    for (double v : xy) {
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
   * Reads a file {@link #export} wrote, as the rows a bootstrap writes: fences (geometry as WKB,
   * decoded again by the bootstrap exactly as the job decodes it), bucket fingerprints and, for
   * every key group, the stream position.
   *
   * @throws IllegalArgumentException for a file of another format version, or not one of ours
   */
  public static Content read(Path file) throws IOException {
    try (BufferAllocator allocator = new RootAllocator();
        FileChannel channel = FileChannel.open(file, StandardOpenOption.READ);
        ArrowFileReader reader = new ArrowFileReader(channel, allocator)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      Map<String, String> metadata = root.getSchema().getCustomMetadata();
      String format = metadata == null ? null : metadata.get(FORMAT_KEY);
      if (format == null) {
        throw new IllegalArgumentException(file + " is not a geofence snapshot file (no " + FORMAT_KEY + " in its schema)");
      }
      if (!format.equals(Integer.toString(FORMAT_VERSION))) {
        throw new IllegalArgumentException(file + " is of snapshot format " + format
            + ", which this release cannot read (it reads " + FORMAT_VERSION + ")");
      }
      List<BootstrapRow> rows = new ArrayList<>();
      GeometryFactory factory = new GeometryFactory();
      WKBWriter wkb = new WKBWriter();
      while (reader.loadNextBatch()) {
        for (int i = 0; i < root.getRowCount(); i++) {
          rows.add(fence(root, i, factory, wkb));
        }
      }
      for (JsonNode bucket : new ObjectMapper().readTree(metadata.get(BUCKETS_KEY))) {
        FenceChange stats = new FenceChange();
        stats.kind = FenceChange.Kind.BUCKET_STATS;
        stats.snapshot = true;
        stats.bucket = bucket.get(0).asInt();
        stats.fenceCount = bucket.get(1).asLong();
        stats.checksum = bucket.get(2).asLong();
        stats.seq = bucket.get(3).asLong();
        rows.add(new BootstrapRow(stats));
      }
      return new Content(rows, Lsn.parse(metadata.get(LSN_KEY)), Long.parseLong(metadata.get(COMMIT_TIME_KEY)),
          Integer.parseInt(metadata.get(MAX_PARALLELISM_KEY)));
    }
  }

  private static BootstrapRow fence(VectorSchemaRoot root, int i, GeometryFactory factory, WKBWriter wkb) {
    BootstrapRow row = new BootstrapRow(new FenceChange());
    FenceChange change = row.change;
    ListVector members = (ListVector) root.getVector("members");
    VarCharVector memberIds = (VarCharVector) members.getDataVector();
    BigIntVector memberSince = (BigIntVector) ((ListVector) root.getVector("member_since")).getDataVector();
    int first = members.getElementStartIndex(i);
    row.memberIds = new String[members.getElementEndIndex(i) - first];
    row.memberSince = new long[row.memberIds.length];
    for (int m = 0; m < row.memberIds.length; m++) {
      row.memberIds[m] = new String(memberIds.get(first + m), StandardCharsets.UTF_8);
      row.memberSince[m] = memberSince.get(((ListVector) root.getVector("member_since")).getElementStartIndex(i) + m);
    }
    change.kind = FenceChange.Kind.FENCE;
    change.snapshot = true;
    change.fenceId = new String(((VarCharVector) root.getVector("id")).get(i), StandardCharsets.UTF_8);
    change.seq = ((BigIntVector) root.getVector("seq")).get(i);
    change.delete = ((BitVector) root.getVector("deleted")).get(i) == 1;
    VarCharVector tenant = (VarCharVector) root.getVector("tenant");
    change.tenant = tenant.isNull(i) ? null : new String(tenant.get(i), StandardCharsets.UTF_8);
    ListVector coordinates = (ListVector) root.getVector("coordinates");
    if (change.delete || coordinates.isNull(i)) {
      // A tombstone, or a fence whose every version was refused: no geometry, as the job held it.
      return row;
    }
    int[] polygons = ints((ListVector) root.getVector("polygon_starts"), i);
    int[] rings = ints((ListVector) root.getVector("ring_starts"), i);
    Float8Vector xy = (Float8Vector) coordinates.getDataVector();
    int base = coordinates.getElementStartIndex(i);
    Polygon[] parts = new Polygon[polygons.length - 1];
    for (int p = 0; p < parts.length; p++) {
      LinearRing shell = ring(factory, xy, base, rings, polygons[p]);
      LinearRing[] holes = new LinearRing[polygons[p + 1] - polygons[p] - 1];
      for (int h = 0; h < holes.length; h++) {
        holes[h] = ring(factory, xy, base, rings, polygons[p] + 1 + h);
      }
      parts[p] = factory.createPolygon(shell, holes);
    }
    change.geometryBytes = wkb.write(parts.length == 1 ? parts[0] : factory.createMultiPolygon(parts));
    return row;
  }

  private static LinearRing ring(GeometryFactory factory, Float8Vector xy, int base, int[] rings, int r) {
    Coordinate[] ring = new Coordinate[rings[r + 1] - rings[r]];
    for (int v = 0; v < ring.length; v++) {
      int at = base + 2 * (rings[r] + v);
      ring[v] = new Coordinate(xy.get(at), xy.get(at + 1));
    }
    return factory.createLinearRing(ring);
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
}
