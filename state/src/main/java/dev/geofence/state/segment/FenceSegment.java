package dev.geofence.state.segment;

import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.geom.CoverageGrid;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.OutwardFloats;
import dev.geofence.state.geom.PointInFence;
import dev.geofence.state.time.StayRules;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.CRC32C;

/**
 * A bucket's stored fences as one immutable, format-versioned value whose stored form is the form
 * a reader uses: every field of every fence in a few flat arrays (ids, seqs, flags, commit
 * positions, tenants, dwell delays, boxes, coarse coverage grids, polygon and ring offsets, coordinates), an
 * open-addressing table of positions by id, and the bucket's count and checksum of live fences. A
 * fence is a position in these arrays, never an object: reading a segment allocates about twenty
 * arrays however many fences it holds, and asks nothing of the fences (no hash, no box, no grid)
 * that the writer did not already store. A damaged value is refused by its CRC-32C, never misread.
 *
 * <p>Format 1, little-endian: version byte, three zero bytes, CRC-32C of everything after the
 * first 8 bytes; counts (fences n, polygons P, rings R, vertices V, id bytes B, tenants T, table
 * size S), live fences and their checksum ({@link FenceChecksum#hash} XORed); then seq[n],
 * lsn[n], time[n], box[4n] (minX, minY, maxX, maxY, each rounded outwards to a float, as the index
 * keeps boxes; empty for a fence without a geometry), grid[n * {@link CoverageGrid#COARSE_WORDS}]
 * (over that box), fencePolygons[n + 1], polygonRings[P + 1], ringStarts[R + 1],
 * tenant[n] (-1 for none), idStarts[n + 1], table[S] (position + 1, 0 free), flags[n], ids[B],
 * T tenants (length, UTF-8), xy[2V]. Fences are in id order, so equal contents give equal bytes.
 *
 * <p>Format 2 is format 1 with delay[n] (each fence's own dwell delay, milliseconds, or {@link
 * StayRules#NO_FENCE_DELAY}) after time[n]. A segment none of whose fences has a delay of its own
 * is written in format 1, byte for byte as before delays, so that state without them costs nothing
 * more and an earlier release still reads it; both formats are read.
 *
 * <p>Formats 3 and 4 are formats 1 and 2 whose grids are left unbuilt: every cell of the grid of
 * a fence of at least {@link CoverageGrid#MIN_VERTICES} vertices is {@link CoverageGrid#UNBUILT},
 * for the reader to build on the fence's first query. A load writes its segments so, since a grid
 * costs about ten microseconds a fence, which would be most of a cold start's writing of its
 * fences; a rewrite of the bucket builds them. An earlier release refuses these formats (and
 * rebuilds), where it would have taken the unbuilt cells for a grid.
 */
public final class FenceSegment {

  /** The format a rewrite writes a segment with dwell delays in (its grids built). */
  public static final byte FORMAT_VERSION = 2;
  /** The format of a segment without dwell delays, read too. */
  static final byte FORMAT_WITHOUT_DELAYS = 1;
  /** Format 1 with its grids unbuilt. */
  static final byte FORMAT_UNBUILT_GRIDS_WITHOUT_DELAYS = 3;
  /** Format 2 with its grids unbuilt: the newest. */
  public static final byte FORMAT_UNBUILT_GRIDS = 4;

  private static final int DELETED = 1;
  private static final int HAS_GEOMETRY = 2;
  private static final int HEADER = 8 + 7 * 4 + 4 + 8;

  private final long[] seqs;
  private final long[] lsns;
  private final long[] times;
  /** Each fence's own dwell delay; null when none has one (format 1). */
  private final long[] delays;
  private final double[] boxes;
  private final long[] grids;
  private final int[] fencePolygons;
  private final int[] polygonRings;
  private final int[] ringStarts;
  /** Each fence's first ring, and the end of its last: derived on reading, so that a check skips the polygons. */
  private final int[] fenceRings;
  private final int[] tenantOf;
  private final int[] idStarts;
  private final int[] table;
  private final byte[] flags;
  private final byte[] ids;
  private final String[] tenants;
  /** The coordinates, of this segment alone or from an arena's chunk; {@link #ringStarts} index them. */
  private final double[] xy;
  private final int vertexCount;
  private final int live;
  private final long checksum;

