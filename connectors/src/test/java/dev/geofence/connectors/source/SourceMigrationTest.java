package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeSet;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The source-of-truth migration on a real PostgreSQL: the seq, tombstone and bucket fingerprint
 * contract of docs/design.md#source-of-truth-contract against a model of it kept in Java, over
 * random transactions of several multi-row statements (with savepoints, rollbacks and constraints
 * set immediate), and the in-place upgrade of a database that has the first version of the
 * migration.
 */
class SourceMigrationTest {

  /** WKB of POLYGON ((0 0, 1 0, 1 1, 0 0)); the triggers never look at the geometry. */
  private static final String WKB =
      "\\x01030000000100000004000000000000000000000000000000000000000000000000"
          + "00f03f0000000000000000000000000000f03f000000000000f03f0000000000000000"
          + "0000000000000000";
  /** The migration as shipped before issue 13 (a test resource). */
  static final String FIRST_VERSION = "sql/source/fence-versioning-v1.sql";
  /** The migration as shipped after issue 13, with statement triggers noting each statement (a test resource). */
  static final String SECOND_VERSION = "sql/source/fence-versioning-v2.sql";

  private static EmbeddedPostgres postgres;
  private Connection connection;

  @BeforeAll
  static void start() throws Exception {
    postgres = EmbeddedPostgres.builder().start();
  }

  @AfterAll
  static void stop() throws Exception {
    postgres.close();
  }

  @BeforeEach
  void freshSchema() throws Exception {
    connection = postgres.getPostgresDatabase().getConnection();
    exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP PUBLICATION IF EXISTS geofence_publication");
    Migrations.applySource(connection, GeometryColumn.WKB);
  }

  @AfterEach
  void closeConnection() throws Exception {
    // A failed test may leave a transaction open; its locks must not block the next test's set-up.
    if (!connection.getAutoCommit()) {
      connection.rollback();
    }
    connection.close();
  }

  @Test
  void everyBucketHasAFingerprintRowFromTheStart() throws Exception {
    assertThat(queryLong("SELECT count(*) FROM fence_bucket_stats")).isEqualTo(4096);
    assertThat(queryLong("SELECT count(*) FROM fence_bucket_stats WHERE fence_count <> 0 OR checksum <> 0 OR version <> 0")).isZero();
  }

  @Test
  void applyingTwiceChangesNothing() throws Exception {
    exec("INSERT INTO fences (id, geom) VALUES ('a', '" + WKB + "')");
    Map<Integer, Long> versions = versions();
    Migrations.applySource(connection, GeometryColumn.WKB);
    assertThat(stats()).containsExactly(1L, FenceChecksum.hash("a", 1));
    assertThat(versions()).isEqualTo(versions);
    assertThat(queryLong("SELECT fence_hash('fence-1', 1)")).isEqualTo(-9123025917352333894L);
  }

  /**
   * The primary key as replica identity, so that no update carries its old row through the WAL
   * (the job reads a delete's version from its tombstone); FULL set by an earlier release is
   * replaced, and a fences table without a primary key gets FULL, since its deletes must carry
   * something.
   */
  @Test
  void replicaIdentityIsThePrimaryKeyOrFullWithoutOne() throws Exception {
    assertThat(identity("fences")).isEqualTo("d");
    assertThat(identity("fence_bucket_stats")).isEqualTo("d");
    exec("ALTER TABLE fences REPLICA IDENTITY FULL; ALTER TABLE fence_bucket_stats REPLICA IDENTITY FULL");
    Migrations.applySource(connection, GeometryColumn.WKB);
    assertThat(identity("fences")).as("an earlier release's FULL, migrated").isEqualTo("d");
    assertThat(identity("fence_bucket_stats")).isEqualTo("d");

    connection.setAutoCommit(false);
    exec("CREATE TABLE keyless (id text NOT NULL UNIQUE, seq bigint NOT NULL DEFAULT 1, geom bytea NOT NULL);"
        + " SELECT geofence_versioning('keyless')");
    connection.commit();
    connection.setAutoCommit(true);
    assertThat(identity("keyless")).isEqualTo("f");
    exec("INSERT INTO keyless (id, geom) VALUES ('k', '" + WKB + "'); DELETE FROM keyless WHERE id = 'k'");
    assertThat(queryLong("SELECT seq FROM fence_tombstones WHERE id = 'k'")).isEqualTo(2);
  }

