package dev.geofence.state.index;

import java.util.Arrays;
import java.util.function.IntConsumer;

/**
 * A static R-tree packed in one pass over items sorted along a Hilbert curve (Kamel and Faloutsos,
 * "On Packing R-trees", CIKM 1993; laid out as in V. Agafonkin's Flatbush). Every node is full but
 * the last of its level, the nodes live in flat primitive arrays, and building is one sort: a
 * million boxes pack in well under a second, at 20 bytes per item for the leaves.
 *
 * <p>Read-only once built: callers that edit keep their changes elsewhere and pack a new tree (see
 * {@link FenceIndex}). Items are identified by their position in the input. Thread-safe and
 * immutable.
 */
public final class PackedHilbertRTree {

  /** Children per node: 16 keeps a 1.2 M item tree five levels deep. */
  public static final int DEFAULT_NODE_SIZE = 16;

  private static final int HILBERT_MAX = (1 << 16) - 1;

  private final int itemCount;
  private final int nodeSize;
  /**
   * minX, minY, maxX, maxY per node; the leaves (one per item) come first, the root last. Floats
   * rounded outwards: every box still contains its item, a query may see a few extra candidates
   * that the caller's exact test drops, and the tree is half the size and half the cache misses.
   */
  private final float[] boxes;
  /** A leaf's item number, or an inner node's first child position. */
  private final int[] indices;
  /** End position (exclusive) of each level, leaves first. */
  private final int[] levelEnds;

  private PackedHilbertRTree(int itemCount, int nodeSize, float[] boxes, int[] indices, int[] levelEnds) {
    this.itemCount = itemCount;
    this.nodeSize = nodeSize;
    this.boxes = boxes;
    this.indices = indices;
    this.levelEnds = levelEnds;
  }

  /**
   * Packs a tree over {@code count} boxes given as {@code minX, minY, maxX, maxY} quadruples.
   *
   * @param bounds at least {@code 4 * count} values; not retained
   */
  public static PackedHilbertRTree pack(double[] bounds, int count, int nodeSize) {
    if (nodeSize < 2) {
      throw new IllegalArgumentException("a node needs at least 2 children, got " + nodeSize);
    }
    if (count < 0 || bounds.length < 4 * count) {
      throw new IllegalArgumentException("bounds hold fewer than " + count + " boxes");
    }
    int[] ends = new int[32];
    int levels = 0;
    int nodes = count;
    int levelSize = count;
    ends[levels++] = count;
    while (levelSize > 1) {
      levelSize = (levelSize + nodeSize - 1) / nodeSize;
      nodes += levelSize;
      ends[levels++] = nodes;
    }
    float[] boxes = new float[4 * nodes];
    int[] indices = new int[nodes];
    if (count == 0) {
      return new PackedHilbertRTree(0, nodeSize, boxes, indices, Arrays.copyOf(ends, levels));
    }

    double minX = Double.POSITIVE_INFINITY;
    double minY = Double.POSITIVE_INFINITY;
    double maxX = Double.NEGATIVE_INFINITY;
    double maxY = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < count; i++) {
      minX = Math.min(minX, bounds[4 * i]);
      minY = Math.min(minY, bounds[4 * i + 1]);
      maxX = Math.max(maxX, bounds[4 * i + 2]);
      maxY = Math.max(maxY, bounds[4 * i + 3]);
    }
    double scaleX = maxX > minX ? HILBERT_MAX / (maxX - minX) : 0;
    double scaleY = maxY > minY ? HILBERT_MAX / (maxY - minY) : 0;
    // Hilbert value in the high half, item number in the low half; flipping the sign bit makes a
    // signed sort order the keys as unsigned numbers.
    long[] keys = new long[count];
    for (int i = 0; i < count; i++) {
      int hx = (int) (scaleX * ((bounds[4 * i] + bounds[4 * i + 2]) / 2 - minX));
      int hy = (int) (scaleY * ((bounds[4 * i + 1] + bounds[4 * i + 3]) / 2 - minY));
      keys[i] = ((hilbert(hx, hy) << 32) | i) ^ Long.MIN_VALUE;
    }
    Arrays.sort(keys);
    for (int pos = 0; pos < count; pos++) {
      int item = (int) keys[pos];
      indices[pos] = item;
      boxes[4 * pos] = floatBelow(bounds[4 * item]);
      boxes[4 * pos + 1] = floatBelow(bounds[4 * item + 1]);
      boxes[4 * pos + 2] = floatAbove(bounds[4 * item + 2]);
      boxes[4 * pos + 3] = floatAbove(bounds[4 * item + 3]);
    }

