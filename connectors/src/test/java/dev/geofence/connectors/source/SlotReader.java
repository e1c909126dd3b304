package dev.geofence.connectors.source;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Properties;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.PGReplicationStream;

/**
 * A reader of a logical replication slot on a test server, as an instance's CDC source is: while
 * it is open the slot is read ({@code active}); closed, the server lets go of it, which {@link
 * #awaitUnread} waits for. For the tests of every module that keep or drop slots by whether
 * they are read.
 */
public final class SlotReader implements AutoCloseable {

  private final Connection replication;
  private final PGReplicationStream stream;

  private SlotReader(Connection replication, PGReplicationStream stream) {
    this.replication = replication;
    this.stream = stream;
  }

  /** Starts reading {@code slot} (pgoutput, the publication {@code publication}) as the user postgres. */
  public static SlotReader open(EmbeddedPostgres pg, String slot, String publication) throws Exception {
    Properties p = new Properties();
    PGProperty.USER.set(p, "postgres");
    PGProperty.REPLICATION.set(p, "database");
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "12");
    PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    Connection replication = DriverManager.getConnection(pg.getJdbcUrl("postgres", "postgres"), p);
    return new SlotReader(replication, replication.unwrap(PGConnection.class).getReplicationAPI().replicationStream().logical()
        .withSlotName(slot).withSlotOption("proto_version", 1).withSlotOption("publication_names", publication).start());
  }

  @Override
  public void close() throws Exception {
    stream.close();
    replication.close();
  }

  /** Waits until the server says no one reads {@code slot} (a closed reader's connection ends a moment later). */
  public static void awaitUnread(Statement s, String slot) throws Exception {
    for (int i = 0; i < 100; i++) {
      try (ResultSet r = s.executeQuery("SELECT active FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
        r.next();
        if (!r.getBoolean(1)) {
          return;
        }
      }
      Thread.sleep(100);
    }
    throw new AssertionError("the slot " + slot + " is still read after its reader closed");
  }
}