  private FenceSegment(byte format, ByteBuffer in, CoordinateArena arena) {
    int n = in.getInt();
    int polygons = in.getInt();
    int rings = in.getInt();
    int vertices = in.getInt();
    int idBytes = in.getInt();
    int tenantCount = in.getInt();
    int tableSize = in.getInt();
    live = in.getInt();
    checksum = in.getLong();
    seqs = longs(in, n);
    lsns = longs(in, n);
    times = longs(in, n);
    delays = format == FORMAT_WITHOUT_DELAYS || format == FORMAT_UNBUILT_GRIDS_WITHOUT_DELAYS ? null : longs(in, n);
    boxes = doubles(in, 4 * n);
    grids = longs(in, n * CoverageGrid.COARSE_WORDS);
    fencePolygons = ints(in, n + 1);
    polygonRings = ints(in, polygons + 1);
    ringStarts = ints(in, rings + 1);
    tenantOf = ints(in, n);
    idStarts = ints(in, n + 1);
    table = ints(in, tableSize);
    flags = new byte[n];
    in.get(flags);
    ids = new byte[idBytes];
    in.get(ids);
    tenants = new String[tenantCount];
    for (int t = 0; t < tenantCount; t++) {
      byte[] name = new byte[in.getInt()];
      in.get(name);
      tenants[t] = new String(name, StandardCharsets.UTF_8);
    }
    if (in.remaining() != 16L * vertices) {
      throw new IllegalArgumentException("fence segment has " + in.remaining() + " bytes for " + vertices + " vertices");
    }
    checkOffsets(n, polygons, rings, vertices, idBytes, tenantCount);
    fenceRings = new int[n + 1];
    for (int i = 0; i <= n; i++) {
      fenceRings[i] = polygonRings[fencePolygons[i]];
    }
    vertexCount = vertices;
    if (arena == null) {
      xy = doubles(in, 2 * vertices);
    } else {
      xy = arena.take(2 * vertices);
      int offset = arena.lastOffset();
      in.asDoubleBuffer().get(xy, offset, 2 * vertices);
      for (int r = 0; r <= rings; r++) {
        ringStarts[r] += offset / 2;
      }
    }
  }

  /**
   * Reads a segment.
   *
   * @throws IllegalArgumentException if the bytes are of another format, damaged (their CRC-32C
   *     differs) or inconsistent
   */
  public static FenceSegment read(byte[] bytes) {
    return read(bytes, null);
  }

  /**
   * Reads a segment, its coordinates into the arena (null: an array of its own).
   *
   * @throws IllegalArgumentException if the bytes are of another format, damaged (their CRC-32C
   *     differs) or inconsistent
   */
  public static FenceSegment read(byte[] bytes, CoordinateArena arena) {
    return read(ByteBuffer.wrap(bytes), arena);
  }

  /**
   * Reads a segment from the buffer's remaining bytes (of a state value, or of a mapped file), its
   * coordinates into the arena (null: an array of its own); the buffer's position is left as it was.
   *
   * @throws IllegalArgumentException if the bytes are of another format, damaged (their CRC-32C
   *     differs) or inconsistent
   */
  public static FenceSegment read(ByteBuffer bytes, CoordinateArena arena) {
    ByteBuffer in = bytes.slice().order(ByteOrder.LITTLE_ENDIAN);
    if (in.remaining() < HEADER) {
      throw new IllegalArgumentException("fence segment of " + in.remaining() + " bytes is shorter than its header");
    }
    byte format = in.get(0);
    if (format < FORMAT_WITHOUT_DELAYS || format > FORMAT_UNBUILT_GRIDS) {
      throw new IllegalArgumentException("fence segment of format " + format + ", this release reads "
          + FORMAT_WITHOUT_DELAYS + " to " + FORMAT_UNBUILT_GRIDS);
    }
    CRC32C crc = new CRC32C();
    crc.update(in.duplicate().position(8));
    if ((int) crc.getValue() != in.getInt(4)) {
      throw new IllegalArgumentException("fence segment is damaged: its CRC-32C does not match its bytes");
    }
    in.position(8);
    try {
      return new FenceSegment(format, in, arena);
    } catch (RuntimeException inconsistent) {
      throw new IllegalArgumentException("fence segment is inconsistent: " + inconsistent.getMessage(), inconsistent);
    }
  }

