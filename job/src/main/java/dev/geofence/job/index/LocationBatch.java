package dev.geofence.job.index;

import dev.geofence.connectors.model.Location;
import dev.geofence.state.index.FenceIndex;
import java.util.Arrays;
import java.util.List;

/**
 * Locations waiting to be evaluated together, up to a capacity, with the key groups each is owed
 * to, and the answers of one batch query of the index for them. Not thread-safe.
 */
final class LocationBatch {

  private final Location[] locations;
  private final int[] keyGroupStarts;
  private final int[] keyGroupEnds;
  private final double[] xs;
  private final double[] ys;
  private final String[] tenants;
  private int size;
  private boolean anyTenant;
  /** The query's answers, in increasing point order: the point, and a fence covering it. */
  private int[] hitPoints;
  private String[] hitIds;
  private int hits;
  private int nextHit;

  LocationBatch(int capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("a batch holds at least one location, got " + capacity);
    }
    locations = new Location[capacity];
    keyGroupStarts = new int[capacity];
    keyGroupEnds = new int[capacity];
    xs = new double[capacity];
    ys = new double[capacity];
    tenants = new String[capacity];
    hitPoints = new int[capacity * 2];
    hitIds = new String[capacity * 2];
  }

  void add(Location location, int keyGroupStart, int keyGroupEnd) {
    locations[size] = location;
    keyGroupStarts[size] = keyGroupStart;
    keyGroupEnds[size] = keyGroupEnd;
    xs[size] = location.lon;
    ys[size] = location.lat;
    tenants[size] = location.tenant;
    anyTenant |= location.tenant != null;
    size++;
  }

  boolean full() {
    return size == locations.length;
  }

  int size() {
    return size;
  }

  Location location(int point) {
    return locations[point];
  }

  int keyGroupStart(int point) {
    return keyGroupStarts[point];
  }

  int keyGroupEnd(int point) {
    return keyGroupEnds[point];
  }

  /** Asks the index for the fences covering every point; read them with {@link #covering}, points in order. */
  void query(FenceIndex index) {
    hits = 0;
    nextHit = 0;
    index.forEachCovering(xs, ys, anyTenant ? tenants : null, size, this::hit);
  }

  /** Replaces {@code into}'s content with the fences covering {@code point}; points are read in increasing order. */
  void covering(int point, List<String> into) {
    into.clear();
    while (nextHit < hits && hitPoints[nextHit] == point) {
      into.add(hitIds[nextHit++]);
    }
  }

  void clear() {
    Arrays.fill(locations, 0, size, null);
    Arrays.fill(tenants, 0, size, null);
    Arrays.fill(hitIds, 0, hits, null);
    size = 0;
    hits = 0;
    nextHit = 0;
    anyTenant = false;
  }

  private void hit(int point, String fenceId) {
    if (hits == hitPoints.length) {
      hitPoints = Arrays.copyOf(hitPoints, hits * 2);
      hitIds = Arrays.copyOf(hitIds, hits * 2);
    }
    hitPoints[hits] = point;
    hitIds[hits++] = fenceId;
  }
}
