package dev.geofence.job.hold;

import java.util.List;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;

/**
 * A split enumerator that does what the one it wraps does: the base of the gated sources'
 * enumerators, which add telling their readers what a gate says.
 */
abstract class ForwardingEnumerator<S extends SourceSplit, E> implements SplitEnumerator<S, E> {

  protected final SplitEnumerator<S, E> enumerator;

  ForwardingEnumerator(SplitEnumerator<S, E> enumerator) {
    this.enumerator = enumerator;
  }

  @Override
  public void start() {
    enumerator.start();
  }

  @Override
  public void handleSplitRequest(int subtask, String host) {
    enumerator.handleSplitRequest(subtask, host);
  }

  @Override
  public void addSplitsBack(List<S> splits, int subtask) {
    enumerator.addSplitsBack(splits, subtask);
  }

  @Override
  public void addReader(int subtask) {
    enumerator.addReader(subtask);
  }

  @Override
  public E snapshotState(long checkpointId) throws Exception {
    return enumerator.snapshotState(checkpointId);
  }

  @Override
  public void notifyCheckpointComplete(long checkpointId) throws Exception {
    enumerator.notifyCheckpointComplete(checkpointId);
  }

  @Override
  public void notifyCheckpointAborted(long checkpointId) throws Exception {
    enumerator.notifyCheckpointAborted(checkpointId);
  }

  @Override
  public void handleSourceEvent(int subtask, SourceEvent event) {
    enumerator.handleSourceEvent(subtask, event);
  }

  @Override
  public void close() throws java.io.IOException {
    enumerator.close();
  }
}
