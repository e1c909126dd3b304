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
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * Where the change stream starts after reads, against a real PostgreSQL slot: once every subtask
 * has said it reads or loads, the slot is created anew at the head of the WAL, as it was, before
 * any of them is told to begin, unless a transaction running then outlasts the wait for it (the
 * slot is kept); then it is moved to the least of the reads' positions, and each
 * move brings the slot's restart position up with it, so that the stream does not decode the
 * backlog again (a single move leaves it where the savepoint was).
 */
class StreamStartTest {

  @Test
  void theSlotIsCreatedAnewBeforeTheSubtasksReadOnceEveryOneReads() throws Exception {
    try (EmbeddedPostgres pg = logicalPostgres();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY, v text)");
      s.execute("SELECT pg_create_logical_replication_slot('anew', 'pgoutput', false, true)");
      long restored = confirmedLsn(s, "anew");
      s.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 50000) g");
      long head = currentLsn(s);

      String token = "stream-start-anew";
      List<Integer> told = new CopyOnWriteArrayList<>();
      try (StreamStart start = new StreamStart(token, source(pg, "anew"), told::add)) {
        start.reading(0, 2);
        Thread.sleep(500);
        assertThat(told).as("not told before every subtask said it reads").isEmpty();
        assertThat(confirmedLsn(s, "anew")).isEqualTo(restored);
        start.reading(1, 2);
        Waiting.until("both told", Duration.ofSeconds(30), () -> told.size() == 2);
        assertThat(told).containsExactlyInAnyOrder(0, 1);
        // Created anew, as it was: nothing of the backlog before it is left for it to decode.
        try (ResultSet r = s.executeQuery("SELECT plugin, two_phase, restart_lsn::text, confirmed_flush_lsn::text"
            + " FROM pg_replication_slots WHERE slot_name = 'anew'")) {
          assertThat(r.next()).isTrue();
          assertThat(r.getString(1)).isEqualTo("pgoutput");
          assertThat(r.getBoolean(2)).as("two_phase, as it was").isTrue();
          assertThat(Long.compareUnsigned(Lsn.parse(r.getString(3)), head)).as("restart %s, head %s", r.getString(3), Lsn.format(head))
              .isGreaterThanOrEqualTo(0);
          assertThat(Long.compareUnsigned(Lsn.parse(r.getString(4)), head)).isGreaterThanOrEqualTo(0);
        }
        // A subtask that fails and comes back reads from the slot as it now is: told at once.
        start.reset(1);
        start.reading(1, 2);
        assertThat(told).containsExactlyInAnyOrder(0, 1, 1);
        assertThat(StreamGate.of(token).isOpen()).isFalse();

        s.execute("INSERT INTO t VALUES (0, 'while they read')");
        long read = currentLsn(s);
        start.reported(0, 2, read);
        start.reported(1, 2, read);
        Waiting.until("the stream's start", Duration.ofSeconds(30), () -> StreamGate.of(token).isOpen());
        assertThat(confirmedLsn(s, "anew")).as("moved to the reads' position").isEqualTo(read);
      }
    }
  }

  @Test
  void theReadersWaitForATransactionOpenWhenTheSlotIsCreated() throws Exception {
    try (EmbeddedPostgres pg = logicalPostgres();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement();
        Connection writer = pg.getPostgresDatabase().getConnection(); Statement w = writer.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY)");
      s.execute("SELECT pg_create_logical_replication_slot('waited', 'pgoutput')");
      writer.setAutoCommit(false);
      w.execute("INSERT INTO t VALUES (1)");
      List<Integer> told = new CopyOnWriteArrayList<>();
      try (StreamStart start = new StreamStart("stream-start-waited", source(pg, "waited"), told::add)) {
        start.reading(0, 2);
        start.reading(1, 2);
        Thread.sleep(1_000);
        assertThat(told).as("the creation anew waits for the transactions running when every subtask reads").isEmpty();
        long beforeCommit = currentLsn(s);
        writer.commit();
        Waiting.until("both told", Duration.ofSeconds(30), () -> told.size() == 2);
        assertThat(Long.compareUnsigned(confirmedLsn(s, "waited"), beforeCommit)).as("created once it committed").isGreaterThan(0);
      }
    }
  }

  @Test
  void aTransactionStillRunningAfterTheWaitKeepsTheSlotAndTheReadersBegin() throws Exception {
    try (EmbeddedPostgres pg = logicalPostgres();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement();
        Connection writer = pg.getPostgresDatabase().getConnection(); Statement w = writer.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY)");
      s.execute("SELECT pg_create_logical_replication_slot('long', 'pgoutput')");
      s.execute("INSERT INTO t SELECT generate_series(1, 1000)");
      long restart = lsn(s, "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = 'long'");
      long confirmed = confirmedLsn(s, "long");
      writer.setAutoCommit(false);
      w.execute("INSERT INTO t VALUES (0)");
      String token = "stream-start-long";
      List<Integer> told = new CopyOnWriteArrayList<>();
      try (StreamStart start = new StreamStart(token, source(pg, "long"), told::add, Duration.ofSeconds(1))) {
        long began = System.nanoTime();
        start.reading(0, 2);
        start.reading(1, 2);
        Waiting.until("both told", Duration.ofSeconds(30), () -> told.size() == 2);
        assertThat(Duration.ofNanos(System.nanoTime() - began)).as("told once the wait was over").isGreaterThanOrEqualTo(Duration.ofSeconds(1));
        assertThat(lsn(s, "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = 'long'")).as("not created anew")
            .isEqualTo(restart);
        assertThat(confirmedLsn(s, "long")).isEqualTo(confirmed);
        // The slot is moved after the reads instead, the transaction still open.
        long read = currentLsn(s);
        start.reported(0, 2, read);
        start.reported(1, 2, read);
        Waiting.until("the stream's start", Duration.ofSeconds(30), () -> StreamGate.of(token).isOpen());
        assertThat(confirmedLsn(s, "long")).as("moved to the reads' position").isEqualTo(read);
      }
      writer.rollback();
    }
  }

  @Test
  void aSlotThatIsNotThereIsNotCreatedAndTheReadersAreToldAtOnce() throws Exception {
    try (EmbeddedPostgres pg = logicalPostgres();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      List<Integer> told = new CopyOnWriteArrayList<>();
      try (StreamStart start = new StreamStart("stream-start-absent", source(pg, "absent"), told::add)) {
        start.reading(0, 2);
        start.reading(1, 2);
        Waiting.until("both told", Duration.ofSeconds(30), () -> told.size() == 2);
        try (ResultSet r = s.executeQuery("SELECT count(*) FROM pg_replication_slots")) {
          r.next();
          assertThat(r.getInt(1)).as("the CDC source creates it, not the coordinator").isZero();
        }
      }
    }
  }

  @Test
  void eachMoveBringsTheRestartPositionAlong() throws Exception {
    try (EmbeddedPostgres pg = logicalPostgres();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY, v text)");
      s.execute("SELECT pg_create_logical_replication_slot('moved', 'pgoutput')");
      // The backlog, with the running transactions logged in between, as a server logs them while busy.
      long lastLogged = 0;
      for (int i = 0; i < 5; i++) {
        s.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(" + (i * 10_000 + 1) + ", " + ((i + 1) * 10_000) + ") g");
        lastLogged = currentLsn(s);
        s.execute("CHECKPOINT");
      }
      long read = currentLsn(s);

      String token = "stream-start-test";
      // Reads that did not wait for the slot (it could not be created anew): it is moved after them.
      try (StreamStart start = new StreamStart(token, source(pg, "moved"), subtask -> {})) {
        start.reported(0, 2, read);
        start.reported(1, 2, read);
        Waiting.until("the stream's start", Duration.ofSeconds(30), () -> StreamGate.of(token).isOpen());
        assertThat(confirmedLsn(s, "moved")).isEqualTo(read);
        // Its restart position came along with the second move: one move alone would leave it at
        // the first running transactions logged after the restored position.
        assertThat(Long.compareUnsigned(restartLsn(s), lastLogged)).as("restart %s, last logged %s", Lsn.format(restartLsn(s)),
            Lsn.format(lastLogged)).isGreaterThan(0);
      }
    }
  }

  @Test
  void aSubtaskThatReplaysKeepsTheSlotWhereItIs() throws Exception {
    try (EmbeddedPostgres pg = logicalPostgres();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY)");
      s.execute("SELECT pg_create_logical_replication_slot('kept', 'pgoutput')");
      long restored = confirmedLsn(s, "kept");
      long restart = lsn(s, "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = 'kept'");
      s.execute("INSERT INTO t SELECT generate_series(1, 1000)");
      long target = currentLsn(s);
      String token = "stream-start-replay";
      List<Integer> told = new CopyOnWriteArrayList<>();
      try (StreamStart start = new StreamStart(token, source(pg, "kept"), told::add)) {
        start.reported(1, 2, 0);
        start.reading(0, 2);
        assertThat(told).as("the reader, at once: the slot stays as it is").containsExactly(0);
        start.reported(0, 2, target);
        assertThat(StreamGate.of(token).isOpen()).isTrue();
        assertThat(confirmedLsn(s, "kept")).isEqualTo(restored);
        assertThat(lsn(s, "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = 'kept'")).as("not created anew")
            .isEqualTo(restart);
      }
    }
  }

  /**
   * A slot that exists again when it is to be created anew (another client created it after the
   * drop, or an attempt whose answer was lost, whose server process went on creating it) is taken
   * as created: the readers are told. Red when every failed creation was tried again, for ever.
   */
  @Test
  void aSlotCreatedByAnotherClientSinceTheDropIsTakenAsCreated() throws Exception {
    try (EmbeddedPostgres pg = logicalPostgres();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement();
        Connection other = pg.getPostgresDatabase().getConnection(); Statement o = other.createStatement()) {
      s.execute("SELECT pg_create_logical_replication_slot('again', 'pgoutput')");
      AtomicBoolean won = new AtomicBoolean();
      AtomicBoolean stop = new AtomicBoolean();
      Thread racer = new Thread(() -> {
        // Creates the slot as soon as it is gone, in the time the creation anew takes to connect.
        try {
          while (!stop.get()) {
            try (ResultSet r = o.executeQuery("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'again'")) {
              r.next();
              if (r.getInt(1) == 0) {
                o.execute("SELECT pg_create_logical_replication_slot('again', 'pgoutput')");
                won.set(true);
                return;
              }
            }
          }
        } catch (Exception lost) {
          // The creation anew came first: the test below says so.
        }
      });
      racer.start();
      List<Integer> told = new CopyOnWriteArrayList<>();
      try (StreamStart start = new StreamStart("stream-start-again", source(pg, "again"), told::add)) {
        start.reading(0, 1);
        Waiting.until("told", Duration.ofSeconds(30), () -> told.size() == 1);
      } finally {
        stop.set(true);
        racer.join();
      }
      assertThat(won).as("the other client created the slot between the drop and the creation anew").isTrue();
    }
  }

  /** A PostgreSQL whose WAL logical slots can decode. */
  private static EmbeddedPostgres logicalPostgres() throws Exception {
    return EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
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