  /** A fence as a segment holds it: a live one, a tombstone, or a refused one (no geometry). */
  private record Entry(long seq, boolean deleted, FenceGeometry geometry, String tenant, long dwellDelay, long commitLsn, long commitTime) {}

  /** Collects a bucket's fences, then writes them as one segment. */
  public static final class Writer {
    private final TreeMap<String, Entry> fences = new TreeMap<>();
    private boolean unbuiltGrids;

    /** Leaves the fences' grids for the reader to build (formats 3 and 4). */
    public Writer unbuiltGrids() {
      unbuiltGrids = true;
      return this;
    }

    /**
     * Adds a fence, or replaces the one added under its id.
     *
     * @param geometry null for a tombstone, or for a fence whose versions were all refused
     * @param dwellDelay the fence's own, milliseconds, or {@link StayRules#NO_FENCE_DELAY}
     */
    public Writer add(String id, long seq, boolean deleted, FenceGeometry geometry, String tenant, long dwellDelay, long commitLsn,
        long commitTime) {
      fences.put(id, new Entry(seq, deleted, geometry, tenant, dwellDelay, commitLsn, commitTime));
      return this;
    }

    /** The segment's bytes, for one keyed state value. */
    public byte[] write() {
      return FenceSegment.write(fences, unbuiltGrids);
    }
  }

