package dev.geofence.job.handover;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.connectors.source.SlotReader;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.CheckpointType;
import org.apache.flink.runtime.checkpoint.SavepointType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The slots of savepoints on a real server: a savepoint without a stop copies the slot, a checkpoint
 * and a stop do not, and what each was is recorded; a copy nobody reads is dropped after its
 * retention once it stayed unread for a while, one an instance reads is kept, and one handed over
 * is let go of; the replaced instance's slot is dropped only once this instance writes and that
 * slot stayed unread for a while.
 */
class SavepointSlotsTest {

  private static final Duration RETENTION = Duration.ofMinutes(10);
  private static final long UNREAD_TIMEOUT_MS = 60_000;
  private static EmbeddedPostgres pg;
  private static Connection db;
  private static Statement s;

  @BeforeAll
  static void server() throws Exception {
    pg = EmbeddedPostgres.builder()
        .setServerConfig("wal_level", "logical")
        .setServerConfig("max_replication_slots", "10")
        .setServerConfig("max_wal_senders", "4")
        // A slot advances to what is flushed: the embedded server's default (off) may not have flushed a commit yet.
        .setServerConfig("synchronous_commit", "on")
        .start();
    db = pg.getPostgresDatabase().getConnection();
    s = db.createStatement();
    s.execute("CREATE TABLE t (x int)");
    s.execute("CREATE PUBLICATION p FOR TABLE t");
  }

  @AfterAll
  static void stop() throws Exception {
    db.close();
    pg.close();
  }

  private static SavepointSlots slots(String slot, String configured, String replaces) {
    FenceSourceOptions source = FenceSourceOptions.builder().url(pg.getJdbcUrl("postgres", "postgres")).username("postgres")
        .slotName(slot).build();
    return new SavepointSlots(source, configured, RETENTION, Duration.ofMillis(UNREAD_TIMEOUT_MS), replaces);
  }

  @Test
  void aSavepointWithoutAStopCopiesTheSlotAndACheckpointOrAStopDoesNot() throws Exception {
    ReplicationSlots.createIfMissing(db, "a");
    SavepointSlots slots = slots("a", "a", null);

    assertThat(slots.snapshot(5, CheckpointType.CHECKPOINT, 0)).containsExactly("taken CHECKPOINT a");
    assertThat(slotsLike("a_%")).isEmpty();
    assertThat(slots.snapshot(6, SavepointType.savepoint(SavepointFormatType.CANONICAL), 1_000))
        .containsExactly("taken SAVEPOINT a", "copy a_6 1000");
    assertThat(slotsLike("a_%")).containsExactly("a_6");
    assertThat(SlotProbe.read(db, "a_6").confirmedFlushLsn()).as("where the running slot had confirmed")
        .isEqualTo(SlotProbe.read(db, "a").confirmedFlushLsn());
    assertThat(slots.snapshot(7, SavepointType.terminate(SavepointFormatType.CANONICAL), 2_000))
        .containsExactly("taken STOP a", "copy a_6 1000");
    assertThat(slots.snapshot(8, SavepointType.savepoint(SavepointFormatType.NATIVE), 3_000))
        .containsExactly("taken SAVEPOINT a", "copy a_6 1000", "copy a_8 3000");
    assertThat(slotsLike("a_%")).as("a stop copies nothing").containsExactly("a_6", "a_8");

    // Before its retention a copy stays; after it, unread for a while, it goes: the later one stays.
    long due = 1_000 + RETENTION.toMillis();
    slots.tidy(true, false, due - 1);
    assertThat(slotsLike("a_%")).containsExactly("a_6", "a_8");
    slots.tidy(true, false, due);
    slots.tidy(true, false, due + UNREAD_TIMEOUT_MS - 1);
    assertThat(slotsLike("a_%")).as("unread, but not for long yet").containsExactly("a_6", "a_8");
    slots.tidy(true, false, due + UNREAD_TIMEOUT_MS);
    assertThat(slotsLike("a_%")).containsExactly("a_8");
    assertThat(slots.snapshot(9, CheckpointType.CHECKPOINT, 0)).containsExactly("taken CHECKPOINT a", "copy a_8 3000");
    ReplicationSlots.dropIfUnused(db, "a");
    ReplicationSlots.dropIfUnused(db, "a_8");
  }