  private String identity(String table) throws SQLException {
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery("SELECT relreplident FROM pg_class WHERE oid = '" + table + "'::regclass")) {
      r.next();
      return r.getString(1);
    }
  }

  @Test
  void applyingOutsideATransactionIsRefused() throws Exception {
    String migration = resource("sql/source/fence-versioning.sql");
    try (Statement s = connection.createStatement()) {
      // pgjdbc runs the statements of one execute in one implicit transaction, which is not a
      // transaction block: as psql without --single-transaction would, it fails at once.
      assertThatThrownBy(() -> s.execute(migration)).hasMessageContaining("LOCK TABLE can only be used in transaction blocks");
    }
  }

  /**
   * Random transactions of one to three multi-row statements against a model: seq, tombstones,
   * each bucket's count and checksum, and each bucket's version, which goes up by one per committed
   * transaction that changed a row of the bucket (per statement when the constraints are set
   * immediate). Statements rolled back to a savepoint, and rolled back transactions, change nothing.
   */
  @Test
  void randomTransactionsKeepSeqTombstonesFingerprintsAndVersionsExact() throws Exception {
    SplittableRandom random = new SplittableRandom(3);
    Model model = new Model();
    for (int step = 0; step < 300; step++) {
      Model before = model.copy();
      connection.setAutoCommit(false);
      boolean immediate = random.nextInt(5) == 0;
      if (immediate) {
        exec("SET CONSTRAINTS ALL IMMEDIATE");
      }
      Set<Integer> touched = new HashSet<>();
      int statements = 1 + random.nextInt(3);
      for (int i = 0; i < statements; i++) {
        boolean undone = random.nextInt(6) == 0;
        Model beforeStatement = model.copy();
        if (undone) {
          exec("SAVEPOINT s");
        }
        Set<Integer> changed = randomStatement(random, model);
        if (undone) {
          exec("ROLLBACK TO SAVEPOINT s");
          model.restore(beforeStatement);
        } else if (immediate) {
          changed.forEach(b -> model.versions.merge(b, 1L, Long::sum));
        } else {
          touched.addAll(changed);
        }
      }
      if (random.nextInt(8) == 0) {
        connection.rollback();
        model.restore(before);
      } else {
        connection.commit();
        touched.forEach(b -> model.versions.merge(b, 1L, Long::sum));
      }
      connection.setAutoCommit(true);
      assertAsModelled(model, "step " + step);
    }
    assertThat(model.live).hasSizeGreaterThan(20);
    assertThat(model.tombstones).hasSizeGreaterThan(20);
  }

  /**
   * A load and an update in one transaction: each bucket row is updated once, at the commit. (The
   * 55,555 notes, about 1.5 MB, are summed per bucket on the way, whenever they pass 512 kB.)
   */
  @Test
  void aTransactionUpdatesEachBucketRowOnceAsItCommits() throws Exception {
    connection.setAutoCommit(false);
    exec("INSERT INTO fences (id, geom) SELECT 'bulk-' || g, '" + WKB + "' FROM generate_series(1, 50000) g");
    exec("UPDATE fences SET name = 'renamed' WHERE id LIKE 'bulk-1%'");
    assertThat(queryLong("SELECT count(*) FROM fence_bucket_stats WHERE version <> 0"))
        .as("nothing folded before the commit").isZero();
    connection.commit();
    connection.setAutoCommit(true);
    // 50,000 fences fill every bucket, each bucket row went from version 0 to 1: one update.
    assertThat(queryLong("SELECT count(*) FROM fence_bucket_stats WHERE version = 1")).isEqualTo(4096);
    assertThat(stats()).containsExactly(queryLong("SELECT count(*) FROM fences"), queryLong("SELECT bit_xor(fence_hash(id, seq)) FROM fences"));
    assertBucketsEqualTheTable();
  }

  /** Thousands of statements in one transaction: the notes spill on the way, and stay exact. */
  @Test
  void aTransactionOfThousandsOfStatementsStaysExact() throws Exception {
    exec("INSERT INTO fences (id, geom) SELECT 'f-' || g, '" + WKB + "' FROM generate_series(1, 20000) g");
    Map<Integer, Long> before = versions();
    // Every UPDATE and DELETE in the loop is a statement of its own: 9,142 notes, about 240 KB of
    // them, in one transaction, spilled 4 kB at a time.
    exec("DO $$ BEGIN FOR i IN 1..8000 LOOP"
        + " UPDATE fences SET name = 'n' WHERE id = 'f-' || (1 + (i * 7919) % 20000);"
        + " IF i % 7 = 0 THEN DELETE FROM fences WHERE id = 'f-' || (1 + (i * 104729) % 20000); END IF;"
        + " END LOOP; END $$");
    assertBucketsEqualTheTable();
    Set<String> live = new HashSet<>();
    for (int g = 1; g <= 20000; g++) {
      live.add("f-" + g);
    }
    Set<Integer> touched = new HashSet<>();
    for (int i = 1; i <= 8000; i++) {
      String updated = "f-" + (1 + (i * 7919) % 20000);
      if (live.contains(updated)) {
        touched.add(FenceBuckets.of(updated));
      }
      String deleted = "f-" + (1 + (i * 104729) % 20000);
      if (i % 7 == 0 && live.remove(deleted)) {
        touched.add(FenceBuckets.of(deleted));
      }
    }
    Map<Integer, Long> after = versions();
    assertThat(after.keySet()).allSatisfy(b ->
        assertThat(after.get(b) - before.get(b)).as("bucket %d", b).isEqualTo(touched.contains(b) ? 1L : 0L));
  }

  /** Values an application left in the session's settings must not reach the fingerprints. */
  @Test
  void settingsLeftInTheSessionDoNotCount() throws Exception {
    // Notes as a transaction with id 1 (none has it) would hold them, and notes without an id.
    exec("SET fence_versioning.pending = '1 5:5:5 6:1:6'");
    exec("SET fence_versioning.spilled = '1 7:7:7'");
    exec("INSERT INTO fences (id, geom) VALUES ('a', '" + WKB + "'), ('b', '" + WKB + "')");
    exec("BEGIN; SET LOCAL fence_versioning.pending = '2:7:7'; SET LOCAL fence_versioning.spilled = '+ 2:7:7'; UPDATE fences SET name = 'x' WHERE id = 'a'; COMMIT");
    assertBucketsEqualTheTable();
    assertThat(stats()).containsExactly(2L, FenceChecksum.hash("a", 2) ^ FenceChecksum.hash("b", 1));
  }

  @Test
  void truncateAndIdChangesAreRefused() throws Exception {
    exec("INSERT INTO fences (id, geom) VALUES ('a', '" + WKB + "')");
    assertThatThrownBy(() -> exec("TRUNCATE fences")).hasMessageContaining("use DELETE FROM fences");
    assertThatThrownBy(() -> exec("UPDATE fences SET id = 'b' WHERE id = 'a'"))
        .hasMessageContaining("fence id a cannot change to b");
    assertThat(stats()).containsExactly(1L, FenceChecksum.hash("a", 1));
  }

  /**
   * A database with an earlier version of the migration, upgraded in place by applying this one:
   * the fingerprints and versions carry on, fence_stats is a view its readers can still read, the
   * publication holds no fence_stats table, no trigger or function of the old version is left, and
   * fence_bucket_stats is rewritten to keep room for its rows' updates.
   */
  @ParameterizedTest
  @ValueSource(strings = {FIRST_VERSION, SECOND_VERSION})
  void upgradesInPlaceFromAnEarlierVersion(String earlier) throws Exception {
    exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP PUBLICATION IF EXISTS geofence_publication");
    exec(resource("sql/source/fences-wkb.sql"));
    connection.setAutoCommit(false); // the second version refuses to run outside a transaction
    exec(resource(earlier));
    connection.commit();
    connection.setAutoCommit(true);
    exec("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'stats_reader') THEN CREATE ROLE stats_reader; END IF; END $$");
    exec("GRANT USAGE ON SCHEMA public TO stats_reader; GRANT SELECT ON fence_stats TO stats_reader");
    SplittableRandom random = new SplittableRandom(7);
    Model model = new Model();
    for (int step = 0; step < 40; step++) {
      randomStatement(random, model);
    }
    // The earlier versions bumped a version per statement or transaction: what they left is where
    // the versions carry on from.
    Map<Integer, Long> versions = versions();
    model.versions = new HashMap<>(versions);
    assertAsModelled(model, earlier);

    Migrations.applySource(connection, GeometryColumn.WKB);
    assertThat(versions()).as("the upgrade itself edits nothing").isEqualTo(versions);
    assertAsModelled(model, "upgraded");
    assertThat(queryLong("SELECT count(*) FROM pg_views WHERE viewname = 'fence_stats'")).isEqualTo(1);
    assertThat(queryLong("SELECT count(*) FROM information_schema.role_table_grants"
        + " WHERE grantee = 'stats_reader' AND table_name = 'fence_stats' AND privilege_type = 'SELECT'")).isEqualTo(1);
    assertThat(strings("SELECT tablename FROM pg_publication_tables WHERE pubname = 'geofence_publication'"))
        .containsExactlyInAnyOrder("fences", "fence_tombstones", "fence_bucket_stats", "fence_heartbeat");
    assertThat(strings("SELECT tgname || ' ' || tgfoid::regproc FROM pg_trigger WHERE tgrelid = 'fences'::regclass AND NOT tgisinternal"))
        .containsExactlyInAnyOrder("fences_version fences_version", "fences_inserted fence_versioning_fold",
            "fences_updated fence_versioning_fold", "fences_deleted fence_versioning_fold", "fences_no_truncate fences_no_truncate");
    assertThat(strings("SELECT proname FROM pg_proc WHERE proname IN"
        + " ('fences_inserted', 'fences_updated', 'fences_deleted', 'fences_note', 'fences_fold', 'fences_fold_at_commit')")).isEmpty();
    assertThat(strings("SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = 'fence_bucket_stats'::regclass"))
        .containsExactly("fillfactor=10");
    assertThat(queryLong("SELECT count(*) FROM pg_constraint WHERE conrelid = 'fence_bucket_stats'::regclass AND contype = 'c'")).isZero();

    for (int step = 0; step < 40; step++) {
      connection.setAutoCommit(false);
      Set<Integer> touched = new HashSet<>(randomStatement(random, model));
      touched.addAll(randomStatement(random, model));
      connection.commit();
      connection.setAutoCommit(true);
      touched.forEach(b -> model.versions.merge(b, 1L, Long::sum));
    }
    assertAsModelled(model, "edited after the upgrade");
  }

  // ---- the model ------------------------------------------------------------------------------

  /** What the tables must hold: live seqs, tombstones, and each bucket's version. */
  static final class Model {
    Map<String, Long> live = new HashMap<>();
    Map<String, Long> tombstones = new HashMap<>();
    Map<Integer, Long> versions = new HashMap<>();

    Model copy() {
      Model m = new Model();
      m.restore(this);
      return m;
    }

    void restore(Model other) {
      live = new HashMap<>(other.live);
      tombstones = new HashMap<>(other.tombstones);
      versions = new HashMap<>(other.versions);
    }
  }

  /** One random multi-row statement, applied to the model; returns the buckets of the rows it changed. */
  private Set<Integer> randomStatement(SplittableRandom random, Model model) throws SQLException {
    List<String> ids = pick(random, 1 + random.nextInt(30));
    Set<String> changed = new TreeSet<>();
    switch (random.nextInt(4)) {
      case 0: // insert the ones that are not live, re-creating deleted ones
        ids.removeIf(model.live::containsKey);
        if (!ids.isEmpty()) {
          exec("INSERT INTO fences (id, seq, geom) SELECT x, 999, '" + WKB + "' FROM unnest(?::text[]) x", ids);
          ids.forEach(id -> model.live.put(id, model.tombstones.getOrDefault(id, 0L) + 1));
          changed.addAll(ids);
        }
        break;
      case 1: // update live ones, with a client-written seq that must be ignored
        exec("UPDATE fences SET seq = 0, name = 'n' WHERE id = ANY(?::text[])", ids);
        ids.stream().filter(model.live::containsKey).forEach(id -> {
          model.live.merge(id, 1L, Long::sum);
          changed.add(id);
        });
        break;
      case 2:
        exec("DELETE FROM fences WHERE id = ANY(?::text[])", ids);
        ids.stream().filter(model.live::containsKey).forEach(id -> {
          model.tombstones.put(id, model.live.remove(id) + 1);
          changed.add(id);
        });
        break;
      default: // upsert: inserts some, updates others, in one statement
        exec("INSERT INTO fences (id, geom) SELECT x, '" + WKB + "' FROM unnest(?::text[]) x "
            + "ON CONFLICT (id) DO UPDATE SET name = 'upserted'", ids);
        for (String id : ids) {
          if (model.live.containsKey(id)) {
            model.live.merge(id, 1L, Long::sum);
          } else {
            model.live.put(id, model.tombstones.getOrDefault(id, 0L) + 1);
          }
          changed.add(id);
        }
    }
    Set<Integer> buckets = new HashSet<>();
    changed.forEach(id -> buckets.add(FenceBuckets.of(id)));
    return buckets;
  }

  private void assertAsModelled(Model model, String when) throws SQLException {
    assertThat(rows("SELECT id, seq FROM fences")).as(when).isEqualTo(model.live);
    assertThat(rows("SELECT id, seq FROM fence_tombstones")).as(when).isEqualTo(model.tombstones);
    FenceChecksum expected = new FenceChecksum();
    model.live.forEach(expected::add);
    assertThat(stats()).as(when).containsExactly(expected.count(), expected.checksum());
    Map<Integer, FenceChecksum> byBucket = new HashMap<>();
    model.live.forEach((id, seq) -> byBucket.computeIfAbsent(FenceBuckets.of(id), b -> new FenceChecksum()).add(id, seq));
    Map<Integer, List<Long>> expectedBuckets = new HashMap<>();
    byBucket.forEach((bucket, c) -> expectedBuckets.put(bucket, List.of(c.count(), c.checksum())));
    assertThat(bucketStats()).as(when).isEqualTo(expectedBuckets);
    Map<Integer, Long> expectedVersions = new HashMap<>();
    versions().keySet().forEach(b -> expectedVersions.put(b, model.versions.getOrDefault(b, 0L)));
    assertThat(versions()).as(when).isEqualTo(expectedVersions);
  }

  /** Each bucket's fingerprint against one recomputed from the table in Java. */
  private void assertBucketsEqualTheTable() throws SQLException {
    Map<Integer, FenceChecksum> byBucket = new HashMap<>();
    rows("SELECT id, seq FROM fences").forEach((id, seq) -> byBucket.computeIfAbsent(FenceBuckets.of(id), b -> new FenceChecksum()).add(id, seq));
    Map<Integer, List<Long>> expected = new HashMap<>();
    byBucket.forEach((bucket, c) -> expected.put(bucket, List.of(c.count(), c.checksum())));
    assertThat(bucketStats()).isEqualTo(expected);
  }

  // ---- SQL helpers ----------------------------------------------------------------------------

  private static List<String> pick(SplittableRandom random, int n) {
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String id = "fence-" + random.nextInt(150);
      if (!ids.contains(id)) {
        ids.add(id);
      }
    }
    return ids;
  }

  static String resource(String name) throws Exception {
    try (InputStream in = SourceMigrationTest.class.getClassLoader().getResourceAsStream(name)) {
      assertThat(in).as(name).isNotNull();
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private void exec(String sql, List<String> ids) throws SQLException {
    try (PreparedStatement s = connection.prepareStatement(sql)) {
      s.setArray(1, connection.createArrayOf("text", ids.toArray()));
      s.execute();
    }
  }

  private void exec(String sql) throws SQLException {
    try (Statement s = connection.createStatement()) {
      s.execute(sql);
    }
  }

  private long queryLong(String sql) throws SQLException {
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  private List<String> strings(String sql) throws SQLException {
    List<String> values = new ArrayList<>();
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      while (r.next()) {
        values.add(r.getString(1));
      }
    }
    return values;
  }

  private Map<String, Long> rows(String sql) throws SQLException {
    Map<String, Long> rows = new HashMap<>();
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      while (r.next()) {
        rows.put(r.getString(1), r.getLong(2));
      }
    }
    return rows;
  }

  private Map<Integer, Long> versions() throws SQLException {
    Map<Integer, Long> versions = new HashMap<>();
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery("SELECT bucket, version FROM fence_bucket_stats")) {
      while (r.next()) {
        versions.put(r.getInt(1), r.getLong(2));
      }
    }
    return versions;
  }

  /** The bucket fingerprints, leaving out buckets that have emptied (count and checksum 0). */
  private Map<Integer, List<Long>> bucketStats() throws SQLException {
    Map<Integer, List<Long>> rows = new HashMap<>();
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery("SELECT bucket, fence_count, checksum FROM fence_bucket_stats WHERE fence_count <> 0 OR checksum <> 0")) {
      while (r.next()) {
        rows.put(r.getInt(1), List.of(r.getLong(2), r.getLong(3)));
      }
    }
    return rows;
  }

  /** The whole table's count and checksum, from the fence_stats view (a table before the upgrade). */
  private List<Long> stats() throws SQLException {
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery("SELECT fence_count, checksum FROM fence_stats")) {
      assertThat(r.next()).isTrue();
      List<Long> values = List.of(r.getLong(1), r.getLong(2));
      assertThat(r.next()).as("exactly one stats row").isFalse();
      return values;
    }
  }
}
