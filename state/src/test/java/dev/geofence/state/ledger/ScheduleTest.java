package dev.geofence.state.ledger;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ScheduleTest {

  @Test
  void aFencesQueuedEditsAreTakenUpToATimeAndTheLaterOnesStayQueued() {
    Schedule schedule = queued(edit("a", 1, 100), edit("a", 2, 200), edit("a", 3, 300), edit("b", 1, 150));

    assertThat(schedule.takeEdits("a", 200)).extracting(q -> q.edit().seq()).containsExactly(1L, 2L);
    assertThat(schedule.takeEdits("a", 250)).isEmpty();
    assertThat(schedule.takeEdits("a", 300)).extracting(q -> q.edit().seq()).containsExactly(3L);
    assertThat(schedule.takeEdits("a", Long.MAX_VALUE)).isEmpty();
    assertThat(schedule.takeEdits("b", Long.MAX_VALUE)).as("another fence's queue").extracting(q -> q.edit().seq()).containsExactly(1L);
  }

  @Test
  void theOldestWaitingDeleteIsTakenFirst() {
    Schedule schedule = new Schedule();
    schedule.queueExit("a", 500, 4);
    schedule.queueExit("a", 200, 2);
    assertThat(schedule.takeExit("a")).isEqualTo(new Schedule.Exit(200, 2));
    assertThat(schedule.takeExit("a")).isEqualTo(new Schedule.Exit(500, 4));
  }

  /** Entries come out by time, then by arrival; a key counts as having edits until its last entry is polled. */
  @Test
  void entriesAreDueByTimeThenArrival() {
    Schedule schedule = queued(edit("a", 1, 300), edit("b", 1, 100), edit("c", 1, 100));
    List<String> order = new ArrayList<>();
    while (schedule.peekEdit() != null) {
      order.add(schedule.peekEdit().key());
      assertThat(schedule.hasEdits(schedule.peekEdit().key())).isTrue();
      schedule.pollEdit();
    }
    assertThat(order).containsExactly("b", "c", "a");
    assertThat(schedule.hasEdits("a")).isFalse();
    assertThat(schedule.edits()).isZero();
  }

  /**
   * A checkpoint writes the keys whose queued changes or waiting EXITs changed since the last one,
   * as they are now (none left: an empty list); what a restore put back is not written again.
   */
  @Test
  void aCheckpointWritesWhatChangedSinceTheLastOne() throws Exception {
    Schedule schedule = new Schedule();
    Recorded store = new Recorded();
    schedule.restore(edit("r", 1, 50));
    schedule.queue(edit("a", 1, 100));
    schedule.queue(edit("a", 2, 200));
    schedule.queueExit("d", 300, 5);
    schedule.checkpoint(store);
    assertThat(store.queued).containsOnlyKeys("a");
    assertThat(store.queued.get("a")).extracting(q -> q.edit().seq()).containsExactly(1L, 2L);
    assertThat(store.exits).isEqualTo(Map.of("d", Map.of(300L, 5L)));

    store.queued.clear();
    store.exits.clear();
    schedule.checkpoint(store);
    assertThat(store.queued).as("nothing changed").isEmpty();

    schedule.takeEdits("a", 150);
    schedule.takeExit("d");
    schedule.checkpoint(store);
    assertThat(store.queued.get("a")).extracting(q -> q.edit().seq()).containsExactly(2L);
    assertThat(store.exits).isEqualTo(Map.of("d", Map.of()));
  }

  /** A schedule with {@code changes} queued, in this order. */
  private static Schedule queued(Queued... changes) {
    Schedule schedule = new Schedule();
    for (Queued change : changes) {
      schedule.queue(change);
    }
    return schedule;
  }

  private static Queued edit(String id, long seq, long commitTime) {
    return Queued.of(FenceEdit.delete(id, seq, EditOrigin.STREAM, 0, commitTime));
  }

  private static final class Recorded implements Schedule.Store {
    final Map<String, List<Queued>> queued = new HashMap<>();
    final Map<String, Map<Long, Long>> exits = new HashMap<>();

    @Override
    public void queued(String key, List<Queued> changes) {
      queued.put(key, changes);
    }

    @Override
    public void waitingExits(String fenceId, Map<Long, Long> waiting) {
      exits.put(fenceId, Map.copyOf(waiting));
    }
  }
}