  private static byte[] write(TreeMap<String, Entry> sorted, boolean unbuiltGrids) {
    int n = sorted.size();
    List<byte[]> idList = new ArrayList<>(n);
    Map<String, Integer> tenantCodes = new HashMap<>();
    List<byte[]> tenantNames = new ArrayList<>();
    int polygons = 0;
    int rings = 0;
    int vertices = 0;
    int idBytes = 0;
    int tenantBytes = 0;
    boolean delays = false;
    for (Map.Entry<String, Entry> fence : sorted.entrySet()) {
      byte[] id = fence.getKey().getBytes(StandardCharsets.UTF_8);
      idList.add(id);
      idBytes += id.length;
      FenceGeometry g = fence.getValue().geometry();
      if (g != null) {
        polygons += g.polygonCount();
        rings += g.ringCount();
        vertices += g.vertexCount();
      }
      delays |= fence.getValue().dwellDelay() != StayRules.NO_FENCE_DELAY;
      String tenant = fence.getValue().tenant();
      if (tenant != null && !tenantCodes.containsKey(tenant)) {
        tenantCodes.put(tenant, tenantNames.size());
        byte[] name = tenant.getBytes(StandardCharsets.UTF_8);
        tenantNames.add(name);
        tenantBytes += 4 + name.length;
      }
    }
    int tableSize = tableSize(n);
    long size = HEADER + 8L * ((delays ? 4 : 3) * n + 4 * n + (long) n * CoverageGrid.COARSE_WORDS)
        + 4L * ((n + 1) + (polygons + 1) + (rings + 1) + n + (n + 1) + tableSize)
        + n + idBytes + tenantBytes + 16L * vertices;
    if (size > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException("a segment of " + n + " fences would take " + size + " bytes");
    }
    ByteBuffer out = ByteBuffer.allocate((int) size).order(ByteOrder.LITTLE_ENDIAN);
    byte format = unbuiltGrids ? (delays ? FORMAT_UNBUILT_GRIDS : FORMAT_UNBUILT_GRIDS_WITHOUT_DELAYS)
        : delays ? FORMAT_VERSION : FORMAT_WITHOUT_DELAYS;
    out.put(format).put((byte) 0).put((byte) 0).put((byte) 0).putInt(0);
    out.putInt(n).putInt(polygons).putInt(rings).putInt(vertices).putInt(idBytes).putInt(tenantNames.size()).putInt(tableSize);
    int live = 0;
    long checksum = 0;
    for (Map.Entry<String, Entry> fence : sorted.entrySet()) {
      if (!fence.getValue().deleted()) {
        live++;
        checksum ^= FenceChecksum.hash(fence.getKey(), fence.getValue().seq());
      }
    }
    out.putInt(live).putLong(checksum);
    List<Entry> stored = new ArrayList<>(sorted.values());
    stored.forEach(f -> out.putLong(f.seq()));
    stored.forEach(f -> out.putLong(f.commitLsn()));
    stored.forEach(f -> out.putLong(f.commitTime()));
    if (delays) {
      stored.forEach(f -> out.putLong(f.dwellDelay()));
    }
    // Rounded once: the grid is built over the box as stored.
    double[] boxes = new double[4 * n];
    for (int i = 0; i < n; i++) {
      FenceGeometry g = stored.get(i).geometry();
      boolean none = g == null;
      boxes[4 * i] = none ? Double.POSITIVE_INFINITY : OutwardFloats.below(g.minX());
      boxes[4 * i + 1] = none ? Double.POSITIVE_INFINITY : OutwardFloats.below(g.minY());
      boxes[4 * i + 2] = none ? Double.NEGATIVE_INFINITY : OutwardFloats.above(g.maxX());
      boxes[4 * i + 3] = none ? Double.NEGATIVE_INFINITY : OutwardFloats.above(g.maxY());
      out.putDouble(boxes[4 * i]).putDouble(boxes[4 * i + 1]).putDouble(boxes[4 * i + 2]).putDouble(boxes[4 * i + 3]);
    }
    long[] grid = new long[CoverageGrid.COARSE_WORDS];
    for (int i = 0; i < n; i++) {
      FenceGeometry g = stored.get(i).geometry();
      Arrays.fill(grid, 0L);
      // Zeros send every point to the kernel: a small fence gains nothing from a grid.
      if (g != null && g.vertexCount() >= CoverageGrid.MIN_VERTICES) {
        if (unbuiltGrids) {
          // Every cell UNBUILT (binary 11).
          Arrays.fill(grid, -1L);
        } else {
          CoverageGrid.build(g, boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2], boxes[4 * i + 3], CoverageGrid.COARSE, grid, 0);
        }
      }
      for (long word : grid) {
        out.putLong(word);
      }
    }
    int polygon = 0;
    for (Entry f : stored) {
      out.putInt(polygon);
      polygon += f.geometry() == null ? 0 : f.geometry().polygonCount();
    }
    out.putInt(polygon);
    int ring = 0;
    for (Entry f : stored) {
      if (f.geometry() != null) {
        int[] starts = f.geometry().polygonStarts();
        for (int p = 0; p < starts.length - 1; p++) {
          out.putInt(ring + starts[p]);
        }
        ring += f.geometry().ringCount();
      }
    }
    out.putInt(ring);
    int vertex = 0;
    for (Entry f : stored) {
      if (f.geometry() != null) {
        int[] starts = f.geometry().ringStarts();
        for (int r = 0; r < starts.length - 1; r++) {
          out.putInt(vertex + starts[r]);
        }
        vertex += f.geometry().vertexCount();
      }
    }
    out.putInt(vertex);
    stored.forEach(f -> out.putInt(f.tenant() == null ? -1 : tenantCodes.get(f.tenant())));
    int idStart = 0;
    for (byte[] id : idList) {
      out.putInt(idStart);
      idStart += id.length;
    }
    out.putInt(idStart);
    int[] table = new int[tableSize];
    for (int i = 0; i < n; i++) {
      int slot = hash(idList.get(i), 0, idList.get(i).length) & (tableSize - 1);
      while (table[slot] != 0) {
        slot = (slot + 1) & (tableSize - 1);
      }
      table[slot] = i + 1;
    }
    for (int t : table) {
      out.putInt(t);
    }
    stored.forEach(f -> out.put((byte) ((f.deleted() ? DELETED : 0) | (f.geometry() != null ? HAS_GEOMETRY : 0))));
    idList.forEach(out::put);
    for (byte[] name : tenantNames) {
      out.putInt(name.length).put(name);
    }
    // Straight from each geometry's array, as the job's serializer writes them: no copy per fence.
    DoubleBuffer coordinates = out.asDoubleBuffer();
    for (Entry f : stored) {
      if (f.geometry() != null) {
        f.geometry().putCoordinates(coordinates);
      }
    }
    byte[] bytes = out.array();
    CRC32C crc = new CRC32C();
    crc.update(bytes, 8, bytes.length - 8);
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putInt(4, (int) crc.getValue());
    return bytes;
  }

  /** Fences held: live, tombstones and refused. */
  public int size() {
    return seqs.length;
  }

  /** Vertices of all geometries held, each ring's closing vertex included. */
  public int vertexCount() {
    return vertexCount;
  }

  /** Live fences (refused included: they exist at the source), as the bucket's fingerprint counts them. */
  public int liveCount() {
    return live;
  }

  /** The XOR of {@link FenceChecksum#hash} over the live fences: this segment's share of its bucket's checksum. */
  public long checksum() {
    return checksum;
  }

  /** The position of the fence, or -1 if this segment holds none of that id. */
  public int positionOf(String fenceId) {
    byte[] id = fenceId.getBytes(StandardCharsets.UTF_8);
    int mask = table.length - 1;
    for (int slot = hash(id, 0, id.length) & mask; table[slot] != 0; slot = (slot + 1) & mask) {
      int i = table[slot] - 1;
      if (Arrays.equals(ids, idStarts[i], idStarts[i + 1], id, 0, id.length)) {
        return i;
      }
    }
    return -1;
  }

  public String id(int i) {
    return new String(ids, idStarts[i], idStarts[i + 1] - idStarts[i], StandardCharsets.UTF_8);
  }

  public long seq(int i) {
    return seqs[i];
  }

  public boolean deleted(int i) {
    return (flags[i] & DELETED) != 0;
  }

  public boolean hasGeometry(int i) {
    return (flags[i] & HAS_GEOMETRY) != 0;
  }

  public String tenant(int i) {
    return tenantOf[i] < 0 ? null : tenants[tenantOf[i]];
  }

  /** Fence {@code i}'s own dwell delay, milliseconds, or {@link StayRules#NO_FENCE_DELAY}. */
  public long dwellDelay(int i) {
    return delays == null ? StayRules.NO_FENCE_DELAY : delays[i];
  }

  /** Whether a fence here has a dwell delay of its own. */
  public boolean hasDwellDelays() {
    return delays != null;
  }

  public long commitLsn(int i) {
    return lsns[i];
  }

  public long commitTime(int i) {
    return times[i];
  }

  /** Vertices of fence {@code i}'s geometry (0 without one), each ring's closing vertex included. */
  public int vertexCount(int i) {
    return ringStarts[fenceRings[i + 1]] - ringStarts[fenceRings[i]];
  }

  /**
   * Reads one value from every cache line of fence {@code i}'s coordinates, as {@link
   * FenceGeometry#prefetch} does for a fence of its own; returns a value made of what it read.
   */
  public long prefetch(int i) {
    long sum = 0;
    int end = 2 * ringStarts[fenceRings[i + 1]];
    for (int k = 2 * ringStarts[fenceRings[i]]; k < end; k += 8) {
      sum += Double.doubleToRawLongBits(xy[k]);
    }
    return sum;
  }

  /** Fence {@code i}'s box, rounded outwards to floats, into {@code bounds[4 at ...]}: minX, minY, maxX, maxY. */
  public void box(int i, double[] bounds, int at) {
    System.arraycopy(boxes, 4 * i, bounds, 4 * at, 4);
  }

  /** Fence {@code i}'s coarse coverage grid over its box into {@code grid[at ...]}, for a caller keeping it beside the box. */
  public void grid(int i, long[] grid, int at) {
    System.arraycopy(grids, i * CoverageGrid.COARSE_WORDS, grid, at, CoverageGrid.COARSE_WORDS);
  }

  /** Whether fence {@code i} covers the point, by the exact kernel alone: for a caller whose copy of the grid left it open. */
  public boolean coversExactly(int i, double px, double py) {
    return PointInFence.coversRings(xy, ringStarts, fenceRings[i], fenceRings[i + 1], px, py);
  }

  /** Fence {@code i}'s geometry as an object of its own, made on request; null without one. */
  public FenceGeometry geometry(int i) {
    FenceGeometry geometry = null;
    if (hasGeometry(i)) {
      int firstPolygon = fencePolygons[i];
      int endPolygon = fencePolygons[i + 1];
      int firstRing = polygonRings[firstPolygon];
      int endRing = polygonRings[endPolygon];
      int firstVertex = ringStarts[firstRing];
      int[] polygonStarts = new int[endPolygon - firstPolygon + 1];
      for (int p = 0; p < polygonStarts.length; p++) {
        polygonStarts[p] = polygonRings[firstPolygon + p] - firstRing;
      }
      int[] rings = new int[endRing - firstRing + 1];
      for (int r = 0; r < rings.length; r++) {
        rings[r] = ringStarts[firstRing + r] - firstVertex;
      }
      double[] coordinates = Arrays.copyOfRange(xy, 2 * firstVertex, 2 * ringStarts[endRing]);
      geometry = FenceGeometry.ofOwnedArrays(coordinates, rings, polygonStarts);
    }
    return geometry;
  }

  private void checkOffsets(int n, int polygons, int rings, int vertices, int idBytes, int tenantCount) {
    checkRising("fence polygon", fencePolygons, polygons);
    checkRising("polygon ring", polygonRings, rings);
    checkRising("ring vertex", ringStarts, vertices);
    checkRising("id", idStarts, idBytes);
    if (Integer.bitCount(table.length) != 1 || table.length < n) {
      throw new IllegalArgumentException("id table of " + table.length + " slots for " + n + " fences");
    }
    for (int i = 0; i < n; i++) {
      if (delays != null && !StayRules.isFenceDelay(delays[i])) {
        throw new IllegalArgumentException("fence " + i + " has a dwell delay of " + delays[i] + " ms");
      }
      if (tenantOf[i] < -1 || tenantOf[i] >= tenantCount) {
        throw new IllegalArgumentException("fence " + i + " names tenant " + tenantOf[i] + " of " + tenantCount);
      }
      if (hasGeometry(i) == (fencePolygons[i + 1] == fencePolygons[i])) {
        throw new IllegalArgumentException("fence " + i + "'s flags disagree with its polygons");
      }
    }
    for (int p = 0; p < polygons; p++) {
      if (polygonRings[p + 1] == polygonRings[p]) {
        throw new IllegalArgumentException("polygon " + p + " has no shell");
      }
    }
    for (int r = 0; r < rings; r++) {
      if (ringStarts[r + 1] - ringStarts[r] < 4) {
        throw new IllegalArgumentException("ring " + r + " has fewer than 4 vertices");
      }
    }
  }

  private static void checkRising(String what, int[] starts, int end) {
    if (starts[0] != 0 || starts[starts.length - 1] != end) {
      throw new IllegalArgumentException(what + " offsets do not span 0.." + end);
    }
    for (int i = 1; i < starts.length; i++) {
      if (starts[i] < starts[i - 1]) {
        throw new IllegalArgumentException(what + " offsets fall at " + i);
      }
    }
  }

  /** Twice the fences, rounded up to a power of two: probes stay short. */
  private static int tableSize(int n) {
    return Math.max(2, Integer.highestOneBit(Math.max(1, 2 * n - 1)) << 1);
  }

  /** FNV-1a over the id's UTF-8 bytes, mixed so that the low bits spread. */
  private static int hash(byte[] bytes, int from, int to) {
    int h = 0x811c9dc5;
    for (int i = from; i < to; i++) {
      h = (h ^ (bytes[i] & 0xff)) * 0x01000193;
    }
    return h ^ (h >>> 16);
  }

  private static long[] longs(ByteBuffer in, int count) {
    long[] values = new long[count];
    in.asLongBuffer().get(values);
    in.position(in.position() + 8 * count);
    return values;
  }

  private static double[] doubles(ByteBuffer in, int count) {
    double[] values = new double[count];
    in.asDoubleBuffer().get(values);
    in.position(in.position() + 8 * count);
    return values;
  }

  private static int[] ints(ByteBuffer in, int count) {
    int[] values = new int[count];
    in.asIntBuffer().get(values);
    in.position(in.position() + 4 * count);
    return values;
  }
}
