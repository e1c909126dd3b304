package dev.geofence.state.index;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.CoverageGrid;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.OutwardFloats;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * The in-memory spatial index of a subtask's fences: answers which fences cover a point, one point
 * at a time or a batch at once, and takes upserts and deletes without rebuilding the whole tree
 * per edit.
 *
 * <p>Each fence occupies a slot. The slots present at the last repack are indexed by a {@link
 * PackedRTree}, and numbered in its leaf order, so fences near each other in space are near each
 * other in memory. A fence that is deleted or replaced since then only has its slot retired,
 * which queries skip. Fences upserted since the repack are appended as new slots and indexed by a
 * second, small packed tree (the overlay), packed again on the first query after a change, so a
 * batch of edits costs one small pack. When the overlay and the retired slots together exceed a
 * share of the index ({@code 1 / overlayRatio}, at least {@code minOverlay}), everything is packed
 * afresh and the slots are renumbered. Loading fences one by one before the first query therefore
 * costs exactly one pack, as a bulk load should.
 *
 * <p>Each slot keeps a record of {@value #RECORD} longs in one flat array: the fence's box (floats
 * rounded outwards) and then its {@link CoverageGrid#COARSE}-cell coverage grid, filled on the
 * first query that reaches the fence. A check reads the tree's nodes, then the record, which
 * answers most points; only a point in a boundary cell reads the fence's coordinates ({@link
 * FenceGeometry#coversNearBoundary}). At a million fences nothing of this fits in a cache, so each
 * of those reads is a cache miss, and the layout keeps their number small.
 *
 * <p>{@link #forEachCovering(double[], double[], String[], int, CoveringConsumer)} answers a batch
 * of points: it walks the tree level by level for all of them and then checks the candidates
 * stage by stage (records, then coordinates), each stage first touching what it will read for all
 * candidates, so that the cache misses of different points overlap instead of queueing behind
 * each other. Its answers are those of the single-point query for each point, reported in the
 * points' order. (Sorting a batch along a Hilbert curve first was measured and dropped: on
 * uniformly spread points it cost more than it saved, since the stages already reuse whatever the
 * batch's points share.)
 *
 * <p>A restore hands it whole buckets as {@link FenceSegment}s ({@link #load}): their fences take
 * slots that read the segment in place (box and grid copied into the record, coordinates, id and
 * tenant read from the segment when asked), so a million restored fences cost no object each. An
 * upsert or delete of such a fence retires its slot as any other's; lookups by id ask the bucket's
 * segment after the fences upserted since.
 *
 * <p>Not thread-safe: queries repack, fill records and reuse work buffers, so edits and queries
 * must come from one thread (a Flink operator's), and a consumer must not call back into the
 * index. The {@link FenceGeometry} objects it hands out are immutable and may be shared.
 */
public final class FenceIndex {

  /** Default share of the index that edits may occupy before a full repack. */
  public static final int DEFAULT_OVERLAY_RATIO = 32;

  /** Default overlay size under which a full repack is never worth it. */
  public static final int DEFAULT_MIN_OVERLAY = 1024;

  /**
   * Near-boundary checks whose coordinates are touched together: enough to keep the memory
   * system busy, few enough that their coordinates (about 1.5 KB a fence) stay in the L2 cache.
   */
  private static final int EXACT_CHUNK = 64;

  /** Longs per slot record: the box as four floats, then the coarse grid. */
  static final int RECORD = 2 + CoverageGrid.COARSE_WORDS;

  /** Receives the fences covering the points of a batch. */
  @FunctionalInterface
  public interface CoveringConsumer {
    /** The fence covers the batch's point number {@code point}. */
    void accept(int point, String fenceId);
  }

  private static final int NO_TENANT = 0;
  /** A tenant code no slot has: the point's tenant holds no fence here. */
  private static final int UNKNOWN_TENANT = -1;
  private static final long RETIRED_BOX_LOW = packFloats(Float.POSITIVE_INFINITY, Float.POSITIVE_INFINITY);
  private static final long RETIRED_BOX_HIGH = packFloats(Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY);

  private final int nodeSize;
  private final int overlayRatio;
  private final int minOverlay;
  private final PackedRTree.Packing packing;

  /** Each slot's fence id; null for a slot read from a segment. */
  private String[] ids = new String[16];
  /** Each live slot's geometry, or null: retired, or read from a segment. */
  private FenceGeometry[] geometries = new FenceGeometry[16];
  /** The segment a live slot reads in place, and its position there; null otherwise. */
  private FenceSegment[] slotSegments = new FenceSegment[16];
  private int[] slotPositions = new int[16];
  /** The same segment as loaded, with its positions' slots: for edits and repacks, off the queries' path. */
  private Loaded[] slotLoaded = new Loaded[16];
  private final Map<Integer, Loaded> loadedByBucket = new HashMap<>();
  /** Live slots read from segments. */
  private int loadedLive;
  private int[] slotTenants = new int[16];
  private long[] records = new long[16 * RECORD];
  private int slotCount;
  /** The slot of each fence indexed as an object (upserted, or too big to read in place). */
  private final Map<String, Integer> slotById = new HashMap<>();
  private int retiredCount;

  /**
   * The own dwell delay of each slot of a fence indexed as an object; a segment's fence has its
   * delay read from the segment. Null until such a fence has one: most jobs have none.
   */
  private long[] slotDelays;
  /** Segments loaded that hold a fence with a dwell delay of its own. */
  private int segmentsWithDelays;

  private final Map<String, Integer> tenantCodes = new HashMap<>();
  /** The tenant of each code, code 1 first. */
  private final List<String> tenantNames = new ArrayList<>();

  private PackedRTree packed;
  private int packedCount;
  private PackedRTree overlay;
  /** The slot of each overlay leaf position. */
  private int[] overlaySlots = new int[0];
  private boolean overlayStale;

  private final Batch batch = new Batch();
  private boolean querying;

  public FenceIndex() {
    this(PackedRTree.DEFAULT_NODE_SIZE, DEFAULT_OVERLAY_RATIO, DEFAULT_MIN_OVERLAY, PackedRTree.DEFAULT_PACKING);
  }

  /**
   * @param nodeSize children per node of the packed trees
   * @param overlayRatio a full repack happens when pending edits exceed {@code 1/overlayRatio} of
   *     the indexed fences
   * @param minOverlay but never while pending edits are fewer than this
   */
  public FenceIndex(int nodeSize, int overlayRatio, int minOverlay) {
    this(nodeSize, overlayRatio, minOverlay, PackedRTree.DEFAULT_PACKING);
  }

  /** As {@link #FenceIndex(int, int, int)}, with the trees' packing. */
  public FenceIndex(int nodeSize, int overlayRatio, int minOverlay, PackedRTree.Packing packing) {
    if (nodeSize < 2 || overlayRatio < 1 || minOverlay < 0) {
      throw new IllegalArgumentException(
          "need nodeSize >= 2, overlayRatio >= 1 and minOverlay >= 0, got "
              + nodeSize + ", " + overlayRatio + ", " + minOverlay);
    }
    this.nodeSize = nodeSize;
    this.overlayRatio = overlayRatio;
    this.minOverlay = minOverlay;
    this.packing = Objects.requireNonNull(packing, "packing");
    this.packed = PackedRTree.pack(new double[0], 0, nodeSize, packing);
    this.overlay = packed;
  }

  /** Inserts the fence, or replaces its geometry, tenant and dwell delay ({@link StayRules#NO_FENCE_DELAY}: none of its own). */
  public void upsert(String id, String tenant, long dwellDelay, FenceGeometry geometry) {
    Objects.requireNonNull(id, "fence id");
    Objects.requireNonNull(geometry, "geometry");
    checkNotQuerying();
    retire(slotOf(id));
    int slot = newSlot(tenant);
    ids[slot] = id;
    geometries[slot] = geometry;
    writeRecord(slot, geometry);
    slotById.put(id, slot);
    if (dwellDelay != StayRules.NO_FENCE_DELAY && slotDelays == null) {
      slotDelays = new long[ids.length];
      Arrays.fill(slotDelays, StayRules.NO_FENCE_DELAY);
    }
    if (slotDelays != null) {
      slotDelays[slot] = dwellDelay;
    }
  }

  /**
   * Indexes the fences of a bucket's segment that are live and have a geometry, reading them in
   * place; {@link FenceGeometry#isBig big} ones become objects, which build their own finer grids
   * and edge bands. None of its fences may be indexed already: a restore loads each bucket once,
   * before any edit.
   *
   * @throws IllegalStateException if the bucket was loaded before
   */
  public void load(int bucket, FenceSegment segment) {
    load(bucket, segment, null);
  }

  /**
   * As {@link #load(int, FenceSegment)}, leaving out the fences {@code superseded} names (edited
   * since the segment was stored: indexed as they are now, or deleted), or none if it is null.
   */
  public void load(int bucket, FenceSegment segment, Predicate<String> superseded) {
    checkNotQuerying();
    if (loadedByBucket.containsKey(bucket)) {
      throw new IllegalStateException("bucket " + bucket + " was loaded before");
    }
    Loaded loaded = new Loaded(segment);
    loadedByBucket.put(bucket, loaded);
    if (segment.hasDwellDelays()) {
      segmentsWithDelays++;
    }
    double[] box = new double[4];
    for (int i = 0; i < segment.size(); i++) {
      if (segment.deleted(i) || !segment.hasGeometry(i) || (superseded != null && superseded.test(segment.id(i)))) {
        continue;
      }
      if (FenceGeometry.isBig(segment.vertexCount(i))) {
        upsert(segment.id(i), segment.tenant(i), segment.dwellDelay(i), segment.geometry(i));
        continue;
      }
      int slot = newSlot(segment.tenant(i));
      slotSegments[slot] = segment;
      slotLoaded[slot] = loaded;
      slotPositions[slot] = i;
      loaded.slotOf[i] = slot;
      loadedLive++;
      segment.box(i, box, 0);
      int r = slot * RECORD;
      records[r] = packFloats((float) box[0], (float) box[1]);
      records[r + 1] = packFloats((float) box[2], (float) box[3]);
      segment.grid(i, records, r + 2);
    }
  }

  /** A slot at the end, its tenant set, to be filled by the caller. */
  private int newSlot(String tenant) {
    if (slotCount == ids.length) {
      int capacity = Math.max(16, slotCount + (slotCount >> 1));
      ids = Arrays.copyOf(ids, capacity);
      geometries = Arrays.copyOf(geometries, capacity);
      slotSegments = Arrays.copyOf(slotSegments, capacity);
      slotLoaded = Arrays.copyOf(slotLoaded, capacity);
      slotPositions = Arrays.copyOf(slotPositions, capacity);
      slotTenants = Arrays.copyOf(slotTenants, capacity);
      records = Arrays.copyOf(records, capacity * RECORD);
      if (slotDelays != null) {
        slotDelays = Arrays.copyOf(slotDelays, capacity);
      }
    }
    int slot = slotCount++;
    slotTenants[slot] = tenant == null ? NO_TENANT : tenantCodes.computeIfAbsent(tenant, t -> {
      tenantNames.add(t);
      return tenantNames.size();
    });
    overlayStale = true;
    return slot;
  }

  /** The live slot of the fence, or -1. */
  private int slotOf(String id) {
    Integer slot = slotById.get(id);
    if (slot != null) {
      return slot;
    }
    if (loadedByBucket.isEmpty()) {
      return -1;
    }
    Loaded loaded = loadedByBucket.get(FenceBuckets.of(id));
    int position = loaded == null ? -1 : loaded.segment.positionOf(id);
    return position < 0 ? -1 : loaded.slotOf[position];
  }

  private boolean live(int slot) {
    return geometries[slot] != null || slotSegments[slot] != null;
  }

  private String idOf(int slot) {
    // The object's id first: a fence of its own costs its hit no other load.
    String id = ids[slot];
    return id != null ? id : slotSegments[slot].id(slotPositions[slot]);
  }

  /**
   * Removes every fence, as if none had been indexed (tenant codes stay, as no query sees them):
   * a catch-up's load indexes all of them anew rather than replace each (docs/design.md#catch-up).
   */
  public void clear() {
    checkNotQuerying();
    ids = new String[16];
    geometries = new FenceGeometry[16];
    slotSegments = new FenceSegment[16];
    slotPositions = new int[16];
    slotLoaded = new Loaded[16];
    loadedByBucket.clear();
    loadedLive = 0;
    slotTenants = new int[16];
    records = new long[16 * RECORD];
    slotCount = 0;
    slotById.clear();
    retiredCount = 0;
    slotDelays = null;
    segmentsWithDelays = 0;
    packed = PackedRTree.pack(new double[0], 0, nodeSize, packing);
    packedCount = 0;
    overlay = packed;
    overlaySlots = new int[0];
    overlayStale = false;
  }

  /** Removes the fence; returns whether it was indexed. */
  public boolean delete(String id) {
    checkNotQuerying();
    int slot = slotOf(id);
    slotById.remove(id);
    retire(slot);
    return slot >= 0;
  }

  private void retire(int slot) {
    if (slot < 0) {
      return;
    }
    // A retired slot keeps its place in the packed tree until the next repack; its box in the
    // record contains no point, so queries drop it there.
    retiredCount++;
    geometries[slot] = null;
    Loaded loaded = slotLoaded[slot];
    if (loaded != null) {
      loaded.slotOf[slotPositions[slot]] = -1;
      slotSegments[slot] = null;
      slotLoaded[slot] = null;
      loadedLive--;
    }
    records[slot * RECORD] = RETIRED_BOX_LOW;
    records[slot * RECORD + 1] = RETIRED_BOX_HIGH;
    if (slot >= packedCount) {
      overlayStale = true;
    }
  }

  /** The box rounded outwards to floats, as the trees hold it, and a grid still to be built. */
  private void writeRecord(int slot, FenceGeometry g) {
    int r = slot * RECORD;
    records[r] = packFloats(OutwardFloats.below(g.minX()), OutwardFloats.below(g.minY()));
    records[r + 1] = packFloats(OutwardFloats.above(g.maxX()), OutwardFloats.above(g.maxY()));
    long unbuilt = g.vertexCount() < CoverageGrid.MIN_VERTICES ? 0 : -1L;
    Arrays.fill(records, r + 2, r + RECORD, unbuilt);
  }

  /** Whether a fence of this id is indexed: {@link #get} without making a geometry of a segment's fence. */
  public boolean contains(String id) {
    return slotOf(id) >= 0;
  }

  /** The geometry indexed for the fence, or null; one read from a segment is made on each call. */
  public FenceGeometry get(String id) {
    int slot = slotOf(id);
    if (slot < 0) {
      return null;
    }
    FenceSegment segment = slotSegments[slot];
    return segment == null ? geometries[slot] : segment.geometry(slotPositions[slot]);
  }

  /** The tenant of the fence indexed under {@code id} (null: it has none); null also if no fence is ({@link #get}). */
  public String tenantOf(String id) {
    int slot = slotOf(id);
    return slot < 0 || slotTenants[slot] == NO_TENANT ? null : tenantNames.get(slotTenants[slot] - 1);
  }

  /** The own dwell delay of the fence indexed under {@code id}, or {@link StayRules#NO_FENCE_DELAY}: none, or no such fence. */
  public long dwellDelayOf(String id) {
    // Without delays, no lookup: for a segment's fence it hashes the id twice.
    if (!hasDwellDelays()) {
      return StayRules.NO_FENCE_DELAY;
    }
    int slot = slotOf(id);
    if (slot < 0) {
      return StayRules.NO_FENCE_DELAY;
    }
    FenceSegment segment = slotSegments[slot];
    return segment != null ? segment.dwellDelay(slotPositions[slot]) : slotDelays != null ? slotDelays[slot] : StayRules.NO_FENCE_DELAY;
  }

  /** Whether a fence indexed may have a dwell delay of its own: false only if none has. */
  public boolean hasDwellDelays() {
    return slotDelays != null || segmentsWithDelays > 0;
  }

  /** Number of fences indexed. */
  public int size() {
    return slotById.size() + loadedLive;
  }

  /**
   * Reports the id of every fence that covers the point (inside or on the boundary), limited to
   * fences of {@code tenant} unless it is null. Each fence is reported once, in no set order.
   */
  public void forEachCovering(double x, double y, String tenant, Consumer<String> fenceIds) {
    // A batch of one: its stages still overlap the tree's, the record's and the coordinates'
    // cache misses, which makes it faster than a plain walk (measured in bench/run index).
    Batch b = batch;
    b.oneX[0] = x;
    b.oneY[0] = y;
    b.oneTenant[0] = tenant;
    forEachCovering(b.oneX, b.oneY, tenant == null ? null : b.oneTenant, 1, (point, id) -> fenceIds.accept(id));
  }

  /** The ids of the fences covering the point; see {@link #forEachCovering}. */
  public List<String> covering(double x, double y, String tenant) {
    List<String> result = new ArrayList<>(4);
    forEachCovering(x, y, tenant, result::add);
    return result;
  }

  /**
   * Reports, for each of the points {@code 0 .. n - 1} at {@code (xs[i], ys[i])}, the id of every
   * fence that covers it, limited to fences of {@code tenants[i]} when {@code tenants} is given
   * and that entry is not null. The answers are those of {@link #forEachCovering(double, double,
   * String, Consumer)} for each point; they come grouped by point, points in increasing order,
   * each fence once per point in no set order; points no fence covers are not reported.
   *
   * <p>Batching pays when the points are many, and more when they are near each other; the whole
   * batch is answered before the first answer is reported.
   */
  public void forEachCovering(double[] xs, double[] ys, String[] tenants, int n, CoveringConsumer consumer) {
    if (n < 0 || xs.length < n || ys.length < n || (tenants != null && tenants.length < n)) {
      throw new IllegalArgumentException("a batch of " + n + " points needs that many coordinates and tenants");
    }
    Objects.requireNonNull(consumer, "consumer");
    checkNotQuerying();
    prepareForQuery();
    querying = true;
    try {
      Batch b = batch;
      b.start(n);
      if (!b.tenantCodes(tenants, n)) {
        return;
      }
      packed.searchAll(xs, ys, n, b.candidates, b.work);
      b.checkRecords(xs, ys, null);
      if (overlay.size() > 0) {
        overlay.searchAll(xs, ys, n, b.candidates, b.work);
        b.checkRecords(xs, ys, overlaySlots);
      }
      b.checkNearBoundary(xs, ys);
      b.report(n, consumer);
    } finally {
      querying = false;
    }
  }

  private void checkNotQuerying() {
    if (querying) {
      throw new IllegalStateException("the fence index was called from a query's consumer");
    }
  }

  /**
   * The work buffers and stages of a batch query. Candidates flow from stage to stage as (point,
   * slot) pairs; each stage first touches what the next reads for all candidates, so the cache
   * misses overlap.
   */
  private final class Batch {
    final PointPairs candidates = new PointPairs();
    final PointPairs[] work = {new PointPairs(), new PointPairs()};
    final PointPairs nearBoundary = new PointPairs();
    final PointPairs hits = new PointPairs();
    int[] pointTenants = new int[64];
    boolean anyTenant;
    int[] hitStarts = new int[65];
    int[] hitSlots = new int[64];
    final double[] oneX = new double[1];
    final double[] oneY = new double[1];
    final String[] oneTenant = new String[1];

    void start(int n) {
      if (pointTenants.length < n) {
        int capacity = Math.max(n, 2 * pointTenants.length);
        pointTenants = new int[capacity];
        hitStarts = new int[capacity + 1];
      }
      nearBoundary.clear();
      hits.clear();
    }

    /** Returns false when no point's tenant holds any fence here. */
    boolean tenantCodes(String[] tenants, int n) {
      anyTenant = false;
      if (tenants == null) {
        return true;
      }
      boolean anyPoint = false;
      for (int i = 0; i < n; i++) {
        String tenant = tenants[i];
        int code = NO_TENANT;
        if (tenant != null) {
          Integer known = tenantCodes.get(tenant);
          code = known == null ? UNKNOWN_TENANT : known;
          anyTenant = true;
        }
        pointTenants[i] = code;
        anyPoint |= code != UNKNOWN_TENANT;
      }
      return anyPoint;
    }

    /**
     * The record stage: the box (which also drops retired slots), the tenant, and the coarse
     * grid, built here on a fence's first query. Decided points go to the hits, the rest on to
     * the exact test.
     */
    void checkRecords(double[] xs, double[] ys, int[] slotOfPosition) {
      PointPairs c = candidates;
      if (slotOfPosition != null) {
        for (int k = 0; k < c.size; k++) {
          c.nodes[k] = slotOfPosition[c.nodes[k]];
        }
      }
      long[] rec = records;
      long sum = 0;
      for (int k = 0; k < c.size; k++) {
        // A record may straddle two cache lines: one load in each.
        int r = c.nodes[k] * RECORD;
        sum += rec[r] + rec[r + RECORD - 1];
      }
      touched += sum;
      for (int k = 0; k < c.size; k++) {
        int p = c.points[k];
        int slot = c.nodes[k];
        long mark = mark(slot, xs[p], ys[p], anyTenant ? pointTenants[p] : NO_TENANT);
        if (mark == CoverageGrid.INSIDE) {
          hits.add(p, slot);
        } else if (mark == NEAR_BOUNDARY) {
          nearBoundary.add(p, slot);
        }
      }
    }

    /**
     * The exact stage, for the points the grids left open, in chunks: the coordinates of a
     * chunk's fences are touched first, so their cache misses overlap, then checked.
     */
    void checkNearBoundary(double[] xs, double[] ys) {
      PointPairs c = nearBoundary;
      FenceGeometry[] g = geometries;
      FenceSegment[] s = slotSegments;
      int[] at = slotPositions;
      for (int from = 0; from < c.size; from += EXACT_CHUNK) {
        int to = Math.min(c.size, from + EXACT_CHUNK);
        // First the fences' objects (each a chain: slot, object, array header; for a segment's
        // fence its segment and ring offsets), then all the lines of their coordinates, so that
        // neither pass waits on one fence at a time.
        long sum = 0;
        for (int k = from; k < to; k++) {
          int slot = c.nodes[k];
          sum += g[slot] != null ? g[slot].vertexCount() : s[slot].vertexCount(at[slot]);
        }
        for (int k = from; k < to; k++) {
          int slot = c.nodes[k];
          sum += g[slot] != null ? g[slot].prefetch() : s[slot].prefetch(at[slot]);
        }
        touched += sum;
        for (int k = from; k < to; k++) {
          int p = c.points[k];
          int slot = c.nodes[k];
          if (g[slot] != null ? g[slot].coversNearBoundary(xs[p], ys[p]) : s[slot].coversExactly(at[slot], xs[p], ys[p])) {
            hits.add(p, slot);
          }
        }
      }
    }

    /** Reports the hits grouped by point, in the points' order (a counting sort by point). */
    void report(int n, CoveringConsumer consumer) {
      PointPairs h = hits;
      if (h.size == 0) {
        return;
      }
      if (hitSlots.length < h.size) {
        hitSlots = new int[Math.max(h.size, 2 * hitSlots.length)];
      }
      Arrays.fill(hitStarts, 0, n + 1, 0);
      for (int k = 0; k < h.size; k++) {
        hitStarts[h.points[k] + 1]++;
      }
      for (int i = 0; i < n; i++) {
        hitStarts[i + 1] += hitStarts[i];
      }
      for (int k = 0; k < h.size; k++) {
        hitSlots[hitStarts[h.points[k]]++] = h.nodes[k];
      }
      // hitStarts[i] now ends point i's hits; point i's start is the previous point's end.
      int from = 0;
      for (int i = 0; i < n; i++) {
        int to = hitStarts[i];
        for (int k = from; k < to; k++) {
          consumer.accept(i, idOf(hitSlots[k]));
        }
        from = to;
      }
    }
  }

  /** What {@link #mark} returns when the coarse grid leaves the point to the exact test. */
  private static final long NEAR_BOUNDARY = 0;

  /**
   * The record's answer for a candidate slot: {@link CoverageGrid#OUTSIDE} (also for a retired
   * slot or another tenant's fence), {@link CoverageGrid#INSIDE}, or {@link #NEAR_BOUNDARY}. Builds
   * the coarse grid on the fence's first query.
   */
  private long mark(int slot, double x, double y, int tenantCode) {
    if (tenantCode != NO_TENANT && tenantCode != slotTenants[slot]) {
      return CoverageGrid.OUTSIDE;
    }
    long[] rec = records;
    int r = slot * RECORD;
    long low = rec[r];
    long high = rec[r + 1];
    float minX = Float.intBitsToFloat((int) low);
    float minY = Float.intBitsToFloat((int) (low >>> 32));
    float maxX = Float.intBitsToFloat((int) high);
    float maxY = Float.intBitsToFloat((int) (high >>> 32));
    if (x < minX || y < minY || x > maxX || y > maxY) {
      return CoverageGrid.OUTSIDE;
    }
    long mark = CoverageGrid.lookup(rec, r + 2, CoverageGrid.COARSE, minX, minY, maxX, maxY, x, y);
    if (mark == CoverageGrid.UNBUILT) {
      FenceSegment segment = slotSegments[slot];
      // A segment's grid is unbuilt when a load wrote it (FenceSegment's formats 3 and 4).
      FenceGeometry geometry = segment == null ? geometries[slot] : segment.geometry(slotPositions[slot]);
      CoverageGrid.build(geometry, minX, minY, maxX, maxY, CoverageGrid.COARSE, rec, r + 2);
      mark = CoverageGrid.lookup(rec, r + 2, CoverageGrid.COARSE, minX, minY, maxX, maxY, x, y);
    }
    return mark;
  }

  /** Keeps the touching loads of the batch stages from being optimized away. */
  @SuppressWarnings("unused")
  private long touched;

  /** Packs now whatever the next query would; lets a bulk load pay for it up front. */
  public void prepareForQuery() {
    if (repackDue()) {
      repack();
    } else if (overlayStale) {
      packOverlay();
    }
  }

  /** Whether the next query would pack first (a repack, or the overlay's): false after {@link #prepareForQuery}. */
  public boolean needsPacking() {
    return repackDue() || overlayStale;
  }

  private boolean repackDue() {
    int pending = (slotCount - packedCount) + retiredCount;
    return pending > Math.max(minOverlay, packedCount / overlayRatio);
  }

  /** Packs all live fences into a new tree and renumbers their slots in its leaf order. */
  private void repack() {
    int liveCount = size();
    int[] liveSlots = new int[liveCount];
    double[] bounds = new double[4 * liveCount];
    int n = 0;
    for (int slot = 0; slot < slotCount; slot++) {
      if (live(slot)) {
        // From the record, one sequential array, rather than from each fence's object.
        readBox(slot, bounds, n);
        liveSlots[n++] = slot;
      }
    }
    PackedRTree tree = PackedRTree.pack(bounds, n, nodeSize, packing);
    int[] positions = new int[n];
    for (int pos = 0; pos < n; pos++) {
      positions[tree.itemAt(pos)] = pos;
    }
    int capacity = Math.max(16, liveCount + (liveCount >> 3));
    String[] newIds = new String[capacity];
    FenceGeometry[] newGeometries = new FenceGeometry[capacity];
    FenceSegment[] newSegments = new FenceSegment[capacity];
    Loaded[] newLoaded = new Loaded[capacity];
    int[] newPositions = new int[capacity];
    int[] newTenants = new int[capacity];
    long[] newDelays = slotDelays == null ? null : new long[capacity];
    long[] newRecords = new long[capacity * RECORD];
    // In the old order, reading sequentially and writing to the new places: scattered writes
    // overlap where scattered reads would wait one by one.
    for (int i = 0; i < n; i++) {
      int slot = liveSlots[i];
      int pos = positions[i];
      newIds[pos] = ids[slot];
      newGeometries[pos] = geometries[slot];
      newTenants[pos] = slotTenants[slot];
      if (newDelays != null) {
        newDelays[pos] = slotDelays[slot];
      }
      // The record moves with its grid, so a repack does not forget the grids already built.
      System.arraycopy(records, slot * RECORD, newRecords, pos * RECORD, RECORD);
      Loaded loaded = slotLoaded[slot];
      if (loaded == null) {
        slotById.put(ids[slot], pos);
      } else {
        newSegments[pos] = slotSegments[slot];
        newLoaded[pos] = loaded;
        newPositions[pos] = slotPositions[slot];
        loaded.slotOf[slotPositions[slot]] = pos;
      }
    }
    ids = newIds;
    geometries = newGeometries;
    slotSegments = newSegments;
    slotLoaded = newLoaded;
    slotPositions = newPositions;
    slotTenants = newTenants;
    slotDelays = newDelays;
    records = newRecords;
    slotCount = n;
    retiredCount = 0;
    packed = tree;
    packedCount = n;
    overlaySlots = new int[0];
    overlay = PackedRTree.pack(bounds, 0, nodeSize, packing);
    overlayStale = false;
  }

  private void packOverlay() {
    int[] slots = new int[slotCount - packedCount];
    double[] bounds = new double[4 * slots.length];
    int n = 0;
    for (int slot = packedCount; slot < slotCount; slot++) {
      if (live(slot)) {
        readBox(slot, bounds, n);
        slots[n++] = slot;
      }
    }
    overlay = PackedRTree.pack(bounds, n, nodeSize, packing);
    int[] byPosition = new int[n];
    for (int pos = 0; pos < n; pos++) {
      byPosition[pos] = slots[overlay.itemAt(pos)];
    }
    overlaySlots = byPosition;
    overlayStale = false;
  }

  /** The slot's box from its record (floats already rounded outwards) into {@code bounds[4 i ...]}. */
  private void readBox(int slot, double[] bounds, int i) {
    long low = records[slot * RECORD];
    long high = records[slot * RECORD + 1];
    bounds[4 * i] = Float.intBitsToFloat((int) low);
    bounds[4 * i + 1] = Float.intBitsToFloat((int) (low >>> 32));
    bounds[4 * i + 2] = Float.intBitsToFloat((int) high);
    bounds[4 * i + 3] = Float.intBitsToFloat((int) (high >>> 32));
  }

  /** A bucket's segment as loaded, and the slot of each of its positions (-1: none, or retired). */
  private static final class Loaded {
    final FenceSegment segment;
    final int[] slotOf;

    Loaded(FenceSegment segment) {
      this.segment = segment;
      this.slotOf = new int[segment.size()];
      Arrays.fill(slotOf, -1);
    }
  }

  private static long packFloats(float low, float high) {
    return (Float.floatToRawIntBits(low) & 0xffffffffL) | ((long) Float.floatToRawIntBits(high) << 32);
  }
}
