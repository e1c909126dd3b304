package dev.geofence.job.hold;

import dev.geofence.connectors.WrappingSource;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.InputStatus;

/**
 * The fence source, held until the fence index's coordinator lets the change stream start ({@link
 * StreamStart}): its readers keep the splits they are given (restored, or assigned) and start the
 * source they wrap only then, so that the CDC reader does not take the replication slot before it
 * may have been moved. Pausing the polling would not do: the CDC reader streams from the slot as
 * soon as it has a split. A held reader takes part in checkpoints with the splits it keeps. Splits,
 * enumerator state and their serializers are the wrapped source's own, so a savepoint of either
 * restores into the other.
 */
public final class GatedFenceSource<T, S extends SourceSplit, E> extends WrappingSource<T, S, E> {

  private static final long serialVersionUID = 1L;

  private final String token;

  /** @param token the one the fence index's coordinator of the same job has */
  public GatedFenceSource(Source<T, S, E> source, String token) {
    super(source);
    this.token = token;
  }

  @Override
  protected SourceReader<T, S> wrap(SourceReader<T, S> reader) {
    return new HeldReader<>(reader);
  }

  @Override
  protected SplitEnumerator<S, E> wrap(SplitEnumerator<S, E> enumerator, SplitEnumeratorContext<S> context) {
    return new Enumerator<>(enumerator, context, token);
  }

  /** The stream may start: from the enumerator to every reader. */
  record Open() implements SourceEvent {
    private static final long serialVersionUID = 1L;
  }

  /** The wrapped enumerator, which tells every reader when the gate opens, and any that registers after. */
  static final class Enumerator<S extends SourceSplit, E> extends ForwardingEnumerator<S, E> {
    private final SplitEnumeratorContext<S> context;
    private final String token;
    /** The gate opens on the fence index coordinator's thread; readers are told from this one's. */
    private final Runnable opened;
    private boolean open;

    Enumerator(SplitEnumerator<S, E> enumerator, SplitEnumeratorContext<S> context, String token) {
      super(enumerator);
      this.context = context;
      this.token = token;
      this.opened = () -> context.runInCoordinatorThread(this::openReaders);
    }

    private void openReaders() {
      open = true;
      context.registeredReaders().keySet().forEach(reader -> context.sendEventToSourceReader(reader, new Open()));
    }

    @Override
    public void start() {
      super.start();
      StreamGate.of(token).whenOpen(opened);
    }

    @Override
    public void addReader(int subtask) {
      super.addReader(subtask);
      if (open) {
        context.sendEventToSourceReader(subtask, new Open());
      }
    }

    @Override
    public void close() throws java.io.IOException {
      StreamGate.of(token).forget(opened);
      super.close();
    }
  }

  /** The wrapped reader, which keeps its splits and does not start until the gate opens. */
  static final class HeldReader<T, S extends SourceSplit> extends ForwardingReader<T, S> {
    /** Splits given while held, in order; null once open. Touched by the task thread only. */
    private List<S> held = new ArrayList<>();
    private boolean startAsked;
    private boolean noMoreSplits;
    private final CompletableFuture<Void> opened = new CompletableFuture<>();

    HeldReader(SourceReader<T, S> reader) {
      super(reader);
    }

    @Override
    public void start() {
      if (held == null) {
        reader.start();
      } else {
        startAsked = true;
      }
    }

    @Override
    public InputStatus pollNext(ReaderOutput<T> output) throws Exception {
      return held != null ? InputStatus.NOTHING_AVAILABLE : reader.pollNext(output);
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
      return held != null ? opened : reader.isAvailable();
    }

    @Override
    public void handleSourceEvents(SourceEvent event) {
      if (!(event instanceof Open)) {
        reader.handleSourceEvents(event);
      } else if (held != null) {
        // As Flink would have: the splits first, then the start, then the end of splits.
        List<S> splits = held;
        held = null;
        if (!splits.isEmpty()) {
          reader.addSplits(splits);
        }
        if (startAsked) {
          reader.start();
        }
        if (noMoreSplits) {
          reader.notifyNoMoreSplits();
        }
        opened.complete(null);
      }
    }

    @Override
    public List<S> snapshotState(long checkpointId) {
      return held != null ? List.copyOf(held) : reader.snapshotState(checkpointId);
    }

    @Override
    public void addSplits(List<S> splits) {
      if (held != null) {
        held.addAll(splits);
      } else {
        reader.addSplits(splits);
      }
    }

    @Override
    public void notifyNoMoreSplits() {
      if (held != null) {
        noMoreSplits = true;
      } else {
        reader.notifyNoMoreSplits();
      }
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
      // Held, it has read nothing whose position could be confirmed.
      if (held == null) {
        reader.notifyCheckpointComplete(checkpointId);
      }
    }

    @Override
    public void notifyCheckpointAborted(long checkpointId) throws Exception {
      if (held == null) {
        reader.notifyCheckpointAborted(checkpointId);
      }
    }

  }
}
