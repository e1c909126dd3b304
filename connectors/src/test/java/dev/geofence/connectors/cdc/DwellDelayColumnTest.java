package dev.geofence.connectors.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.source.BucketRead;
import dev.geofence.connectors.source.ChangedRead;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.state.edit.HeldFences;
import io.debezium.time.MicroDuration;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Predicate;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.locationtech.jts.io.WKBWriter;
import org.locationtech.jts.io.WKTReader;
import org.postgresql.util.PGInterval;

/**
 * A fence's own dwell delay, read from a real PostgreSQL by the real Flink CDC source and by the
 * rebuilds' and catch-ups' reads of the table: the same milliseconds both ways, for intervals of
 * every kind (months, which Debezium counts as 365.25 / 12 days; fractions its doubles round
 * below a whole millisecond; negative ones), an update of the delay alone arrives with the new
 * delay, null and a table without the column give none, and a column of another type fails naming
 * the column and its type.
 */
@Timeout(180)
class DwellDelayColumnTest {

  /** Each interval and the milliseconds it is, as Debezium counts them. */
  private static final Map<String, Long> DELAYS = new LinkedHashMap<>();

  static {
    DELAYS.put("90 seconds", 90_000L);
    DELAYS.put("5 minutes", 300_000L);
    // 32.4375 days (a month of 30.4375) and 3:04:05.678.
    DELAYS.put("1 mon 2 days 03:04:05.678", 2_813_645_678L);
    // 15 months of 30.4375 days.
    DELAYS.put("1 year 3 mons", 39_447_000_000L);
    DELAYS.put("-10 seconds", -10_000L);
    // Debezium's doubles make it 1,004,999.9999999999 µs, which it casts to 1,004,999.
    DELAYS.put("1.005 seconds", 1_004L);
    DELAYS.put("0.0015 seconds", 1L);
    // -2,629,800,000.5 ms: the part of a millisecond dropped towards zero.
    DELAYS.put("-1 mons -0.0005 seconds", -2_629_800_000L);
    DELAYS.put("1 day -1 hour", 82_800_000L);
    DELAYS.put("0 seconds", 0L);
    DELAYS.put(null, null);
  }

  private static EmbeddedPostgres pg;
  private static byte[] square;

