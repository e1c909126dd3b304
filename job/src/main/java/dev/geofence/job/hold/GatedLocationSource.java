package dev.geofence.job.hold;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A location source that pauses while the fence index's hold is full ({@link HoldGate}): its
 * readers stop polling the source they wrap, so that Kafka or the file source is read no further
 * (backpressure, nothing dropped), while checkpoints go on as usual: a paused reader still takes
 * part in every checkpoint, and the fence index keeps reading both its inputs, so barriers align.
 * Splits, enumerator state and their serializers are the wrapped source's own, so a savepoint of
 * either restores into the other.
 */
public final class GatedLocationSource<T, S extends SourceSplit, E> implements Source<T, S, E> {

  private static final long serialVersionUID = 1L;

  private final Source<T, S, E> source;
  private final String token;

  /** @param token the one the fence index's coordinator of the same job has */
  public GatedLocationSource(Source<T, S, E> source, String token) {
    this.source = source;
    this.token = token;
  }

  @Override
  public Boundedness getBoundedness() {
    return source.getBoundedness();
  }

  @Override
  public SourceReader<T, S> createReader(SourceReaderContext context) throws Exception {
    return new GatedReader<>(source.createReader(context));
  }

  @Override
  public SplitEnumerator<S, E> createEnumerator(SplitEnumeratorContext<S> context) throws Exception {
    return new GatedEnumerator<>(source.createEnumerator(context), context, token);
  }

  @Override
  public SplitEnumerator<S, E> restoreEnumerator(SplitEnumeratorContext<S> context, E checkpoint) throws Exception {
    return new GatedEnumerator<>(source.restoreEnumerator(context, checkpoint), context, token);
  }

  @Override
  public SimpleVersionedSerializer<S> getSplitSerializer() {
    return source.getSplitSerializer();
  }

  @Override
  public SimpleVersionedSerializer<E> getEnumeratorCheckpointSerializer() {
    return source.getEnumeratorCheckpointSerializer();
  }

  /** Pause or resume, from the enumerator to every reader. */
  record Gate(boolean paused) implements SourceEvent {
    private static final long serialVersionUID = 1L;
  }

  /** The wrapped enumerator, which also tells every reader the gate's state as it changes. */
  static final class GatedEnumerator<S extends SourceSplit, E> implements SplitEnumerator<S, E> {
    private final SplitEnumerator<S, E> enumerator;
    private final SplitEnumeratorContext<S> context;
    private final String token;
    private final Consumer<Boolean> listener;
    private boolean paused;

    GatedEnumerator(SplitEnumerator<S, E> enumerator, SplitEnumeratorContext<S> context, String token) {
      this.enumerator = enumerator;
      this.context = context;
      this.token = token;
      // The gate changes on the fence index coordinator's thread; readers are told from this one's.
      this.listener = pause -> context.runInCoordinatorThread(() -> tell(pause));
    }

    private void tell(boolean pause) {
      paused = pause;
      context.registeredReaders().keySet().forEach(reader -> context.sendEventToSourceReader(reader, new Gate(pause)));
    }

    @Override
    public void start() {
      enumerator.start();
      HoldGate.of(token).listen(listener);
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
      if (paused) {
        context.sendEventToSourceReader(subtask, new Gate(true));
      }
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
      HoldGate.of(token).unlisten(listener);
      enumerator.close();
    }
  }

  /** The wrapped reader, which polls nothing while paused. */
  static final class GatedReader<T, S extends SourceSplit> implements SourceReader<T, S> {
    private final SourceReader<T, S> reader;
    /** Completed on resume; null while not paused. Touched by the task thread only. */
    private CompletableFuture<Void> resumed;

    GatedReader(SourceReader<T, S> reader) {
      this.reader = reader;
    }

    @Override
    public void start() {
      reader.start();
    }

    @Override
    public InputStatus pollNext(ReaderOutput<T> output) throws Exception {
      return resumed != null ? InputStatus.NOTHING_AVAILABLE : reader.pollNext(output);
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
      return resumed != null ? resumed : reader.isAvailable();
    }

    @Override
    public void handleSourceEvents(SourceEvent event) {
      if (event instanceof Gate gate) {
        if (gate.paused() && resumed == null) {
          resumed = new CompletableFuture<>();
        } else if (!gate.paused() && resumed != null) {
          CompletableFuture<Void> waiting = resumed;
          resumed = null;
          waiting.complete(null);
        }
      } else {
        reader.handleSourceEvents(event);
      }
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
    public void pauseOrResumeSplits(java.util.Collection<String> pause, java.util.Collection<String> resume) {
      reader.pauseOrResumeSplits(pause, resume);
    }

    @Override
    public void close() throws Exception {
      reader.close();
    }
  }
}
