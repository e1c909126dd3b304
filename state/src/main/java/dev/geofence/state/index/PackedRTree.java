package dev.geofence.state.index;

import dev.geofence.state.geom.OutwardFloats;
import java.util.Arrays;
import java.util.function.IntConsumer;

/**
 * A static R-tree packed bottom-up in one pass over sorted items, laid out as in V. Agafonkin's
 * Flatbush: every node is full but the last of its level, and the nodes live in flat primitive
 * arrays, leaves first. Two packings are offered, because which one answers point queries faster
 * depends on the data and is measured, not assumed (see {@code bench/run index}):
 *
 * <ul>
 *   <li>{@link Packing#HILBERT}: items sorted along a Hilbert curve through their centres, each
 *       level grouping consecutive nodes (Kamel and Faloutsos, "On Packing R-trees", CIKM 1993).
 *   <li>{@link Packing#STR}: Sort-Tile-Recursive, each level sorted into vertical slices by centre
 *       x and each slice by centre y (Leutenegger, Lopez and Edgington, "STR: A Simple and
 *       Efficient Algorithm for R-Tree Packing", ICDE 1997; as JTS's {@code STRtree}).
 * </ul>
 *
 * <p>Leaves are identified by their <em>position</em>, 0 to {@code size() - 1} in the packed
 * order, which keeps nearby items near each other: a caller that stores per-item data by position
 * reads it from neighbouring memory for neighbouring queries. {@link #itemAt} maps a position back
 * to the item's number in the input.
 *
 * <p>Read-only once built: callers that edit keep their changes elsewhere and pack a new tree (see
 * {@link FenceIndex}). Thread-safe and immutable; {@link #searchAll} works in buffers its caller
 * owns.
 */
public final class PackedRTree {

  /** How items are ordered before they are grouped into nodes. */
  public enum Packing {
    HILBERT,
    STR
  }

  /** Children per node: 16 keeps a 1.2 M item tree five levels deep. */
  public static final int DEFAULT_NODE_SIZE = 16;

  /**
   * The packing {@link FenceIndex} uses unless told otherwise, chosen by measurement: at 100,000
   * and 1.2 M fences, STR answered batches of 1,024 points about a fifth faster than Hilbert
   * packing and single points about as fast (its leaves overlap less: 1.48 leaf nodes scanned
   * per point against 1.81).
   */
  public static final Packing DEFAULT_PACKING = Packing.STR;

  private static final int HILBERT_MAX = (1 << 16) - 1;

  private final int itemCount;
  private final int nodeSize;
  /**
   * minX, minY, maxX, maxY per node; the leaves (one per item) come first, the root last. Floats
   * rounded outwards: every box still contains its item, a query may see a few extra candidates
   * that the caller's exact test drops, and the tree is half the size and half the cache misses.
   */
  private final float[] boxes;
  /** An inner node's first child position, at {@code node - itemCount}. */
  private final int[] firstChild;
  /** End position (exclusive) of each level, leaves first. */
  private final int[] levelEnds;
  /** The input item number of each leaf position. */
  private final int[] items;
  /** Where point queries start, in a tree of three levels or more; null otherwise. */
  private final Directory directory;

  private PackedRTree(int itemCount, int nodeSize, float[] boxes, int[] firstChild, int[] levelEnds, int[] items) {
    this.itemCount = itemCount;
    this.nodeSize = nodeSize;
    this.boxes = boxes;
    this.firstChild = firstChild;
    this.levelEnds = levelEnds;
    this.items = items;
    this.directory = levelEnds.length >= 3 ? new Directory(boxes, itemCount, levelEnds[1]) : null;
  }

