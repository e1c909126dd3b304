package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.Location;
import dev.geofence.job.testing.EndToEndFixture;
import java.sql.Statement;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * An edit of a fence's other columns leaves its geometry as it was. PostgreSQL keeps a geometry of
 * more than about 2 KB (130 vertices and up) out of line, and a logical decoding of an update that
 * leaves it unchanged does not carry it (the primary key is the replica identity): the stream says
 * the column is unchanged, not what it holds. Such an edit is no bad geometry, and its other
 * columns take effect.
 */
class UnchangedGeometryITCase extends EndToEndFixture {

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"wkb", "postgis"})
  void anEditOfABigFencesTenantKeepsItsGeometryAndTakesTheTenant(String column) throws Exception {
    if (column.equals("postgis")) {
      String server = System.getenv(GeofenceJobITCase.POSTGIS_URL);
      assertThat(server).as("%s must name a PostgreSQL with PostGIS (bash .ci/postgis.sh starts one)", GeofenceJobITCase.POSTGIS_URL)
          .isNotBlank();
      password = "postgres";
      database(server, password, "unchanged_geometry_postgis", true, 12);
    } else {
      database("unchanged_geometry", 12);
    }
    upsertFence("fence-big", GeneratedFences.star(new SplittableRandom(5), 5, 5, 3, 600));
    assertThat(queryLong("SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'fences'"))
        .as("the geometry is stored out of line").isPositive();
    start(2, "hashmap");
    long t = nextLocationTime();
    write(List.of(new Location("o-1", t, 5, 5, null)));
    assertTriggersAsOracle();

    awaitClockPastLocations();
    try (Statement s = db.createStatement()) {
      s.execute("UPDATE fences SET tenant = 'acme' WHERE id = 'fence-big'");
    }
    // o-1 leaves and comes back (the geometry kept); o-2's location is of tenant acme, checked
    // only against that tenant's fences: it ENTERs once the edit's tenant is in force.
    t = nextLocationTime();
    write(List.of(new Location("o-1", t, 20, 20, null), new Location("o-1", t + 1, 5, 5, null), new Location("o-2", t + 1, 5, 5, "acme")));
    assertTriggersAsOracle();
    assertThat(queryStrings("SELECT reason || ': ' || detail FROM geofence_dead_letters")).as("dead letters").isEmpty();
    assertEndsAsOracle("unchanged");
  }
}
