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

class PackedHilbertRTreeTest {

  @ParameterizedTest
  @ValueSource(ints = {0, 1, 2, 15, 16, 17, 257, 5_000})
  void searchFindsExactlyTheIntersectingBoxes(int count) {
    SplittableRandom random = new SplittableRandom(count);
    for (int nodeSize : new int[] {2, 3, 16}) {
      double[] bounds = randomBoxes(random, count);
      PackedHilbertRTree tree = PackedHilbertRTree.pack(bounds, count, nodeSize);
      assertThat(tree.size()).isEqualTo(count);
      for (int q = 0; q < 300; q++) {
        double x = random.nextDouble(-5, 105);
        double y = random.nextDouble(-5, 105);
        double w = q % 3 == 0 ? 0 : random.nextDouble(20);
        double h = q % 3 == 0 ? 0 : random.nextDouble(20);
        List<Integer> found = new ArrayList<>();
        tree.search(x, y, x + w, y + h, found::add);
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
        assertThat(found).doesNotHaveDuplicates().containsAll(expected);
        assertThat(allowed).containsAll(found);
      }
    }
  }

  @Test
  void pointOnABoxCornerIsFound() {
    double[] bounds = {0, 0, 1, 1, 2, 2, 3, 3};
    PackedHilbertRTree tree = PackedHilbertRTree.pack(bounds, 2, 16);
    List<Integer> found = new ArrayList<>();
    tree.search(1, 1, found::add);
    tree.search(3, 2, found::add);
    assertThat(found).containsExactly(0, 1);
  }

  @Test
  void refusesBadArguments() {
    assertThatThrownBy(() -> PackedHilbertRTree.pack(new double[4], 1, 1))
        .hasMessageContaining("at least 2 children");
    assertThatThrownBy(() -> PackedHilbertRTree.pack(new double[4], 2, 16))
        .hasMessageContaining("fewer than 2 boxes");
  }

  @Test
  void hilbertCurveFillsTheCornerBlockFirstAndEndsInTheOtherCorner() {
    // The curve starts at the origin, so its first 64 * 64 positions are exactly that block's cells.
    Set<Long> positions = new HashSet<>();
    for (int x = 0; x < 64; x++) {
      for (int y = 0; y < 64; y++) {
        positions.add(PackedHilbertRTree.hilbert(x, y));
      }
    }
    assertThat(positions).hasSize(4096).allMatch(d -> d >= 0 && d < 4096);
    assertThat(PackedHilbertRTree.hilbert(65535, 0)).isEqualTo((1L << 32) - 1);
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