  /**
   * A grid over the tree's box whose cells list the leaves' parents (the nodes of level 1) whose
   * boxes meet the cell. A point query reads its cell's short list and goes straight to the leaves,
   * skipping the levels above, whose box tests are otherwise most of a query's work (at 1.2 M
   * leaves, about 90 of 115). A cell's column is {@code floor((x - minX) * scaleX)} clamped to the
   * grid, which never decreases as x grows (rows likewise), so a node is listed in every cell from
   * that of its box's low corner to that of its high corner, and a point's cell lists every node
   * whose box contains the point. About two nodes per cell: a few bytes per leaf.
   */
  private static final class Directory {
    final double minX;
    final double minY;
    final double scaleX;
    final double scaleY;
    final int side;
    /** Cell c's nodes are {@code nodes[cellStarts[c] .. cellStarts[c + 1] - 1]}. */
    final int[] cellStarts;
    final int[] nodes;

    Directory(float[] boxes, int from, int to) {
      int root = boxes.length / 4 - 1;
      minX = boxes[4 * root];
      minY = boxes[4 * root + 1];
      double width = boxes[4 * root + 2] - minX;
      double height = boxes[4 * root + 3] - minY;
      side = Math.max(1, (int) Math.sqrt((to - from) / 2.0));
      scaleX = width > 0 ? side / width : 0;
      scaleY = height > 0 ? side / height : 0;
      cellStarts = new int[side * side + 1];
      for (int pass = 0; pass < 2; pass++) {
        int[] next = pass == 0 ? null : Arrays.copyOf(cellStarts, side * side);
        int[] filled = pass == 0 ? null : new int[cellStarts[side * side]];
        for (int node = from; node < to; node++) {
          int b = 4 * node;
          int x0 = column(boxes[b]);
          int x1 = column(boxes[b + 2]);
          int y1 = row(boxes[b + 3]);
          for (int y = row(boxes[b + 1]); y <= y1; y++) {
            for (int x = x0; x <= x1; x++) {
              if (pass == 0) {
                cellStarts[y * side + x + 1]++;
              } else {
                filled[next[y * side + x]++] = node;
              }
            }
          }
        }
        if (pass == 0) {
          for (int c = 0; c < side * side; c++) {
            cellStarts[c + 1] += cellStarts[c];
          }
        } else {
          nodes = filled;
          return;
        }
      }
      throw new AssertionError("unreachable");
    }

    int column(double x) {
      return Math.max(0, Math.min(side - 1, (int) ((x - minX) * scaleX)));
    }

    int row(double y) {
      return Math.max(0, Math.min(side - 1, (int) ((y - minY) * scaleY)));
    }

    int cell(double x, double y) {
      return row(y) * side + column(x);
    }
  }

  /**
   * Packs a tree over {@code count} boxes given as {@code minX, minY, maxX, maxY} quadruples.
   *
   * @param bounds at least {@code 4 * count} values; not retained
   */
  public static PackedRTree pack(double[] bounds, int count, int nodeSize, Packing packing) {
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
    int[] firstChild = new int[nodes - count];
    int[] levelEnds = Arrays.copyOf(ends, levels);
    if (count == 0) {
      return new PackedRTree(0, nodeSize, boxes, firstChild, levelEnds, new int[0]);
    }
    int[] order = packing == Packing.HILBERT ? hilbertOrder(bounds, count) : strOrder(bounds, count, nodeSize);
    for (int pos = 0; pos < count; pos++) {
      int item = order[pos];
      boxes[4 * pos] = OutwardFloats.below(bounds[4 * item]);
      boxes[4 * pos + 1] = OutwardFloats.below(bounds[4 * item + 1]);
      boxes[4 * pos + 2] = OutwardFloats.above(bounds[4 * item + 2]);
      boxes[4 * pos + 3] = OutwardFloats.above(bounds[4 * item + 3]);
    }
    int parent = count;
    for (int level = 0; level < levels - 1; level++) {
      int start = level == 0 ? 0 : levelEnds[level - 1];
      if (level > 0 && packing == Packing.STR) {
        tileLevel(boxes, firstChild, count, start, levelEnds[level], nodeSize);
      }
      for (int child = start; child < levelEnds[level]; child += nodeSize) {
        int last = Math.min(child + nodeSize, levelEnds[level]);
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
        firstChild[parent - count] = child;
        parent++;
      }
    }
    return new PackedRTree(count, nodeSize, boxes, firstChild, levelEnds, order);
  }

