package dev.geofence.connectors.model;

import java.util.Objects;

/**
 * One position of a moving object: the element every subtask evaluates against its fences.
 * A Flink POJO (public fields, no-argument constructor) so that it travels without Kryo.
 */
public class Location {

  /** The object that moved. */
  public String objectId;
  /** Event time: when the object was there, epoch milliseconds. */
  public long timestamp;
  public double lon;
  public double lat;
  /** Tenant scoping: when set, only fences of this tenant are evaluated. */
  public String tenant;

  public Location() {}

  public Location(String objectId, long timestamp, double lon, double lat, String tenant) {
    this.objectId = objectId;
    this.timestamp = timestamp;
    this.lon = lon;
    this.lat = lat;
    this.tenant = tenant;
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof Location)) {
      return false;
    }
    Location that = (Location) o;
    return timestamp == that.timestamp
        && Double.compare(lon, that.lon) == 0
        && Double.compare(lat, that.lat) == 0
        && Objects.equals(objectId, that.objectId)
        && Objects.equals(tenant, that.tenant);
  }

  @Override
  public int hashCode() {
    return Objects.hash(objectId, timestamp, lon, lat, tenant);
  }

  @Override
  public String toString() {
    return "Location{" + objectId + " @" + timestamp + " (" + lon + " " + lat + ")" + (tenant == null ? "" : " tenant=" + tenant) + "}";
  }
}
