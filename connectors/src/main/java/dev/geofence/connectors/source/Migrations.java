package dev.geofence.connectors.source;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * Applies the SQL migrations shipped under {@code docker/sql/} (packaged from there: one copy).
 * Every file is idempotent, so applying it to a database that has it is harmless, and the files of
 * one call are applied in one transaction, which commits on the given connection (the versioning
 * needs it: it locks the fences while it replaces their triggers). Used by the tests and the demo;
 * users apply the same files with {@code psql --single-transaction}.
 */
public final class Migrations {

  /** How the fence geometry is stored at the source. */
  public enum GeometryColumn {
    /** PostGIS {@code geometry(Geometry, 4326)}; needs the PostGIS extension. */
    POSTGIS("sql/source/fences-postgis.sql"),
    /** WKB in {@code bytea}, for PostgreSQL without PostGIS. */
    WKB("sql/source/fences-wkb.sql");

    private final String resource;

    GeometryColumn(String resource) {
      this.resource = resource;
    }
  }

  private static final String VERSIONING = "sql/source/fence-versioning.sql";
  private static final String OUTPUTS = "sql/sink/geofence-outputs.sql";
  private static final String JOB_ROLE = "sql/source/geofence-role.sql";
  private static final String[] OUTPUT_TABLES =
      {"geofence_triggers", "geofence_triggers_text", "geofence_presence", "geofence_dead_letters", "hydration_history",
          "geofence_handover"};
  /** The newest column of each output table that has gained columns since its first release. */
  private static final String[][] NEWEST_COLUMNS = {{"hydration_history", "catchup_load_estimate_ms"}, {"geofence_triggers", "cause"}};

  private Migrations() {}

  /** The {@code fences} table in the given variant, then its versioning and bucket fingerprints. */
  public static void applySource(Connection connection, GeometryColumn column) throws SQLException {
    execute(connection, column.resource, VERSIONING);
  }

  /**
   * The versioning's tables and functions ({@code fence_bucket_stats}, {@code fence_tombstones},
   * ..., {@code geofence_versioning}), and the versioning of the {@code fences} table if there is
   * one; a table of one's own is then versioned with
   * {@code SELECT geofence_versioning('zones', 'zone_id')}.
   */
  public static void applyVersioning(Connection connection) throws SQLException {
    execute(connection, VERSIONING);
  }

  /** The job's output tables: triggers, presence, dead letters, hydration history, handover. */
  public static void applyOutputs(Connection connection) throws SQLException {
    execute(connection, OUTPUTS);
  }

  /**
   * The output tables, unless they all exist already with this release's columns: a job running as
   * the least-privileged role may not create or alter anything, not even with IF NOT EXISTS. Tables
   * of an earlier release get their new columns in place (which needs their owner).
   */
  public static void ensureOutputs(Connection connection) throws SQLException {
    try (Statement statement = connection.createStatement()) {
      for (String table : OUTPUT_TABLES) {
        if (!exists(statement, "SELECT to_regclass('" + table + "') IS NOT NULL")) {
          applyOutputs(connection);
          return;
        }
      }
      for (String[] column : NEWEST_COLUMNS) {
        if (!exists(statement, "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
            + " AND table_name = '" + column[0] + "' AND column_name = '" + column[1] + "')")) {
          applyOutputs(connection);
          return;
        }
      }
    }
  }

  private static boolean exists(Statement statement, String query) throws SQLException {
    try (java.sql.ResultSet r = statement.executeQuery(query)) {
      r.next();
      return r.getBoolean(1);
    }
  }

  /** The job's least-privileged role, {@code geofence_job}, and its grants (without a password). */
  public static void applyJobRole(Connection connection) throws SQLException {
    execute(connection, JOB_ROLE);
  }

  private static void execute(Connection connection, String... resources) throws SQLException {
    boolean autoCommit = connection.getAutoCommit();
    connection.setAutoCommit(false);
    String resource = null;
    try (Statement statement = connection.createStatement()) {
      for (String r : resources) {
        resource = r;
        statement.execute(read(r));
      }
      connection.commit();
    } catch (SQLException e) {
      connection.rollback();
      throw new SQLException("applying " + resource + " failed: " + e.getMessage(), e.getSQLState(), e);
    } finally {
      connection.setAutoCommit(autoCommit);
    }
  }

  private static String read(String resource) {
    try (InputStream in = Migrations.class.getClassLoader().getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException(resource + " is missing from the class path");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