  private static int[] hilbertOrder(double[] bounds, int count) {
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
    HilbertScale scale = new HilbertScale(minX, minY, maxX, maxY);
    long[] keys = new long[count];
    for (int i = 0; i < count; i++) {
      double cx = (bounds[4 * i] + bounds[4 * i + 2]) / 2;
      double cy = (bounds[4 * i + 1] + bounds[4 * i + 3]) / 2;
      keys[i] = scale.key(cx, cy, i);
    }
    Arrays.sort(keys);
    int[] order = new int[count];
    for (int pos = 0; pos < count; pos++) {
      order[pos] = (int) keys[pos];
    }
    return order;
  }

  /** STR order of the items: slices by centre x, each sorted by centre y. */
  private static int[] strOrder(double[] bounds, int count, int nodeSize) {
    float[] centres = new float[2 * count];
    for (int i = 0; i < count; i++) {
      centres[2 * i] = (float) ((bounds[4 * i] + bounds[4 * i + 2]) / 2);
      centres[2 * i + 1] = (float) ((bounds[4 * i + 1] + bounds[4 * i + 3]) / 2);
    }
    return tile(centres, count, nodeSize);
  }

  /** Puts the nodes {@code [start, end)} of an inner level in STR order, moving their child links. */
  private static void tileLevel(float[] boxes, int[] firstChild, int count, int start, int end, int nodeSize) {
    int n = end - start;
    float[] centres = new float[2 * n];
    for (int i = 0; i < n; i++) {
      int b = 4 * (start + i);
      centres[2 * i] = (boxes[b] + boxes[b + 2]) / 2;
      centres[2 * i + 1] = (boxes[b + 1] + boxes[b + 3]) / 2;
    }
    int[] order = tile(centres, n, nodeSize);
    float[] oldBoxes = Arrays.copyOfRange(boxes, 4 * start, 4 * end);
    int[] oldChildren = Arrays.copyOfRange(firstChild, start - count, end - count);
    for (int i = 0; i < n; i++) {
      System.arraycopy(oldBoxes, 4 * order[i], boxes, 4 * (start + i), 4);
      firstChild[start + i - count] = oldChildren[order[i]];
    }
  }

  private static int[] tile(float[] centres, int n, int nodeSize) {
    int parents = (n + nodeSize - 1) / nodeSize;
    int slices = (int) Math.ceil(Math.sqrt(parents));
    int perSlice = slices * nodeSize;
    long[] keys = new long[n];
    for (int i = 0; i < n; i++) {
      keys[i] = sortKey(centres[2 * i], i);
    }
    Arrays.sort(keys);
    for (int from = 0; from < n; from += perSlice) {
      int to = Math.min(n, from + perSlice);
      for (int k = from; k < to; k++) {
        int i = (int) keys[k];
        keys[k] = sortKey(centres[2 * i + 1], i);
      }
      Arrays.sort(keys, from, to);
    }
    int[] order = new int[n];
    for (int k = 0; k < n; k++) {
      order[k] = (int) keys[k];
    }
    return order;
  }

  /** A float in the high half, ordered as a signed long; the index in the low half breaks ties. */
  private static long sortKey(float value, int index) {
    int bits = Float.floatToIntBits(value);
    bits ^= (bits >> 31) & 0x7fffffff;
    return ((long) bits << 32) | index;
  }

