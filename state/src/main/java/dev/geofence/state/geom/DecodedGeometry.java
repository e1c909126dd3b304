package dev.geofence.state.geom;

import java.util.Objects;
import java.util.Optional;

/**
 * A geometry accepted by {@link FenceGeometryReader}, with the repair it needed, if any. A repair
 * is a warning the caller records (a dead-letter row of warning severity), never silent.
 */
public final class DecodedGeometry {

  private final FenceGeometry geometry;
  private final String repair;

  DecodedGeometry(FenceGeometry geometry, String repair) {
    this.geometry = Objects.requireNonNull(geometry);
    this.repair = repair;
  }

  public FenceGeometry geometry() {
    return geometry;
  }

  /** What was wrong with the input before {@code GeometryFixer} repaired it; empty if nothing. */
  public Optional<String> repair() {
    return Optional.ofNullable(repair);
  }
}
