package dev.geofence.connectors.location;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.Location;
import org.junit.jupiter.api.Test;

/** The benchmark fleet: vehicles that report in turn, each at its interval, at vehicle speeds, in the box. */
class FleetTest {

  private static final Fleet FLEET = new Fleet(1000, 0, 0, 30, 30, 1_700_000_000_000L, 2000, 13);

  @Test
  void everyVehicleReportsAtItsIntervalAtAboutTheSpeedInTheBox() {
    double slowest = Double.MAX_VALUE;
    double fastest = 0;
    for (long n = 0; n < 20_000; n++) {
      Location here = FLEET.location(n);
      Location next = FLEET.location(n + 1000);
      assertThat(next.objectId).isEqualTo(here.objectId).isEqualTo("vehicle-" + n % 1000);
      assertThat(next.timestamp - here.timestamp).as("location %d", n).isBetween(1999L, 2001L);
      assertThat(here.lon).isBetween(0.0, 30.0);
      assertThat(here.lat).isBetween(0.0, 30.0);
      double metres = metres(here, next);
      if (!nearEdge(here)) {
        slowest = Math.min(slowest, metres / 2);
        fastest = Math.max(fastest, metres / 2);
      }
    }
    assertThat(slowest).as("m/s of the slowest vehicle").isBetween(6.0, 7.0);
    assertThat(fastest).as("m/s of the fastest vehicle").isBetween(19.0, 19.6);
  }

  @Test
  void locationsArePureAndInTimeOrder() {
    assertThat(FLEET.location(12_345)).isEqualTo(FLEET.location(12_345));
    for (long n = 1; n < 10_000; n++) {
      assertThat(FLEET.time(n)).isGreaterThanOrEqualTo(FLEET.time(n - 1));
    }
    assertThat(FLEET.time(1000)).isEqualTo(1_700_000_002_000L);
    assertThat(FLEET.locationsPerSecond()).isEqualTo(500.0);
  }

  @Test
  void linesParseBackToTheLocationsAndAPastOneComesAtOnce() throws Exception {
    Fleet past = new Fleet(1000, 0, 0, 30, 30, 0, 2000, 13);
    long start = System.nanoTime();
    for (long n = 0; n < 5_000; n++) {
      assertThat(LocationJson.parse(past.map(n))).isEqualTo(past.location(n));
    }
    assertThat((System.nanoTime() - start) / 1e9).as("seconds for locations of 1970").isLessThan(5);
    Fleet future = new Fleet(1, 0, 0, 30, 30, System.currentTimeMillis() + 300, 2000, 13);
    start = System.nanoTime();
    future.map(0L);
    assertThat((System.nanoTime() - start) / 1e6).as("ms until a location 300 ms ahead is emitted").isBetween(250.0, 2000.0);
  }

  private static boolean nearEdge(Location l) {
    return l.lon < 0.5 || l.lat < 0.5 || l.lon > 29.5 || l.lat > 29.5;
  }

  private static double metres(Location a, Location b) {
    double dLat = (b.lat - a.lat) * 111_320;
    double dLon = (b.lon - a.lon) * 111_320 * Math.cos(Math.toRadians(a.lat));
    return Math.hypot(dLat, dLon);
  }
}
