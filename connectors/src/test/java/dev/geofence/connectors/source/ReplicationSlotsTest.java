package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.readiness.GapCheck;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A second instance's slot on a real server: a copy streams from where its original had
 * confirmed, so every change after that reaches it, and the gap check holds for a savepoint
 * taken after the copy; a slot still read is never dropped.
 */
class ReplicationSlotsTest {

  @Test
  void aCopyHoldsEveryChangeAfterItsOriginalsConfirmedPositionAndAReadSlotIsNotDropped() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder()
            .setServerConfig("wal_level", "logical")
            .setServerConfig("max_replication_slots", "4")
            .setServerConfig("max_wal_senders", "4")
            // A slot streams what is flushed: the embedded server's default (off) returns from a
            // commit before its WAL is, and a peek right after it could miss it.
            .setServerConfig("synchronous_commit", "on")
            .start();
        Connection db = pg.getPostgresDatabase().getConnection();
        Statement s = db.createStatement()) {
      s.execute("CREATE TABLE t (x int)");
      s.execute("CREATE PUBLICATION p FOR TABLE t");
      assertThat(ReplicationSlots.createIfMissing(db, "blue")).isTrue();
      assertThat(ReplicationSlots.createIfMissing(db, "blue")).as("made once").isFalse();
      s.execute("INSERT INTO t VALUES (1)");
      s.execute("CHECKPOINT");
      s.execute("SELECT pg_replication_slot_advance('blue', pg_current_wal_lsn())");
      long blueConfirmed = SlotProbe.read(db, "blue").confirmedFlushLsn();

      // The running instance's slot copied, then a change: the copy has it, from the same place.
      ReplicationSlots.copy(db, "blue", "green");
      s.execute("INSERT INTO t VALUES (2)");
      assertThat(SlotProbe.read(db, "green").confirmedFlushLsn()).isEqualTo(blueConfirmed);
      assertThat(changes(s, "green")).as("the insert after the copy").containsExactly("I");
      // A savepoint taken after the copy is at or past the copy's position: covered.
      assertThat(GapCheck.check(SlotProbe.read(db, "green"), blueConfirmed).covered()).isTrue();

      assertThatThrownBy(() -> ReplicationSlots.copy(db, "blue", "green"))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("green exists already");
      assertThatThrownBy(() -> ReplicationSlots.copy(db, "gone", "other"))
          .isInstanceOf(IllegalStateException.class).hasMessage("cannot copy the replication slot gone into other: gone does not exist");

      // A slot an instance still reads stays; once its reader has gone, it is dropped.
      try (SlotReader reader = SlotReader.open(pg, "blue", "p")) {
        assertThatThrownBy(() -> ReplicationSlots.dropIfUnused(db, "blue"))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("blue is still read");
      }
      SlotReader.awaitUnread(s, "blue");
      assertThat(ReplicationSlots.dropIfUnused(db, "blue")).isTrue();
      assertThat(SlotProbe.read(db, "blue").exists()).isFalse();
      assertThat(ReplicationSlots.dropIfUnused(db, "blue")).as("already gone").isFalse();
      assertThat(SlotProbe.read(db, "green").exists()).isTrue();
    }
  }

  /** The kinds of the changes {@code slot} would stream now (pgoutput's message types: I, U, D), without consuming them. */
  private static List<String> changes(Statement s, String slot) throws Exception {
    List<String> kinds = new ArrayList<>();
    try (ResultSet r = s.executeQuery("SELECT chr(get_byte(data, 0)) FROM pg_logical_slot_peek_binary_changes('" + slot
        + "', NULL, NULL, 'proto_version', '1', 'publication_names', 'p') WHERE chr(get_byte(data, 0)) IN ('I', 'U', 'D')")) {
      while (r.next()) {
        kinds.add(r.getString(1));
      }
    }
    return kinds;
  }
}
