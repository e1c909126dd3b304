package dev.geofence.job.hold;

import dev.geofence.connectors.WrappingSource;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.InputStatus;

/**
 * A location source that pauses while the fence index's hold is full ({@link HoldGate}): its
 * readers stop polling the source they wrap, so that Kafka or the file source is read no further
 * (backpressure, nothing dropped), while checkpoints go on as usual: a paused reader still takes
 * part in every checkpoint, and the fence index keeps reading both its inputs, so barriers align.
 * Splits, enumerator state and their serializers are the wrapped source's own, so a savepoint of
 * either restores into the other.
 */
public final class GatedLocationSource<T, S extends SourceSplit, E> extends WrappingSource<T, S, E> {

  private static final long serialVersionUID = 1L;

  private final String token;

  /** @param token the one the fence index's coordinator of the same job has */
  public GatedLocationSource(Source<T, S, E> source, String token) {
    super(source);
    this.token = token;
  }

  @Override
  protected SourceReader<T, S> wrap(SourceReader<T, S> reader) {
    return new GatedReader<>(reader);
  }

  @Override
  protected SplitEnumerator<S, E> wrap(SplitEnumerator<S, E> enumerator, SplitEnumeratorContext<S> context) {
    return new GatedEnumerator<>(enumerator, context, token);
  }

  /** Pause or resume, from the enumerator to every reader. */
  record Gate(boolean paused) implements SourceEvent {
    private static final long serialVersionUID = 1L;
  }

  /** The wrapped enumerator, which also tells every reader the gate's state as it changes. */
  static final class GatedEnumerator<S extends SourceSplit, E> extends ForwardingEnumerator<S, E> {
    private final SplitEnumeratorContext<S> context;
    private final String token;
    private final Consumer<Boolean> listener;
    private boolean paused;

    GatedEnumerator(SplitEnumerator<S, E> enumerator, SplitEnumeratorContext<S> context, String token) {
      super(enumerator);
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
      super.start();
      HoldGate.of(token).listen(listener);
    }

    @Override
    public void addReader(int subtask) {
      super.addReader(subtask);
      if (paused) {
        context.sendEventToSourceReader(subtask, new Gate(true));
      }
    }

    @Override
    public void close() throws java.io.IOException {
      HoldGate.of(token).unlisten(listener);
      super.close();
    }
  }

  /** The wrapped reader, which polls nothing while paused. */
  static final class GatedReader<T, S extends SourceSplit> extends ForwardingReader<T, S> {
    /** Completed on resume; null while not paused. Touched by the task thread only. */
    private CompletableFuture<Void> resumed;

    GatedReader(SourceReader<T, S> reader) {
      super(reader);
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
  }
}
