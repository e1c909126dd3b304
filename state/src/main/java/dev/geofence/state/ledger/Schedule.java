package dev.geofence.state.ledger;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.TreeMap;

/**
 * What waits for the clock, in the order it is due: edits and fingerprints committed after the
 * clock (under their keys, with their content), and the EXITs of deletes applied ahead of locations
 * older than them (under their fences' ids). The clock releases them by time, then by arrival
 * ({@link #peekEdit}, {@link #peekExit}). One structure, in memory and in the store: the keys whose
 * entries changed since the last {@link #checkpoint} are written then, so that an edit queued and
 * released between two checkpoints (the usual case, by a heartbeat interval) costs the state
 * backend nothing.
 *
 * <p>An entry of the time queue stands for one edit of its key; releasing a key takes every edit of
 * it up to a time at once ({@link #takeEdits}), so later entries of that key may find nothing left.
 * Not thread-safe.
 */
public final class Schedule {

  /** An entry of a time queue: a key's edit or EXIT committed at {@code time}, the {@code arrival}-th queued. */
  public record Entry(long time, long arrival, String key) {}

  /** A delete whose EXITs wait: when it was committed, and its seq. */
  public record Exit(long time, long seq) {}

  private static final Comparator<Entry> ORDER = Comparator.comparingLong(Entry::time).thenComparingLong(Entry::arrival);

  private final PriorityQueue<Entry> edits = new PriorityQueue<>(ORDER);
  private final PriorityQueue<Entry> exits = new PriorityQueue<>(ORDER);
  /** How many entries of {@link #edits} each key has. */
  private final Map<String, Integer> editEntries = new HashMap<>();
  private final Map<String, Integer> exitEntries = new HashMap<>();
  /** Each key's queued changes, in the order queued. */
  private final Map<String, ArrayDeque<Queued>> queued = new HashMap<>();
  /** Each fence's deletes whose EXITs wait: commit time to seq. */
  private final Map<String, TreeMap<Long, Long>> waiting = new HashMap<>();
  /** Keys whose queued changes or waiting EXITs changed since the last checkpoint. */
  private final Set<String> dirtyEdits = new LinkedHashSet<>();
  private final Set<String> dirtyExits = new LinkedHashSet<>();
  private long arrivals;

  /** Queues a change under its key. */
  public void queue(Queued change) {
    String key = change.key();
    add(change);
    dirtyEdits.add(key);
  }

  /** A change the store held queued: queued again, in the store's order, without rewriting it. */
  public void restore(Queued change) {
    add(change);
  }

  private void add(Queued change) {
    String key = change.key();
    queued.computeIfAbsent(key, k -> new ArrayDeque<>(2)).add(change);
    edits.add(new Entry(change.commitTime(), arrivals++, key));
    editEntries.merge(key, 1, Integer::sum);
  }

  /** Whether the key has an entry of the time queue (its changes may have been taken already). */
  public boolean hasEdits(String key) {
    return editEntries.containsKey(key);
  }

  /** The earliest edit entry, or null. */
  public Entry peekEdit() {
    return edits.peek();
  }

  /** Removes the earliest edit entry, which the caller then releases with {@link #takeEdits}. */
  public void pollEdit() {
    Entry entry = edits.poll();
    editEntries.computeIfPresent(entry.key(), (k, n) -> n == 1 ? null : n - 1);
  }

  /** Takes the key's queued changes committed at or before {@code upTo}, in the order queued. */
  public List<Queued> takeEdits(String key, long upTo) {
    ArrayDeque<Queued> mine = queued.get(key);
    if (mine == null) {
      return List.of();
    }
    List<Queued> due = new ArrayList<>(2);
    List<Queued> keep = new ArrayList<>(0);
    for (Queued change : mine) {
      (change.commitTime() <= upTo ? due : keep).add(change);
    }
    if (!due.isEmpty()) {
      if (keep.isEmpty()) {
        queued.remove(key);
      } else {
        mine.clear();
        mine.addAll(keep);
      }
      dirtyEdits.add(key);
    }
    return due;
  }

  /** A delete committed at {@code time} whose EXITs wait for the locations older than it. */
  public void queueExit(String fenceId, long time, long seq) {
    addExit(fenceId, time, seq);
    dirtyExits.add(fenceId);
  }

  /** A waiting EXIT the store held: queued again without rewriting it. */
  public void restoreExit(String fenceId, long time, long seq) {
    addExit(fenceId, time, seq);
  }

  private void addExit(String fenceId, long time, long seq) {
    waiting.computeIfAbsent(fenceId, k -> new TreeMap<>()).put(time, seq);
    exits.add(new Entry(time, arrivals++, fenceId));
    exitEntries.merge(fenceId, 1, Integer::sum);
  }

  /** Whether a delete of the fence waits to EXIT its members. */
  public boolean hasExit(String fenceId) {
    return exitEntries.containsKey(fenceId);
  }

  /** The earliest waiting EXIT's entry, or null. */
  public Entry peekExit() {
    return exits.peek();
  }

  /** Removes the earliest EXIT entry, once released ({@link #takeExit}). */
  public void pollExit() {
    Entry entry = exits.poll();
    exitEntries.computeIfPresent(entry.key(), (k, n) -> n == 1 ? null : n - 1);
  }

  /**
   * Takes the fence's oldest waiting EXIT, or null if none is left: two deletes of one fence at one
   * commit time (deleted, re-created and deleted in one transaction) wait as one, since no location
   * falls between them.
   */
  public Exit takeExit(String fenceId) {
    TreeMap<Long, Long> mine = waiting.get(fenceId);
    if (mine == null) {
      return null;
    }
    Map.Entry<Long, Long> oldest = mine.pollFirstEntry();
    if (mine.isEmpty()) {
      waiting.remove(fenceId);
    }
    dirtyExits.add(fenceId);
    return new Exit(oldest.getKey(), oldest.getValue());
  }

  /** How many edit entries wait: the metric of edits waiting for the clock. */
  public int edits() {
    return edits.size();
  }

  /** What the store keeps of the schedule, brought to it at a checkpoint. */
  public interface Store {
    /** The key's queued changes now, in order (none: the key has none left). */
    void queued(String key, List<Queued> changes) throws Exception;

    /** The fence's waiting EXITs now (none: it has none left). */
    void waitingExits(String fenceId, Map<Long, Long> exits) throws Exception;
  }

  /** Writes what changed since the last checkpoint to the store. */
  public void checkpoint(Store store) throws Exception {
    for (String key : dirtyEdits) {
      ArrayDeque<Queued> mine = queued.get(key);
      store.queued(key, mine == null ? List.of() : List.copyOf(mine));
    }
    for (String fenceId : dirtyExits) {
      TreeMap<Long, Long> mine = waiting.get(fenceId);
      store.waitingExits(fenceId, mine == null ? Map.of() : mine);
    }
    dirtyEdits.clear();
    dirtyExits.clear();
  }
}
