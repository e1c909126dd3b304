package dev.geofence.state.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

class PackedRTreeTest {

  @ParameterizedTest
  @ValueSource(ints = {0, 1, 2, 15, 16, 17, 257, 5_000})
  void searchFindsExactlyTheIntersectingBoxes(int count) {
    SplittableRandom random = new SplittableRandom(count);
    for (PackedRTree.Packing packing : PackedRTree.Packing.values()) {
      for (int nodeSize : new int[] {2, 3, 16}) {
        double[] bounds = randomBoxes(random, count);
        PackedRTree tree = PackedRTree.pack(bounds, count, nodeSize, packing);
        assertThat(tree.size()).isEqualTo(count);
        Set<Integer> items = new HashSet<>();
        for (int pos = 0; pos < count; pos++) {
          items.add(tree.itemAt(pos));
        }
        assertThat(items).as("leaf positions map onto the items one to one").hasSize(count);
        for (int q = 0; q < 300; q++) {
          double x = random.nextDouble(-5, 105);
          double y = random.nextDouble(-5, 105);
          double w = q % 3 == 0 ? 0 : random.nextDouble(20);
          double h = q % 3 == 0 ? 0 : random.nextDouble(20);
          List<Integer> found = new ArrayList<>();
          if (w == 0 && h == 0) {
            // A point: the query that starts from the directory.
            tree.search(x, y, pos -> found.add(tree.itemAt(pos)));
          } else {
            tree.search(x, y, x + w, y + h, pos -> found.add(tree.itemAt(pos)));
          }
          List<Integer> expected = new ArrayList<>();
          List<Integer> allowed = new ArrayList<>();
          for (int i = 0; i < count; i++) {
            if (bounds[4 * i] <= x + w && bounds[4 * i + 1] <= y + h && bounds[4 * i + 2] >= x && bounds[4 * i + 3] >= y) {
              expected.add(i);
            }
            // Float boxes may add an item that misses by less than a float's rounding.
            double slack = 2 * Math.ulp(200f);
            if (bounds[4 * i] <= x + w + slack && bounds[4 * i + 1] <= y + h + slack
                && bounds[4 * i + 2] >= x - slack && bounds[4 * i + 3] >= y - slack) {
              allowed.add(i);
            }
          }
          assertThat(found).as(packing + ", node size " + nodeSize).doesNotHaveDuplicates().containsAll(expected);
          assertThat(allowed).containsAll(found);
        }
      }
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 1, 2, 17, 257, 5_000})
  void batchSearchFindsWhatEachPointSearchFinds(int count) {
    SplittableRandom random = new SplittableRandom(31 + count);
    for (PackedRTree.Packing packing : PackedRTree.Packing.values()) {
      for (int nodeSize : new int[] {2, 16}) {
        double[] bounds = randomBoxes(random, count);
        PackedRTree tree = PackedRTree.pack(bounds, count, nodeSize, packing);
        int n = 1 + random.nextInt(300);
        // Longer arrays than the batch: only the first n points are read.
        double[] xs = new double[n + 5];
        double[] ys = new double[n + 5];
        for (int i = 0; i < n + 5; i++) {
          xs[i] = random.nextDouble(-5, 105);
          ys[i] = random.nextDouble(-5, 105);
        }
        PointPairs found = new PointPairs();
        tree.searchAll(xs, ys, n, found, new PointPairs[] {new PointPairs(), new PointPairs()});
        List<String> batch = new ArrayList<>();
        List<Integer> pointOrder = new ArrayList<>();
        for (int k = 0; k < found.size; k++) {
          batch.add(found.points[k] + " " + found.nodes[k]);
          pointOrder.add(found.points[k]);
        }
        List<String> one = new ArrayList<>();
        for (int p = 0; p < n; p++) {
          int point = p;
          tree.search(xs[p], ys[p], pos -> one.add(point + " " + pos));
        }
        assertThat(batch).as(packing + ", node size " + nodeSize).containsExactlyInAnyOrderElementsOf(one);
        assertThat(pointOrder).as("grouped by point, in increasing order").isSorted();
      }
    }
  }

