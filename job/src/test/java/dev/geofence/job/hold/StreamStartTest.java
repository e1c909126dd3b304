package dev.geofence.job.hold;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.job.testing.Waiting;
import dev.geofence.state.readiness.Lsn;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Where the change stream starts after reads, against a real PostgreSQL slot: the slot is moved
 * while the subtasks read, once every one has said it reads or loads, then to the least of the
 * reads' positions; and each move brings the slot's restart position up with it, so that the
 * stream does not decode the backlog again (a single move leaves it where the savepoint was).
 */
class StreamStartTest {

  @Test
  void theSlotMovesWhileTheSubtasksReadAndItsRestartPositionComesAlong() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY, v text)");
      s.execute("SELECT pg_create_logical_replication_slot('moved', 'pgoutput')");
      long restored = confirmedLsn(s);
      // The backlog, with the running transactions logged in between, as a server logs them while busy.
      long lastLogged = 0;
      for (int i = 0; i < 5; i++) {
        s.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(" + (i * 10_000 + 1) + ", " + ((i + 1) * 10_000) + ") g");
        lastLogged = currentLsn(s);
        s.execute("CHECKPOINT");
      }
      long target = currentLsn(s);
      s.execute("INSERT INTO t VALUES (0, 'after the gap checks')");
      s.execute("CHECKPOINT");
      long read = currentLsn(s);

      String token = "stream-start-test";
      FenceSourceOptions source = source(pg, "moved");
      try (StreamStart start = new StreamStart(token, source)) {
        start.reading(0, 2, target);
        Thread.sleep(500);
        assertThat(confirmedLsn(s)).as("not moved before every subtask said it reads").isEqualTo(restored);
        start.reading(1, 2, read);
        Waiting.until("the slot moved while the subtasks read", Duration.ofSeconds(30), () -> confirmedLsn(s) == target);
        // Its restart position comes along with the second move: one move alone would leave it at
        // the first running transactions logged after the restored position.
        long logged = lastLogged;
        Waiting.until("the restart position past " + Lsn.format(logged), Duration.ofSeconds(30),
            () -> Long.compareUnsigned(restartLsn(s), logged) > 0);
        assertThat(StreamGate.of(token).isOpen()).isFalse();

        start.reported(0, 2, read);
        start.reported(1, 2, read);
        Waiting.until("the stream's start", Duration.ofSeconds(30), () -> StreamGate.of(token).isOpen());
        assertThat(confirmedLsn(s)).isEqualTo(read);
        assertThat(Long.compareUnsigned(restartLsn(s), target)).as("restart %s, the first move's target %s", Lsn.format(restartLsn(s)),
            Lsn.format(target)).isGreaterThanOrEqualTo(0);
      }
    }
  }

  @Test
  void aSubtaskThatReplaysKeepsTheSlotWhereItIs() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY)");
      s.execute("SELECT pg_create_logical_replication_slot('kept', 'pgoutput')");
      long restored = confirmedLsn(s, "kept");
      s.execute("INSERT INTO t SELECT generate_series(1, 1000)");
      long target = currentLsn(s);
      String token = "stream-start-replay";
      FenceSourceOptions source = source(pg, "kept");
      try (StreamStart start = new StreamStart(token, source)) {
        start.reported(1, 2, 0);
        start.reading(0, 2, target);
        start.reported(0, 2, target);
        assertThat(StreamGate.of(token).isOpen()).isTrue();
        assertThat(confirmedLsn(s, "kept")).isEqualTo(restored);
      }
    }
  }

  /** The test server's database as a fence source with slot {@code slot}. */
  private static FenceSourceOptions source(EmbeddedPostgres pg, String slot) {
    return FenceSourceOptions.builder().url(pg.getJdbcUrl("postgres", "postgres")).username("postgres").password("").slotName(slot).build();
  }

  private static long currentLsn(Statement s) throws Exception {
    return lsn(s, "SELECT pg_current_wal_flush_lsn()::text");
  }

  private static long restartLsn(Statement s) throws Exception {
    return lsn(s, "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = 'moved'");
  }

  private static long confirmedLsn(Statement s) throws Exception {
    return confirmedLsn(s, "moved");
  }

  private static long confirmedLsn(Statement s, String slot) throws Exception {
    return lsn(s, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
  }

  /** The one LSN a query answers. */
  private static long lsn(Statement s, String sql) throws Exception {
    try (ResultSet r = s.executeQuery(sql)) {
      r.next();
      return Lsn.parse(r.getString(1));
    }
  }
}