  @Test
  void aCopyAnInstanceReadsIsKeptAndOnceHandedOverItIsTheNextWritersOwn() throws Exception {
    ReplicationSlots.createIfMissing(db, "b");
    SavepointSlots blue = slots("b", "b", null);
    List<String> record = blue.snapshot(3, SavepointType.savepoint(SavepointFormatType.CANONICAL), 0);
    long due = RETENTION.toMillis();
    long grace = UNREAD_TIMEOUT_MS;
    // The instance restored from savepoint 3 reads its copy.
    try (SlotReader reader = SlotReader.open(pg, "b_3", "p")) {
      blue.tidy(true, false, due);
      blue.tidy(true, false, due + grace);
      assertThat(slotsLike("b_%")).as("read, so kept").containsExactly("b_3");
    }
    // It restarts: its slot is unread a moment, then read again, then unread a moment again.
    SlotReader.awaitUnread(s, "b_3");
    blue.tidy(true, false, due + 2 * grace);
    try (SlotReader reader = SlotReader.open(pg, "b_3", "p")) {
      blue.tidy(true, false, due + 3 * grace);
    }
    SlotReader.awaitUnread(s, "b_3");
    blue.tidy(true, false, due + 4 * grace);
    assertThat(slotsLike("b_%")).as("never unread for long").containsExactly("b_3");
    // Once it asked for the handover, the copy is its own: the old writer lets go of it.
    blue.tidy(false, true, due + 5 * grace);
    blue.tidy(true, false, due + 6 * grace);
    blue.tidy(true, false, due + 7 * grace);
    assertThat(slotsLike("b_%")).containsExactly("b_3");

    // The restored instance takes back the record, but its own slot is not a copy to expire.
    SavepointSlots green = slots("b_3", "b", "b");
    green.restore(record);
    assertThat(green.snapshot(4, CheckpointType.CHECKPOINT, 0)).containsExactly("taken CHECKPOINT b_3");
    // Another instance's copy in the record is: restored by a third instance, it expires there.
    SavepointSlots third = slots("b_9", "b", null);
    third.restore(record);
    third.tidy(true, false, due);
    third.tidy(true, false, due + UNREAD_TIMEOUT_MS);
    assertThat(slotsLike("b_%")).isEmpty();
    ReplicationSlots.dropIfUnused(db, "b");
  }

  @Test
  void theReplacedInstancesSlotIsDroppedOnlyOnceThisOneWritesAndThatOneStayedUnread() throws Exception {
    ReplicationSlots.createIfMissing(db, "c");
    ReplicationSlots.createIfMissing(db, "c_4");
    SavepointSlots green = slots("c_4", "c", "c");
    green.tidy(false, false, 0);
    green.tidy(false, false, 60_000);
    assertThat(SlotProbe.read(db, "c").exists()).as("not while it does not write").isTrue();

    try (SlotReader reader = SlotReader.open(pg, "c", "p")) {
      green.tidy(true, false, 100_000);
      green.tidy(true, false, 200_000);
      assertThat(SlotProbe.read(db, "c").exists()).as("not while the old instance reads it").isTrue();
    }
    SlotReader.awaitUnread(s, "c");
    green.tidy(true, false, 300_000);
    green.tidy(true, false, 300_000 + UNREAD_TIMEOUT_MS - 1);
    assertThat(SlotProbe.read(db, "c").exists()).as("unread, but not for long yet").isTrue();
    green.tidy(true, false, 300_000 + UNREAD_TIMEOUT_MS);
    assertThat(SlotProbe.read(db, "c").exists()).as("unread for long: its instance is gone").isFalse();
    assertThat(SlotProbe.read(db, "c_4").exists()).isTrue();
    ReplicationSlots.dropIfUnused(db, "c_4");
  }

  private static List<String> slotsLike(String pattern) throws Exception {
    List<String> names = new java.util.ArrayList<>();
    try (ResultSet r = s.executeQuery("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE '" + pattern
        + "' ORDER BY slot_name")) {
      while (r.next()) {
        names.add(r.getString(1));
      }
    }
    return names;
  }
}
