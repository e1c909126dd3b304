package dev.geofence.connectors.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.source.Migrations;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import org.junit.jupiter.api.Test;

/**
 * The rules of the handover row on a real server, each an update whose WHERE clause keeps it: an
 * ask freezes the writer's lease, which it can then no longer extend; the next writer's lease grows
 * from T; the next writer becomes the writer only once every subtask of the old one is done; a
 * failover of the writer keeps a handover under way, a classic restore takes the outputs over; an
 * instance resuming a writer that ended takes its seat and nothing else.
 */
class HandoverTest {

  @Test
  void anAskFreezesTheLeaseAndTheNextWriterTakesOverOnlyOnceTheOldOneIsDone() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applyOutputs(db);
      assertThat(Handover.read(db, "geo")).isEmpty();
      assertThatThrownBy(() -> Handover.ask(db, "geo", "blue", "green")).isInstanceOf(IllegalStateException.class)
          .hasMessage("cannot hand the outputs over to green: no instance of geo keeps a handover row"
              + " (is geofence.handover.enabled set?)");

      Handover.Row claimed = Handover.claim(db, "geo", "blue", 2);
      assertThat(claimed.writer()).isEqualTo("blue");
      assertThat(claimed.writesUntil()).isEqualTo(Handover.NONE);
      // A standby registers, and its subtasks say when their index is ready.
      Handover.registerStandby(db, "geo", "green", 3);
      assertThatThrownBy(() -> Handover.ask(db, "geo", "blue", "green")).hasMessageContaining("has no clock yet");
      Handover.standbyReady(db, "geo", "green", 0);
      Handover.standbyReady(db, "geo", "green", 1);
      Handover.standbyReady(db, "geo", "green", 1);
      assertThat(Handover.read(db, "geo").orElseThrow().standbyReady()).as("two of three, one said twice").isFalse();
      Handover.standbyReady(db, "geo", "green", 2);
      assertThat(Handover.read(db, "geo").orElseThrow()).extracting(Handover.Row::standby, Handover.Row::standbyReady)
          .containsExactly("green", true);
      assertThat(Handover.extend(db, "geo", "blue", 10_000)).isEqualTo(10_000);
      assertThat(Handover.extend(db, "geo", "blue", 5_000)).as("a lease never shrinks").isEqualTo(10_000);
      assertThat(Handover.extend(db, "geo", "green", 50_000)).as("only the writer extends it").isEqualTo(Handover.NONE);
      assertThatThrownBy(() -> Handover.ask(db, "geo", "red", "green"))
          .hasMessage("cannot hand the outputs over to green: the outputs of geo are written by blue, not red");
      assertThatThrownBy(() -> Handover.ask(db, "geo", "blue", "red"))
          .hasMessage("cannot hand the outputs over to red: red is not the registered standby");
      // A withdrawn standby can no longer ask; registered again, it can.
      assertThat(Handover.withdrawStandby(db, "geo", "green")).isTrue();
      assertThatThrownBy(() -> Handover.ask(db, "geo", "blue", "green")).hasMessageContaining("not the registered standby");
      Handover.registerStandby(db, "geo", "green", 3);

      assertThat(Handover.ask(db, "geo", "blue", "green")).as("T is the frozen lease").isEqualTo(10_000);
      assertThat(Handover.read(db, "geo").orElseThrow().standby()).as("the ask ends the standby's wait").isNull();
      assertThat(Handover.extend(db, "geo", "blue", 20_000)).as("the old writer's lease is frozen").isEqualTo(Handover.NONE);
      assertThat(Handover.extend(db, "geo", "green", 30_000)).as("the next writer's grows from T").isEqualTo(30_000);
      assertThatThrownBy(() -> Handover.ask(db, "geo", "blue", "red")).hasMessageContaining("a handover to green is under way");
      assertThat(Handover.withdrawStandby(db, "geo", "green")).as("it asked: too late to withdraw").isFalse();
      // A failover of the old writer claims again: the handover under way stays.
      assertThat(Handover.claim(db, "geo", "blue", 2).nextWriter()).isEqualTo("green");