  @BeforeAll
  static void start() throws Exception {
    pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
    square = new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))"));
  }

  @AfterAll
  static void stop() throws Exception {
    pg.close();
  }

  @Test
  void theStreamAndTheReadsOfTheTableGiveEachIntervalTheSameDelay() throws Exception {
    try (Connection db = database("delays")) {
      ReplicationSlots.createIfMissing(db, "delays");
      Map<String, Long> expected = new LinkedHashMap<>();
      try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom, dwell_delay) VALUES (?, ?, ?::interval)")) {
        int i = 0;
        for (Map.Entry<String, Long> delay : DELAYS.entrySet()) {
          String id = "fence-" + i++;
          insert.setString(1, id);
          insert.setBytes(2, square);
          insert.setString(3, delay.getKey());
          insert.execute();
          expected.put(id, delay.getValue());
        }
      }
      assertThat(read(db, FenceTableColumns.defaults())).as("a rebuild's read").isEqualTo(expected);
      assertThat(changedRead(db)).as("a catch-up's read").isEqualTo(expected);
      assertThat(read(db, FenceTableColumns.builder().dwellDelay(null).build())).as("with no column mapped")
          .containsOnlyKeys(expected.keySet()).allSatisfy((id, delay) -> assertThat(delay).isNull());

      // Updates of the delay alone: a delay changed, one removed, one given.
      Map<String, Long> updated = new LinkedHashMap<>(expected);
      try (Statement s = db.createStatement()) {
        s.execute("UPDATE fences SET dwell_delay = '7 minutes' WHERE id = 'fence-0'");
        s.execute("UPDATE fences SET dwell_delay = NULL WHERE id = 'fence-1'");
        s.execute("UPDATE fences SET dwell_delay = '2 hours' WHERE id = 'fence-" + (DELAYS.size() - 1) + "'");
      }
      updated.put("fence-0", 420_000L);
      updated.put("fence-1", null);
      updated.put("fence-" + (DELAYS.size() - 1), 7_200_000L);
      assertThat(read(db, FenceTableColumns.defaults())).as("a rebuild's read after the updates").isEqualTo(updated);
      assertThat(changedRead(db)).as("a catch-up's read after the updates").isEqualTo(updated);

      List<FenceChange> stream = stream("delays", FenceTableColumns.defaults(),
          changes -> changes.stream().filter(c -> c.seq == 2).count() == 3);
      Map<String, Long> inserted = new LinkedHashMap<>();
      Map<String, Long> latest = new LinkedHashMap<>();
      for (FenceChange change : stream) {
        if (change.seq == 1) {
          inserted.put(change.fenceId, change.dwellDelay);
        }
        latest.put(change.fenceId, change.dwellDelay);
      }
      assertThat(inserted).as("the stream's inserts").isEqualTo(expected);
      assertThat(latest).as("the stream's updates").isEqualTo(updated);
    }
  }

  /**
   * Over random intervals, the stream, the reads of the table, and Debezium's own arithmetic on the
   * interval's text (pgjdbc's PGInterval, MicroDuration.durationMicros, as its converter calls them)
   * agree to the millisecond.
   */
  @Test
  void overRandomIntervalsTheReadsAgreeWithTheStreamAndDebeziumsArithmetic() throws Exception {
    try (Connection db = database("random_delays")) {
      ReplicationSlots.createIfMissing(db, "random_delays");
      SplittableRandom random = new SplittableRandom(11);
      int n = 2_000;
      try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom, dwell_delay) VALUES (?, ?, ?::interval)")) {
        for (int i = 0; i < n; i++) {
          // Months and days of either sign; a time of up to 400 hours to the microsecond, or of a few
          // seconds to the millisecond, where Debezium's doubles often fall just below a whole one.
          long micros = random.nextBoolean() ? random.nextLong(-1_440_000_000_000L, 1_440_000_000_000L)
              : random.nextLong(-10_000, 10_000) * 1000;
          insert.setString(1, "fence-" + i);
          insert.setBytes(2, square);
          insert.setString(3, random.nextInt(-1_200, 1_201) + " mons " + random.nextInt(-400, 401) + " days "
              + BigDecimal.valueOf(micros, 6).toPlainString() + " seconds");
          insert.addBatch();
        }
        insert.executeBatch();
      }
      Map<String, Long> debezium = new HashMap<>();
      try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT id, dwell_delay::text FROM fences")) {
        while (r.next()) {
          PGInterval interval = new PGInterval(r.getString(2));
          debezium.put(r.getString(1), FenceChange.dwellDelayOfMicros(MicroDuration.durationMicros(interval.getYears(),
              interval.getMonths(), interval.getDays(), interval.getHours(), interval.getMinutes(), interval.getSeconds(),
              MicroDuration.DAYS_PER_MONTH_AVG)));
        }
      }
      assertThat(debezium).hasSize(n);
      assertThat(read(db, FenceTableColumns.defaults())).as("a rebuild's read").isEqualTo(debezium);
      assertThat(changedRead(db)).as("a catch-up's read").isEqualTo(debezium);
      Map<String, Long> streamed = new HashMap<>();
      stream("random_delays", FenceTableColumns.defaults(), changes -> changes.size() == n)
          .forEach(change -> streamed.put(change.fenceId, change.dwellDelay));
      assertThat(streamed).as("the stream").isEqualTo(debezium);
    }
  }

  @Test
  void aTableWithoutTheColumnHasNoDelays() throws Exception {
    try (Connection db = database("no_delays"); Statement s = db.createStatement()) {
      s.execute("ALTER TABLE fences DROP COLUMN dwell_delay");
      ReplicationSlots.createIfMissing(db, "no_delays");
      insertFences(db, 3);
      Map<String, Long> none = new HashMap<>();
      for (int i = 0; i < 3; i++) {
        none.put("fence-" + i, null);
      }
      assertThat(read(db, FenceTableColumns.defaults())).isEqualTo(none);
      assertThat(changedRead(db)).isEqualTo(none);
      List<FenceChange> stream = stream("no_delays", FenceTableColumns.defaults(), changes -> changes.size() == 3);
      assertThat(stream).extracting(c -> c.fenceId).containsExactlyInAnyOrderElementsOf(none.keySet());
      assertThat(stream).allSatisfy(c -> assertThat(c.dwellDelay).isNull());
      // The same table with the delay in a column named otherwise, mapped to it.
      s.execute("ALTER TABLE fences ADD COLUMN linger interval");
      s.execute("UPDATE fences SET linger = interval '90 seconds'");
      Map<String, Long> lingering = new HashMap<>();
      none.keySet().forEach(id -> lingering.put(id, 90_000L));
      assertThat(read(db, FenceTableColumns.builder().dwellDelay("linger").build())).isEqualTo(lingering);
      assertThat(read(db, FenceTableColumns.defaults())).as("the default name, which the table lacks").isEqualTo(none);
    }
  }

  /** Milliseconds in a bigint, say, are not read as a delay, nor taken for none. */
  @Test
  void aColumnOfAnotherTypeFailsNamingItAndItsType() throws Exception {
    try (Connection db = database("bigint_delays"); Statement s = db.createStatement()) {
      s.execute("ALTER TABLE fences DROP COLUMN dwell_delay");
      s.execute("ALTER TABLE fences ADD COLUMN dwell_delay bigint");
      ReplicationSlots.createIfMissing(db, "bigint_delays");
      insertFences(db, 1);
      s.execute("UPDATE fences SET dwell_delay = 60000");
      assertThatThrownBy(() -> read(db, FenceTableColumns.defaults())).isInstanceOf(SQLException.class)
          .hasMessageContaining("dwell delay column dwell_delay of type bigint, not interval");
      assertThatThrownBy(() -> changedRead(db)).isInstanceOf(SQLException.class)
          .hasMessageContaining("dwell delay column dwell_delay of type bigint, not interval");
      assertThatThrownBy(() -> stream("bigint_delays", FenceTableColumns.defaults(), changes -> changes.size() == 2))
          .hasStackTraceContaining("dwell delay column 'dwell_delay' that arrives as INT64, not as an interval's microseconds");
    }
  }

  /** A database of its own with the shipped WKB fences table and its versioning. */
  private static Connection database(String name) throws Exception {
    try (Connection admin = pg.getPostgresDatabase().getConnection(); Statement s = admin.createStatement()) {
      s.execute("CREATE DATABASE " + name);
    }
    Connection db = pg.getDatabase("postgres", name).getConnection();
    Migrations.applySource(db, GeometryColumn.WKB);
    return db;
  }

  private static void insertFences(Connection db, int n) throws SQLException {
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
      for (int i = 0; i < n; i++) {
        insert.setString(1, "fence-" + i);
        insert.setBytes(2, square);
        insert.execute();
      }
    }
  }

  /** The live fences' delays as a rebuild reads them: every bucket, as one subtask of one. */
  private static Map<String, Long> read(Connection db, FenceTableColumns columns) throws SQLException {
    Map<String, Long> delays = new HashMap<>();
    BucketRead.read(db, columns, 1, 0, 0, change -> {
      if (change.kind == FenceChange.Kind.FENCE && !change.delete) {
        delays.put(change.fenceId, change.dwellDelay);
      }
    });
    return delays;
  }

  /** The live fences' delays as a catch-up of a subtask that holds none reads them: each whole. */
  private static Map<String, Long> changedRead(Connection db) throws Exception {
    Map<String, Long> delays = new HashMap<>();
    ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(Map.of()), 0, false, change -> {
      if (change.kind == FenceChange.Kind.FENCE && !change.delete) {
        delays.put(change.fenceId, change.dwellDelay);
      }
    });
    return delays;
  }

  /** The fence edits the CDC source streams from {@code slot} (made before the edits), until {@code enough}. */
  private static List<FenceChange> stream(String database, FenceTableColumns columns, Predicate<List<FenceChange>> enough)
      throws Exception {
    FenceSourceOptions options = FenceSourceOptions.builder().url("jdbc:postgresql://localhost:" + pg.getPort() + "/" + database)
        .username("postgres").slotName(database).columns(columns).heartbeatInterval(Duration.ofMillis(300)).build();
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(1);
    List<FenceChange> fences = new ArrayList<>();
    try (CloseableIterator<FenceChange> it =
        env.fromSource(FenceSource.create(options), WatermarkStrategy.noWatermarks(), "fences").executeAndCollect()) {
      while (!enough.test(fences) && it.hasNext()) {
        FenceChange change = it.next();
        if (change.kind == FenceChange.Kind.FENCE) {
          fences.add(change);
        }
      }
    }
    return fences;
  }
}
