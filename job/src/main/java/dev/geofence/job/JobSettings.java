package dev.geofence.job;

import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import java.io.Serializable;
import java.time.Duration;
import java.util.Objects;

/** Immutable settings of the job's data flow that are not sources or sinks. */
public final class JobSettings implements Serializable {

  private static final long serialVersionUID = 1L;

  private final GeometryReadOptions geometryOptions;
  private final GeometryFormat geometryFormat;
  private final Duration locationOutOfOrderness;
  private final Duration locationIdleness;
  private final int evaluationBatchSize;

  private JobSettings(Builder b) {
    this.geometryOptions = Objects.requireNonNull(b.geometryOptions);
    this.geometryFormat = Objects.requireNonNull(b.geometryFormat);
    if (b.locationOutOfOrderness.isNegative()) {
      throw new IllegalArgumentException("the location out-of-orderness must not be negative");
    }
    if (b.locationIdleness.isNegative() || b.locationIdleness.isZero()) {
      throw new IllegalArgumentException("the location idleness must be positive");
    }
    this.locationOutOfOrderness = b.locationOutOfOrderness;
    this.locationIdleness = b.locationIdleness;
    if (b.evaluationBatchSize < 1) {
      throw new IllegalArgumentException("the evaluation batch size must be at least 1, got " + b.evaluationBatchSize);
    }
    this.evaluationBatchSize = b.evaluationBatchSize;
  }

  public static JobSettings defaults() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  public GeometryReadOptions geometryOptions() {
    return geometryOptions;
  }

  public GeometryFormat geometryFormat() {
    return geometryFormat;
  }

  /** How late a location may arrive behind the newest one and still be evaluated in order. */
  public Duration locationOutOfOrderness() {
    return locationOutOfOrderness;
  }

  /** After this long without locations, the location stream stops holding the clock back. */
  public Duration locationIdleness() {
    return locationIdleness;
  }

  /** Locations evaluated per query of the fence index, when the clock releases many at once. */
  public int evaluationBatchSize() {
    return evaluationBatchSize;
  }

  /** Builder of {@link JobSettings}. */
  public static final class Builder {
    private GeometryReadOptions geometryOptions = GeometryReadOptions.defaults();
    private GeometryFormat geometryFormat = GeometryFormat.WKB;
    private Duration locationOutOfOrderness = Duration.ofSeconds(1);
    private Duration locationIdleness = Duration.ofSeconds(5);
    private int evaluationBatchSize = 64;

    private Builder() {}

    public Builder geometryOptions(GeometryReadOptions geometryOptions) {
      this.geometryOptions = geometryOptions;
      return this;
    }

    public Builder geometryFormat(GeometryFormat geometryFormat) {
      this.geometryFormat = geometryFormat;
      return this;
    }

    public Builder locationOutOfOrderness(Duration locationOutOfOrderness) {
      this.locationOutOfOrderness = locationOutOfOrderness;
      return this;
    }

    public Builder locationIdleness(Duration locationIdleness) {
      this.locationIdleness = locationIdleness;
      return this;
    }

    public Builder evaluationBatchSize(int evaluationBatchSize) {
      this.evaluationBatchSize = evaluationBatchSize;
      return this;
    }

    public JobSettings build() {
      return new JobSettings(this);
    }
  }
}
