package dev.geofence.state.geom;

import java.io.Serializable;
import java.util.Objects;

/**
 * Immutable options of {@link FenceGeometryReader}: the vertex cap and the policy for invalid
 * polygons. Serializable so a Flink job can ship them to its operators.
 */
public final class GeometryReadOptions implements Serializable {

  private static final long serialVersionUID = 1L;

  /** Default vertex cap: large country outlines pass, runaway inputs do not. */
  public static final int DEFAULT_MAX_VERTICES = 1_000_000;

  private final int maxVertices;
  private final InvalidPolygonPolicy invalidPolicy;

  private GeometryReadOptions(int maxVertices, InvalidPolygonPolicy invalidPolicy) {
    if (maxVertices < 4) {
      throw new IllegalArgumentException(
          "the vertex cap must be at least 4 (a triangle's closed ring), got " + maxVertices);
    }
    this.maxVertices = maxVertices;
    this.invalidPolicy = Objects.requireNonNull(invalidPolicy, "the invalid-polygon policy");
  }

  public static GeometryReadOptions defaults() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  public int maxVertices() {
    return maxVertices;
  }

  public InvalidPolygonPolicy invalidPolicy() {
    return invalidPolicy;
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof GeometryReadOptions)) {
      return false;
    }
    GeometryReadOptions that = (GeometryReadOptions) o;
    return maxVertices == that.maxVertices && invalidPolicy == that.invalidPolicy;
  }

  @Override
  public int hashCode() {
    return Objects.hash(maxVertices, invalidPolicy);
  }

  @Override
  public String toString() {
    return "GeometryReadOptions{maxVertices=" + maxVertices + ", invalidPolicy=" + invalidPolicy + "}";
  }

  /** Builder of {@link GeometryReadOptions}; {@link #build()} checks the values. */
  public static final class Builder {
    private int maxVertices = DEFAULT_MAX_VERTICES;
    private InvalidPolygonPolicy invalidPolicy = InvalidPolygonPolicy.REPAIR;

    private Builder() {}

    public Builder maxVertices(int maxVertices) {
      this.maxVertices = maxVertices;
      return this;
    }

    public Builder invalidPolicy(InvalidPolygonPolicy invalidPolicy) {
      this.invalidPolicy = invalidPolicy;
      return this;
    }

    public GeometryReadOptions build() {
      return new GeometryReadOptions(maxVertices, invalidPolicy);
    }
  }
}