      Handover.markDone(db, "geo", "blue", 0);
      Handover.markDone(db, "geo", "blue", 0);
      assertThat(Handover.read(db, "geo").orElseThrow().writerDone()).as("one of two subtasks, said twice").isFalse();
      assertThat(Handover.takeOver(db, "geo", "green", 3)).isFalse();
      Handover.markDone(db, "geo", "blue", 1);
      assertThat(Handover.read(db, "geo").orElseThrow().writerDone()).isTrue();
      assertThat(Handover.takeOver(db, "geo", "green", 3)).isTrue();
      Handover.Row taken = Handover.read(db, "geo").orElseThrow();
      assertThat(taken).extracting(Handover.Row::writer, Handover.Row::writerParallelism, Handover.Row::writerSince,
          Handover.Row::writesUntil, Handover.Row::nextWriter, Handover.Row::handoverAt, Handover.Row::subtasksDone,
          Handover.Row::standby).containsExactly("green", 3, 10_000L, 30_000L, null, Handover.NONE, 0, null);
      assertThat(Handover.takeOver(db, "geo", "green", 3)).as("said again by another subtask").isTrue();
      Thread.sleep(50);
      assertThat(Handover.read(db, "geo").orElseThrow().writerSilentMillis()).isPositive();
      Handover.seen(db, "geo", "green");
      assertThat(Handover.read(db, "geo").orElseThrow().writerSilentMillis()).isLessThan(50);

      // A classic restore (a new instance, not a standby) takes the outputs over at once.
      assertThat(Handover.claim(db, "geo", "purple", 1)).extracting(Handover.Row::writer, Handover.Row::writerSince,
          Handover.Row::writesUntil, Handover.Row::nextWriter).containsExactly("purple", Handover.NONE, 30_000L, null);
    }
  }

  @Test
  void aResumedWriterTakesTheEndedOnesSeatWithTheHandoverUnderWay() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applyOutputs(db);
      assertThatThrownBy(() -> Handover.resume(db, "geo", "blue", "blue2", 2)).isInstanceOf(IllegalStateException.class)
          .hasMessage("no instance of geo keeps a row in geofence_handover, so blue2 has no writer to resume");
      Handover.claim(db, "geo", "blue", 2);
      Handover.extend(db, "geo", "blue", 10_000);
      Handover.registerStandby(db, "geo", "green", 1);
      Handover.ask(db, "geo", "blue", "green");
      Handover.markDone(db, "geo", "blue", 0);

      // blue ended with one of its two subtasks done; blue2, restored from its last checkpoint, sits in its seat.
      Handover.Row resumed = Handover.resume(db, "geo", "blue", "blue2", 3);
      assertThat(resumed).extracting(Handover.Row::writer, Handover.Row::writerParallelism, Handover.Row::nextWriter,
          Handover.Row::handoverAt, Handover.Row::subtasksDone).containsExactly("blue2", 3, "green", 10_000L, 0);
      assertThat(Handover.extend(db, "geo", "blue2", 20_000)).as("T stays frozen").isEqualTo(Handover.NONE);
      // A failover of blue2 resumes again: what its subtasks said stays.
      Handover.markDone(db, "geo", "blue2", 2);
      assertThat(Handover.resume(db, "geo", "blue", "blue2", 3).subtasksDone()).isEqualTo(1);
      assertThat(Handover.resume(db, "geo", "blue", "red", 1).writer()).as("only blue's seat, and blue2 has it").isEqualTo("blue2");
      Handover.markDone(db, "geo", "blue2", 0);
      Handover.markDone(db, "geo", "blue2", 1);
      assertThat(Handover.takeOver(db, "geo", "green", 1)).isTrue();
      assertThat(Handover.resume(db, "geo", "blue2", "blue3", 3).writer()).as("once taken over, nothing to resume").isEqualTo("green");

      // green ends before any ask: purple resumes it as the writer, and the standby asks purple.
      Handover.registerStandby(db, "geo", "red", 1);
      Handover.extend(db, "geo", "green", 40_000);
      assertThat(Handover.resume(db, "geo", "green", "purple", 1)).extracting(Handover.Row::writer, Handover.Row::nextWriter,
          Handover.Row::standby, Handover.Row::writerSince).containsExactly("purple", null, "red", 10_000L);
      assertThat(Handover.extend(db, "geo", "purple", 45_000)).as("its lease goes on from green's").isEqualTo(45_000);
      assertThat(Handover.ask(db, "geo", "purple", "red")).isEqualTo(45_000);
    }
  }
}