    int parent = count;
    for (int level = 0; level < levels - 1; level++) {
      int start = level == 0 ? 0 : ends[level - 1];
      for (int child = start; child < ends[level]; child += nodeSize) {
        int last = Math.min(child + nodeSize, ends[level]);
        float x0 = Float.POSITIVE_INFINITY;
        float y0 = Float.POSITIVE_INFINITY;
        float x1 = Float.NEGATIVE_INFINITY;
        float y1 = Float.NEGATIVE_INFINITY;
        for (int c = child; c < last; c++) {
          x0 = Math.min(x0, boxes[4 * c]);
          y0 = Math.min(y0, boxes[4 * c + 1]);
          x1 = Math.max(x1, boxes[4 * c + 2]);
          y1 = Math.max(y1, boxes[4 * c + 3]);
        }
        boxes[4 * parent] = x0;
        boxes[4 * parent + 1] = y0;
        boxes[4 * parent + 2] = x1;
        boxes[4 * parent + 3] = y1;
        indices[parent] = child;
        parent++;
      }
    }
    return new PackedHilbertRTree(count, nodeSize, boxes, indices, Arrays.copyOf(ends, levels));
  }

  /**
   * Reports every item whose box contains the point (boundary included), and possibly an item
   * whose box misses it by less than a float's rounding.
   */
  public void search(double x, double y, IntConsumer items) {
    search(x, y, x, y, items);
  }

  /**
   * Reports every item whose box intersects the query box (boundaries included), and possibly an
   * item whose box misses it by less than a float's rounding.
   */
  public void search(double minX, double minY, double maxX, double maxY, IntConsumer items) {
    if (itemCount > 0) {
      int root = indices.length - 1;
      visit(root, root + 1, levelEnds.length - 1, minX, minY, maxX, maxY, items);
    }
  }

  /** Depth-first over nodes {@code [from, to)} of one level; no allocation on the query path. */
  private void visit(int from, int to, int level, double minX, double minY, double maxX, double maxY, IntConsumer items) {
    for (int pos = from; pos < to; pos++) {
      int b = 4 * pos;
      if (maxX < boxes[b] || maxY < boxes[b + 1] || minX > boxes[b + 2] || minY > boxes[b + 3]) {
        continue;
      }
      if (level == 0) {
        items.accept(indices[pos]);
      } else {
        int child = indices[pos];
        visit(child, Math.min(child + nodeSize, levelEnds[level - 1]), level - 1, minX, minY, maxX, maxY, items);
      }
    }
  }

  public int size() {
    return itemCount;
  }

  private static float floatBelow(double v) {
    float f = (float) v;
    return f > v ? Math.nextDown(f) : f;
  }

  private static float floatAbove(double v) {
    float f = (float) v;
    return f < v ? Math.nextUp(f) : f;
  }

  /**
   * Position of (x, y) along a Hilbert curve over a 2^16 x 2^16 grid (the classic rotate-and-flip
   * walk from the most significant bit down).
   */
  static long hilbert(int x, int y) {
    long d = 0;
    for (int s = 1 << 15; s > 0; s >>>= 1) {
      int rx = (x & s) > 0 ? 1 : 0;
      int ry = (y & s) > 0 ? 1 : 0;
      d += (long) s * s * ((3 * rx) ^ ry);
      if (ry == 0) {
        if (rx == 1) {
          x = HILBERT_MAX - x;
          y = HILBERT_MAX - y;
        }
        int t = x;
        x = y;
        y = t;
      }
    }
    return d;
  }
}