  @Test
  void pointOnABoxCornerIsFound() {
    double[] bounds = {0, 0, 1, 1, 2, 2, 3, 3};
    PackedRTree tree = PackedRTree.pack(bounds, 2, 16, PackedRTree.Packing.HILBERT);
    List<Integer> found = new ArrayList<>();
    tree.search(1, 1, pos -> found.add(tree.itemAt(pos)));
    tree.search(3, 2, pos -> found.add(tree.itemAt(pos)));
    assertThat(found).containsExactly(0, 1);
  }

  @Test
  void refusesBadArguments() {
    assertThatThrownBy(() -> PackedRTree.pack(new double[4], 1, 1, PackedRTree.Packing.STR))
        .hasMessageContaining("at least 2 children");
    assertThatThrownBy(() -> PackedRTree.pack(new double[4], 2, 16, PackedRTree.Packing.HILBERT))
        .hasMessageContaining("fewer than 2 boxes");
  }

  @Test
  void hilbertCurveFillsTheCornerBlockFirstAndEndsInTheOtherCorner() {
    // The curve starts at the origin, so its first 64 * 64 positions are exactly that block's cells.
    Set<Long> positions = new HashSet<>();
    for (int x = 0; x < 64; x++) {
      for (int y = 0; y < 64; y++) {
        positions.add(PackedRTree.hilbert(x, y));
      }
    }
    assertThat(positions).hasSize(4096).allMatch(d -> d >= 0 && d < 4096);
    assertThat(PackedRTree.hilbert(65535, 0)).isEqualTo((1L << 32) - 1);
  }

  @Test
  void hilbertCurveIsTheClassicWalkAndStepsToANeighbourEachTime() {
    SplittableRandom random = new SplittableRandom(3);
    for (int i = 0; i < 100_000; i++) {
      int x = random.nextInt(1 << 16);
      int y = random.nextInt(1 << 16);
      assertThat(PackedRTree.hilbert(x, y)).isEqualTo(classicHilbert(x, y));
    }
    // Along the curve over the corner block of 256 x 256, each step moves to a 4-neighbour.
    int[][] at = new int[256 * 256][];
    for (int x = 0; x < 256; x++) {
      for (int y = 0; y < 256; y++) {
        at[(int) PackedRTree.hilbert(x, y)] = new int[] {x, y};
      }
    }
    for (int d = 1; d < at.length; d++) {
      assertThat(Math.abs(at[d][0] - at[d - 1][0]) + Math.abs(at[d][1] - at[d - 1][1])).as("step " + d).isEqualTo(1);
    }
  }

  /** The textbook rotate-and-flip walk (as on Wikipedia's "Hilbert curve"), as the oracle. */
  private static long classicHilbert(int x, int y) {
    int max = (1 << 16) - 1;
    long d = 0;
    for (int s = 1 << 15; s > 0; s >>>= 1) {
      int rx = (x & s) > 0 ? 1 : 0;
      int ry = (y & s) > 0 ? 1 : 0;
      d += (long) s * s * ((3 * rx) ^ ry);
      if (ry == 0) {
        if (rx == 1) {
          x = max - x;
          y = max - y;
        }
        int t = x;
        x = y;
        y = t;
      }
    }
    return d;
  }

  private static double[] randomBoxes(SplittableRandom random, int count) {
    double[] bounds = new double[4 * count];
    for (int i = 0; i < count; i++) {
      double x = random.nextDouble(100);
      double y = random.nextDouble(100);
      bounds[4 * i] = x;
      bounds[4 * i + 1] = y;
      bounds[4 * i + 2] = x + (i % 7 == 0 ? 0 : random.nextDouble(5));
      bounds[4 * i + 3] = y + (i % 5 == 0 ? 0 : random.nextDouble(5));
    }
    return bounds;
  }
}
