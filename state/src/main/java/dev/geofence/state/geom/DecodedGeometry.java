package dev.geofence.state.geom;

import java.util.Objects;
import java.util.Optional;

/**
 * A geometry accepted by {@link FenceGeometryReader}, with the repair it needed, if any. A repair
 * is a warning the caller records (a dead-letter row of warning severity), never silent.
 *
 * @param repair what was wrong with the input before {@code GeometryFixer} repaired it; empty if
 *     nothing
 */
public record DecodedGeometry(FenceGeometry geometry, Optional<String> repair) {

  public DecodedGeometry {
    Objects.requireNonNull(geometry);
    Objects.requireNonNull(repair);
  }
}
