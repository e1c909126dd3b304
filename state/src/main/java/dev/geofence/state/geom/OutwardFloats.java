package dev.geofence.state.geom;

/**
 * Doubles rounded outwards to floats: a box so rounded still contains what the exact box
 * contained, in half the bytes. The index's trees and records, and a segment's stored boxes, hold
 * them; a fence's coverage grid is built over the box it is looked up with, so both use these.
 */
public final class OutwardFloats {

  private OutwardFloats() {}

  /** The greatest float not above {@code v}. */
  public static float below(double v) {
    float f = (float) v;
    return f > v ? Math.nextDown(f) : f;
  }

  /** The least float not below {@code v}. */
  public static float above(double v) {
    float f = (float) v;
    return f < v ? Math.nextUp(f) : f;
  }
}