  /**
   * Reports the position of every leaf whose box contains the point (boundary included), and
   * possibly one whose box misses it by less than a float's rounding.
   */
  public void search(double x, double y, IntConsumer positions) {
    if (directory == null) {
      search(x, y, x, y, positions);
      return;
    }
    int cell = directory.cell(x, y);
    for (int k = directory.cellStarts[cell]; k < directory.cellStarts[cell + 1]; k++) {
      int node = directory.nodes[k];
      if (contains(4 * node, x, y)) {
        int child = firstChild[node - itemCount];
        int last = Math.min(child + nodeSize, itemCount);
        for (int c = child; c < last; c++) {
          if (contains(4 * c, x, y)) {
            positions.accept(c);
          }
        }
      }
    }
  }

  /**
   * Reports the position of every leaf whose box intersects the query box (boundaries included),
   * and possibly one whose box misses it by less than a float's rounding.
   */
  public void search(double minX, double minY, double maxX, double maxY, IntConsumer positions) {
    if (itemCount > 0) {
      int root = boxes.length / 4 - 1;
      visit(root, root + 1, levelEnds.length - 1, minX, minY, maxX, maxY, positions);
    }
  }

  /** Depth-first over nodes {@code [from, to)} of one level; no allocation on the query path. */
  private void visit(int from, int to, int level, double minX, double minY, double maxX, double maxY, IntConsumer positions) {
    for (int pos = from; pos < to; pos++) {
      int b = 4 * pos;
      if (maxX < boxes[b] || maxY < boxes[b + 1] || minX > boxes[b + 2] || minY > boxes[b + 3]) {
        continue;
      }
      if (level == 0) {
        positions.accept(pos);
      } else {
        int child = firstChild[pos - itemCount];
        visit(child, Math.min(child + nodeSize, levelEnds[level - 1]), level - 1, minX, minY, maxX, maxY, positions);
      }
    }
  }

  /**
   * Finds the leaves of points {@code 0 .. n - 1} at once: fills {@code found} with a pair
   * (point, leaf position) for every leaf whose box contains the point, as {@link #search(double,
   * double, IntConsumer)} would report it, grouped by point in increasing order.
   *
   * <p>The tree is walked level by level for all points together rather than point by point: the
   * nodes one level needs are known before any is read, so their cache misses overlap instead of
   * queueing behind each other.
   *
   * @param work two buffers for the levels in between, cleared and reused
   */
  void searchAll(double[] xs, double[] ys, int n, PointPairs found, PointPairs[] work) {
    found.clear();
    if (itemCount == 0 || n == 0) {
      return;
    }
    PointPairs level = work[0];
    level.clear();
    int depth;
    if (directory != null) {
      // Straight to the leaves' parents through the directory.
      Directory d = directory;
      for (int p = 0; p < n; p++) {
        double x = xs[p];
        double y = ys[p];
        int cell = d.cell(x, y);
        for (int j = d.cellStarts[cell]; j < d.cellStarts[cell + 1]; j++) {
          int node = d.nodes[j];
          if (contains(4 * node, x, y)) {
            level.add(p, node);
          }
        }
      }
      depth = 1;
    } else {
      int root = boxes.length / 4 - 1;
      for (int p = 0; p < n; p++) {
        if (contains(4 * root, xs[p], ys[p])) {
          level.add(p, root);
        }
      }
      if (levelEnds.length == 1) {
        // The root is the only leaf.
        for (int k = 0; k < level.size; k++) {
          found.add(level.points[k], root);
        }
        return;
      }
      depth = levelEnds.length - 1;
    }
    for (; depth > 0; depth--) {
      PointPairs next = depth == 1 ? found : (level == work[0] ? work[1] : work[0]);
      if (next != found) {
        next.clear();
      }
      touchChildren(level);
      int childEnd = levelEnds[depth - 1];
      for (int k = 0; k < level.size; k++) {
        int p = level.points[k];
        double x = xs[p];
        double y = ys[p];
        int child = firstChild[level.nodes[k] - itemCount];
        int last = Math.min(child + nodeSize, childEnd);
        for (int c = child; c < last; c++) {
          int b = 4 * c;
          // Non-short-circuit: one branch per box, rarely taken, instead of four unpredictable.
          if ((x >= boxes[b]) & (y >= boxes[b + 1]) & (x <= boxes[b + 2]) & (y <= boxes[b + 3])) {
            next.add(p, c);
          }
        }
      }
      level = next;
    }
  }

