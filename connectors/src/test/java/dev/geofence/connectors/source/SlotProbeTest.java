package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.readiness.GapCheck;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.SlotState;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import org.junit.jupiter.api.Test;

/**
 * The gap check's view of a real slot: missing, confirmed past a restored position, and with its
 * WAL lost under a small {@code max_slot_wal_keep_size}; and the catch-up target, which the stream
 * can pass at once.
 */
class SlotProbeTest {

  @Test
  void gapCheckSeesMissingAdvancedAndLostSlots() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder()
            .setServerConfig("wal_level", "logical")
            .setServerConfig("max_replication_slots", "4")
            .setServerConfig("max_slot_wal_keep_size", "1MB")
            .setServerConfig("max_wal_size", "32MB")
            .setServerConfig("min_wal_size", "32MB")
            .start();
        Connection c = pg.getPostgresDatabase().getConnection();
        Statement s = c.createStatement()) {
      assertThat(SlotProbe.read(c, "geofence").exists()).isFalse();
      assertThat(GapCheck.check(SlotProbe.read(c, "geofence"), 0).covered()).isFalse();

      s.execute("CREATE TABLE t (x int)");
      s.execute("SELECT pg_create_logical_replication_slot('geofence', 'pgoutput')");
      long restored = lsn(s, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'geofence'");
      SlotState fresh = SlotProbe.read(c, "geofence");
      assertThat(fresh.walStatus()).isEqualTo("reserved");
      assertThat(GapCheck.check(fresh, restored).covered()).isTrue();

      // A later checkpoint of the job confirmed more: restoring the older position would skip edits.
      s.execute("INSERT INTO t SELECT generate_series(1, 1000)");
      // A checkpoint logs the running transactions, which a logical slot needs to move past.
      s.execute("CHECKPOINT");
      s.execute("INSERT INTO t SELECT generate_series(1, 1000)");
      s.execute("SELECT pg_replication_slot_advance('geofence', pg_current_wal_lsn())");
      SlotState advanced = SlotProbe.read(c, "geofence");
      assertThat(advanced.confirmedFlushLsn()).isGreaterThan(restored);
      assertThat(GapCheck.check(advanced, restored).covered()).isFalse();
      assertThat(GapCheck.check(advanced, advanced.confirmedFlushLsn()).covered()).isTrue();

      // Write well past max_slot_wal_keep_size and checkpoint: the slot's WAL is removed.
      for (int i = 0; i < 6; i++) {
        s.execute("INSERT INTO t SELECT generate_series(1, 20000)");
        s.execute("SELECT pg_switch_wal()");
      }
      s.execute("CHECKPOINT");
      SlotState lost = SlotProbe.read(c, "geofence");
      assertThat(lost.walStatus()).isEqualTo("lost");
      assertThat(GapCheck.check(lost, advanced.confirmedFlushLsn()).reason()).contains("wal_status = lost");

      s.execute("SELECT pg_drop_replication_slot('geofence')");
      assertThat(GapCheck.check(SlotProbe.read(c, "geofence"), restored).reason()).contains("does not exist");
    }
  }

  @Test
  void theCatchUpTargetIsFollowedByARecordTheStreamCanPassItWith() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection c = pg.getPostgresDatabase().getConnection();
        Statement s = c.createStatement()) {
      Migrations.applySource(c, GeometryColumn.WKB);
      s.execute("SELECT pg_create_logical_replication_slot('geofence', 'pgoutput')");

      SlotProbe.CatchUpTarget target = SlotProbe.catchUpTarget(c, FenceTableColumns.defaults(), 128, 0, 127);

      // With no edit after the target, only the heartbeat written with it lets the stream pass it
      // before the job's next heartbeat. A slot decodes flushed WAL alone, and the embedded server
      // commits asynchronously: its WAL writer flushes within a fifth of a second.
      String beyond = String.format("SELECT count(*) FROM pg_logical_slot_peek_binary_changes('geofence', NULL, NULL,"
          + " 'proto_version', '1', 'publication_names', '%s') WHERE lsn > '%s'::pg_lsn",
          GeofenceOptions.PUBLICATION.defaultValue(), Lsn.format(target.lsn()));
      long records = 0;
      for (long deadline = System.nanoTime() + 10_000_000_000L; records == 0 && System.nanoTime() < deadline; Thread.sleep(50)) {
        try (ResultSet r = s.executeQuery(beyond)) {
          r.next();
          records = r.getLong(1);
        }
      }
      assertThat(records).as("records the stream decodes beyond the catch-up target").isPositive();
    }
  }

  private static long lsn(Statement s, String sql) throws Exception {
    try (ResultSet r = s.executeQuery(sql)) {
      r.next();
      return Lsn.parse(r.getString(1));
    }
  }
}
