package dev.geofence.job;

import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
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
  private final LocationTimePolicy timePolicy;
  private final StayRules stayRules;
  private final int maxHeldLocations;
  private final int evaluationBatchSize;
  private final CatchUp catchUp;
  private final boolean locationsReplayDowntime;

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
    this.timePolicy = Objects.requireNonNull(b.timePolicy);
    this.stayRules = Objects.requireNonNull(b.stayRules);
    if (b.maxHeldLocations < 1) {
      throw new IllegalArgumentException("the maximum of held locations must be positive, got " + b.maxHeldLocations);
    }
    this.maxHeldLocations = b.maxHeldLocations;
    if (b.evaluationBatchSize < 1) {
      throw new IllegalArgumentException("the evaluation batch size must be at least 1, got " + b.evaluationBatchSize);
    }
    this.evaluationBatchSize = b.evaluationBatchSize;
    this.catchUp = Objects.requireNonNull(b.catchUp);
    this.locationsReplayDowntime = b.locationsReplayDowntime;
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

  /** Which locations event time admits: allowed lateness and maximum clock skew. */
  public LocationTimePolicy timePolicy() {
    return timePolicy;
  }

  /** How many locations a fence index subtask holds before the location sources pause. */
  /** The loitering delay of DWELL and the presence timeout of silence (docs/design.md#dwell-and-silence). */
  public StayRules stayRules() {
    return stayRules;
  }

  public int maxHeldLocations() {
    return maxHeldLocations;
  }

  /** Locations evaluated per query of the fence index, when the clock releases many at once. */
  public int evaluationBatchSize() {
    return evaluationBatchSize;
  }

  /** How a covered restore catches up: replay, read what changed, or the cheaper. */
  public CatchUp catchUp() {
    return catchUp;
  }

  /**
   * Whether the location source resumes from its restored position (Kafka, files), so that the
   * locations of a downtime come after a restore: {@link CatchUp#AUTO} then never reads.
   */
  public boolean locationsReplayDowntime() {
    return locationsReplayDowntime;
  }

  /** Builder of {@link JobSettings}. */
  public static final class Builder {
    private GeometryReadOptions geometryOptions = GeometryReadOptions.defaults();
    private GeometryFormat geometryFormat = GeometryFormat.WKB;
    private Duration locationOutOfOrderness = GeofenceOptions.LOCATION_OUT_OF_ORDERNESS.defaultValue();
    private Duration locationIdleness = Duration.ofSeconds(5);
    private LocationTimePolicy timePolicy = LocationTimePolicy.defaults();
    private StayRules stayRules = StayRules.OFF;
    private int maxHeldLocations = GeofenceOptions.MAX_HELD_LOCATIONS.defaultValue();
    private int evaluationBatchSize = GeofenceOptions.EVALUATION_BATCH_SIZE.defaultValue();
    private CatchUp catchUp = GeofenceOptions.CATCH_UP.defaultValue();
    private boolean locationsReplayDowntime = true;

    private Builder() {}

    public Builder catchUp(CatchUp catchUp, boolean locationsReplayDowntime) {
      this.catchUp = catchUp;
      this.locationsReplayDowntime = locationsReplayDowntime;
      return this;
    }

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

    public Builder timePolicy(LocationTimePolicy timePolicy) {
      this.timePolicy = timePolicy;
      return this;
    }

    public Builder stayRules(StayRules stayRules) {
      this.stayRules = stayRules;
      return this;
    }

    public Builder maxHeldLocations(int maxHeldLocations) {
      this.maxHeldLocations = maxHeldLocations;
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
