package dev.geofence.state.index;

import java.util.Arrays;

/**
 * A growable list of (point, number) pairs in two parallel int arrays: the work lists of a batch
 * query, where the number is a tree node, a leaf position or a slot. Reused from batch to batch,
 * so a steady stream of batches allocates nothing. Not thread-safe.
 */
final class PointPairs {

  int size;
  int[] points = new int[64];
  int[] nodes = new int[64];

  void clear() {
    size = 0;
  }

  void add(int point, int node) {
    if (size == points.length) {
      points = Arrays.copyOf(points, 2 * size);
      nodes = Arrays.copyOf(nodes, 2 * size);
    }
    points[size] = point;
    nodes[size] = node;
    size++;
  }
}
