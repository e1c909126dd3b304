package dev.geofence.state.index;

import dev.geofence.state.geom.FenceGeometry;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * The in-memory spatial index of a subtask's fences: answers which fences cover a point, and takes
 * upserts and deletes without rebuilding the whole tree per edit.
 *
 * <p>Each fence occupies a slot. The slots present at the last repack are indexed by a {@link
 * PackedHilbertRTree}; a fence that is deleted or replaced since then only has its slot retired
 * (its geometry cleared), which queries skip. Fences upserted since the repack are appended as new slots and indexed by a
 * second, small packed tree (the overlay), packed again on the first query after a change, so a
 * batch of edits costs one small pack. When the overlay and the retired slots together exceed a
 * share of the index ({@code 1 / overlayRatio}, at least {@code minOverlay}), everything is packed
 * afresh and the slots are compacted. Loading fences one by one before the first query therefore
 * costs exactly one pack, as a bulk load should.
 *
 * <p>Queries check, cheapest first: the tree's boxes, the retired mark, the tenant, the fence's
 * envelope, and only then the exact kernel ({@link FenceGeometry#covers}).
 *
 * <p>Not thread-safe: queries may repack, so edits and queries come from one thread (a Flink
 * operator's).
 */
public final class FenceIndex {

  /** Default share of the index that edits may occupy before a full repack. */
  public static final int DEFAULT_OVERLAY_RATIO = 32;

  /** Default overlay size under which a full repack is never worth it. */
  public static final int DEFAULT_MIN_OVERLAY = 1024;

  private static final int NO_TENANT = 0;

  private final int nodeSize;
  private final int overlayRatio;
  private final int minOverlay;

  private String[] ids = new String[16];
  private FenceGeometry[] geometries = new FenceGeometry[16];
  private int[] tenants = new int[16];
  private int slotCount;
  private final Map<String, Integer> slotById = new HashMap<>();
  private int retiredCount;

  private final Map<String, Integer> tenantCodes = new HashMap<>();

  private PackedHilbertRTree packed = PackedHilbertRTree.pack(new double[0], 0, 2);
  private int packedCount;
  private PackedHilbertRTree overlay = packed;
  private int[] overlaySlots = new int[0];
  private boolean overlayStale;

  public FenceIndex() {
    this(PackedHilbertRTree.DEFAULT_NODE_SIZE, DEFAULT_OVERLAY_RATIO, DEFAULT_MIN_OVERLAY);
  }

  /**
   * @param nodeSize children per node of the packed trees
   * @param overlayRatio a full repack happens when pending edits exceed {@code 1/overlayRatio} of
   *     the indexed fences
   * @param minOverlay but never while pending edits are fewer than this
   */
  public FenceIndex(int nodeSize, int overlayRatio, int minOverlay) {
    if (nodeSize < 2 || overlayRatio < 1 || minOverlay < 0) {
      throw new IllegalArgumentException(
          "need nodeSize >= 2, overlayRatio >= 1 and minOverlay >= 0, got "
              + nodeSize + ", " + overlayRatio + ", " + minOverlay);
    }
    this.nodeSize = nodeSize;
    this.overlayRatio = overlayRatio;
    this.minOverlay = minOverlay;
  }

  /** Inserts the fence, or replaces its geometry and tenant. */
  public void upsert(String id, String tenant, FenceGeometry geometry) {
    Objects.requireNonNull(id, "fence id");
    Objects.requireNonNull(geometry, "geometry");
    retire(slotById.get(id));
    if (slotCount == ids.length) {
      int capacity = Math.max(16, slotCount + (slotCount >> 1));
      ids = Arrays.copyOf(ids, capacity);
      geometries = Arrays.copyOf(geometries, capacity);
      tenants = Arrays.copyOf(tenants, capacity);
    }
    ids[slotCount] = id;
    geometries[slotCount] = geometry;
    tenants[slotCount] = tenant == null ? NO_TENANT : tenantCodes.computeIfAbsent(tenant, t -> tenantCodes.size() + 1);
    slotById.put(id, slotCount);
    slotCount++;
    overlayStale = true;
  }

  /** Removes the fence; returns whether it was indexed. */
  public boolean delete(String id) {
    Integer slot = slotById.remove(id);
    retire(slot);
    return slot != null;
  }

  private void retire(Integer slot) {
    if (slot == null) {
      return;
    }
    // A retired slot keeps its place in the packed tree until the next repack; queries skip it.
    retiredCount++;
    geometries[slot] = null;
    if (slot >= packedCount) {
      overlayStale = true;
    }
  }

  /** The geometry indexed for the fence, or null. */
  public FenceGeometry get(String id) {
    Integer slot = slotById.get(id);
    return slot == null ? null : geometries[slot];
  }

  /** Number of fences indexed. */
  public int size() {
    return slotById.size();
  }

  /**
   * Reports the id of every fence that covers the point (inside or on the boundary), limited to
   * fences of {@code tenant} unless it is null. Each fence is reported once, in no set order.
   */
  public void forEachCovering(double x, double y, String tenant, Consumer<String> fenceIds) {
    int tenantCode = NO_TENANT;
    if (tenant != null) {
      Integer code = tenantCodes.get(tenant);
      if (code == null) {
        return;
      }
      tenantCode = code;
    }
    prepareForQuery();
    final int wanted = tenantCode;
    packed.search(x, y, slot -> visit(slot, x, y, wanted, fenceIds));
    int[] slots = overlaySlots;
    overlay.search(x, y, item -> visit(slots[item], x, y, wanted, fenceIds));
  }

  /** The ids of the fences covering the point; see {@link #forEachCovering}. */
  public List<String> covering(double x, double y, String tenant) {
    List<String> result = new ArrayList<>(4);
    forEachCovering(x, y, tenant, result::add);
    return result;
  }

  private void visit(int slot, double x, double y, int tenantCode, Consumer<String> fenceIds) {
    FenceGeometry geometry = geometries[slot];
    if (geometry != null
        && (tenantCode == NO_TENANT || tenants[slot] == tenantCode)
        && geometry.covers(x, y)) {
      fenceIds.accept(ids[slot]);
    }
  }

  /** Packs now whatever the next query would; lets a bulk load pay for it up front. */
  public void prepareForQuery() {
    int pending = (slotCount - packedCount) + retiredCount;
    if (pending > Math.max(minOverlay, packedCount / overlayRatio)) {
      repack();
    } else if (overlayStale) {
      packOverlay();
    }
  }

  private void repack() {
    int live = slotById.size();
    String[] newIds = new String[Math.max(16, live + (live >> 3))];
    FenceGeometry[] newGeometries = new FenceGeometry[newIds.length];
    int[] newTenants = new int[newIds.length];
    double[] bounds = new double[4 * live];
    int n = 0;
    for (int slot = 0; slot < slotCount; slot++) {
      if (geometries[slot] == null) {
        continue;
      }
      newIds[n] = ids[slot];
      newGeometries[n] = geometries[slot];
      newTenants[n] = tenants[slot];
      writeBounds(bounds, n, geometries[slot]);
      slotById.put(ids[slot], n);
      n++;
    }
    ids = newIds;
    geometries = newGeometries;
    tenants = newTenants;
    slotCount = n;
    retiredCount = 0;
    packed = PackedHilbertRTree.pack(bounds, n, nodeSize);
    packedCount = n;
    overlaySlots = new int[0];
    overlay = PackedHilbertRTree.pack(bounds, 0, nodeSize);
    overlayStale = false;
  }

  private void packOverlay() {
    int[] slots = new int[slotCount - packedCount];
    double[] bounds = new double[4 * slots.length];
    int n = 0;
    for (int slot = packedCount; slot < slotCount; slot++) {
      if (geometries[slot] != null) {
        writeBounds(bounds, n, geometries[slot]);
        slots[n++] = slot;
      }
    }
    overlaySlots = Arrays.copyOf(slots, n);
    overlay = PackedHilbertRTree.pack(bounds, n, nodeSize);
    overlayStale = false;
  }

  private static void writeBounds(double[] bounds, int i, FenceGeometry g) {
    bounds[4 * i] = g.minX();
    bounds[4 * i + 1] = g.minY();
    bounds[4 * i + 2] = g.maxX();
    bounds[4 * i + 3] = g.maxY();
  }
}
