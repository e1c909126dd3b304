package dev.geofence.job.hold;

import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.core.io.InputStatus;

/**
 * A source reader that does what the one it wraps does: the base of the gated sources' readers,
 * which hold back what their gate says to, as {@link ForwardingEnumerator} is of their enumerators.
 */
abstract class ForwardingReader<T, S extends SourceSplit> implements SourceReader<T, S> {

  protected final SourceReader<T, S> reader;

  ForwardingReader(SourceReader<T, S> reader) {
    this.reader = reader;
  }

  @Override
  public void start() {
    reader.start();
  }

  @Override
  public InputStatus pollNext(ReaderOutput<T> output) throws Exception {
    return reader.pollNext(output);
  }

  @Override
  public CompletableFuture<Void> isAvailable() {
    return reader.isAvailable();
  }

  @Override
  public void handleSourceEvents(SourceEvent event) {
    reader.handleSourceEvents(event);
  }

  @Override
  public List<S> snapshotState(long checkpointId) {
    return reader.snapshotState(checkpointId);
  }

  @Override
  public void addSplits(List<S> splits) {
    reader.addSplits(splits);
  }

  @Override
  public void notifyNoMoreSplits() {
    reader.notifyNoMoreSplits();
  }

  @Override
  public void notifyCheckpointComplete(long checkpointId) throws Exception {
    reader.notifyCheckpointComplete(checkpointId);
  }

  @Override
  public void notifyCheckpointAborted(long checkpointId) throws Exception {
    reader.notifyCheckpointAborted(checkpointId);
  }

  @Override
  public void pauseOrResumeSplits(Collection<String> pause, Collection<String> resume) {
    reader.pauseOrResumeSplits(pause, resume);
  }

  @Override
  public void close() throws Exception {
    reader.close();
  }
}