  /** Written so that the loads of {@link #touchChildren} cannot be optimized away. */
  @SuppressWarnings("unused")
  private static volatile int sink;

  /**
   * Reads every cache line of every pair's children's boxes before any of them is scanned: the
   * loads are independent, so the processor issues their cache misses together, and the scan that
   * follows finds the lines arriving or arrived.
   */
  private void touchChildren(PointPairs level) {
    int sum = 0;
    int lastBox = boxes.length - 1;
    for (int k = 0; k < level.size; k++) {
      int b = 4 * firstChild[level.nodes[k] - itemCount];
      // A node's children's boxes span nodeSize * 16 bytes: one load per 64-byte line. Integer
      // adds, since a chain of floating-point adds would hold back the loads behind it.
      for (int i = 0; i < 4 * nodeSize; i += 16) {
        sum += Float.floatToRawIntBits(boxes[Math.min(b + i, lastBox)]);
      }
    }
    if (sum == 42) {
      sink = sum;
    }
  }

  private boolean contains(int b, double x, double y) {
    return (x >= boxes[b]) & (y >= boxes[b + 1]) & (x <= boxes[b + 2]) & (y <= boxes[b + 3]);
  }

  /** Number of leaves (items). */
  public int size() {
    return itemCount;
  }

  /** The input item number of the leaf at {@code position}. */
  public int itemAt(int position) {
    return items[position];
  }

  /**
   * Position of (x, y), each in {@code [0, 65535]}, along a Hilbert curve over a 2^16 x 2^16 grid:
   * the classic walk from the most significant bit down, where each quadrant may swap x and y and
   * complement both for the bits below it. Swapping and complementing commute, so the walk's state
   * is two bits and each step is branch-free arithmetic. Public for callers that order their
   * points along the same curve as the packing ({@code bench/run index} measures batches so
   * ordered).
   */
  public static long hilbert(int x, int y) {
    long d = 0;
    int swap = 0;
    int flip = 0;
    for (int level = 15; level >= 0; level--) {
      int bx = (x >>> level) & 1;
      int by = (y >>> level) & 1;
      int t = (bx ^ by) & swap;
      int rx = bx ^ t ^ flip;
      int ry = by ^ t ^ flip;
      d = (d << 2) | ((3 * rx) ^ ry);
      // In the lower quadrants the curve turns: swap, and complement too on the right.
      int lower = ry ^ 1;
      flip ^= rx & lower;
      swap ^= lower;
    }
    return d;
  }

  /**
   * Maps points of a box onto the 2^16 x 2^16 Hilbert grid and makes sort keys of them: the
   * Hilbert value in the high half, a number in the low half, the sign bit flipped so that a
   * signed sort orders the keys as unsigned numbers. Points outside the box go to its edge.
   */
  private static final class HilbertScale {
    private final double minX;
    private final double minY;
    private final double scaleX;
    private final double scaleY;

    HilbertScale(double minX, double minY, double maxX, double maxY) {
      this.minX = minX;
      this.minY = minY;
      this.scaleX = maxX > minX ? HILBERT_MAX / (maxX - minX) : 0;
      this.scaleY = maxY > minY ? HILBERT_MAX / (maxY - minY) : 0;
    }

    long key(double x, double y, int number) {
      int hx = (int) Math.max(0, Math.min(HILBERT_MAX, scaleX * (x - minX)));
      int hy = (int) Math.max(0, Math.min(HILBERT_MAX, scaleY * (y - minY)));
      return ((hilbert(hx, hy) << 32) | number) ^ Long.MIN_VALUE;
    }
  }
}
