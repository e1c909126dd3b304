package dev.geofence.connectors;

import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A source that wraps another's readers and enumerators and keeps its splits, enumerator state and
 * their serializers, so that a savepoint of either restores into the other: the base of the fence
 * source that keeps the password out of the log and of the job's gated sources.
 */
public abstract class WrappingSource<T, S extends SourceSplit, E> implements Source<T, S, E> {

  private static final long serialVersionUID = 1L;

  protected final Source<T, S, E> source;

  protected WrappingSource(Source<T, S, E> source) {
    this.source = source;
  }

  /** The reader that wraps {@code reader}. */
  protected abstract SourceReader<T, S> wrap(SourceReader<T, S> reader);

  /** The enumerator that wraps {@code enumerator}. */
  protected abstract SplitEnumerator<S, E> wrap(SplitEnumerator<S, E> enumerator, SplitEnumeratorContext<S> context);

  @Override
  public Boundedness getBoundedness() {
    return source.getBoundedness();
  }

  @Override
  public SourceReader<T, S> createReader(SourceReaderContext context) throws Exception {
    return wrap(source.createReader(context));
  }

  @Override
  public SplitEnumerator<S, E> createEnumerator(SplitEnumeratorContext<S> context) throws Exception {
    return wrap(source.createEnumerator(context), context);
  }

  @Override
  public SplitEnumerator<S, E> restoreEnumerator(SplitEnumeratorContext<S> context, E checkpoint) throws Exception {
    return wrap(source.restoreEnumerator(context, checkpoint), context);
  }

  @Override
  public SimpleVersionedSerializer<S> getSplitSerializer() {
    return source.getSplitSerializer();
  }

  @Override
  public SimpleVersionedSerializer<E> getEnumeratorCheckpointSerializer() {
    return source.getEnumeratorCheckpointSerializer();
  }
}
