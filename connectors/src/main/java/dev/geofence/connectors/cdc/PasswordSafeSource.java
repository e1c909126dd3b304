package dev.geofence.connectors.cdc;

import dev.geofence.connectors.WrappingSource;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flink CDC's Postgres source, with the one log line that prints the database password kept out
 * of the log. Flink CDC 3.5 logs its whole Debezium configuration, {@code database.password}
 * included, at INFO from {@link #CONFIG_LOGGER} each time a reader starts reading, and a cluster's
 * usual log configuration has everything at INFO. So once its enumerator or a reader is made,
 * in whichever JVM that is, that one logger is held at WARN if Log4j 2 is the logging backend (as
 * in Flink's distribution); with another backend the job warns, naming the logger to hold
 * (docs/deployment.md#logging). A log configuration reloaded later (Log4j's {@code
 * monitorInterval}) sets the logger back until the next reader starts, so deployment.md still
 * tells users to hold it there too.
 *
 * <p>Everything else is the wrapped source's ({@link WrappingSource}), so savepoints of the source
 * are the same as without the wrapper.
 */
final class PasswordSafeSource<T, S extends SourceSplit, E> extends WrappingSource<T, S, E> implements ResultTypeQueryable<T> {

  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(PasswordSafeSource.class);

  /** The logger that prints the Debezium configuration, password included, at INFO. */
  static final String CONFIG_LOGGER = "org.apache.flink.cdc.connectors.postgres.source.fetch.PostgresSourceFetchTaskContext";

  private final TypeInformation<T> producedType;

  <Q extends Source<T, S, E> & ResultTypeQueryable<T>> PasswordSafeSource(Q source) {
    super(source);
    this.producedType = source.getProducedType();
  }

  // Made, not yet started: Flink CDC makes the fetch task context that logs the configuration only
  // when the started reader reads a split. The enumerator holds it in the JobManager too.

  @Override
  protected SourceReader<T, S> wrap(SourceReader<T, S> reader) {
    quietConfigLogger();
    return reader;
  }

  @Override
  protected SplitEnumerator<S, E> wrap(SplitEnumerator<S, E> enumerator, SplitEnumeratorContext<S> context) {
    quietConfigLogger();
    return enumerator;
  }

  @Override
  public TypeInformation<T> getProducedType() {
    return producedType;
  }

  /** Holds {@link #CONFIG_LOGGER} at WARN if it would log at INFO; says so either way. */
  static void quietConfigLogger() {
    Logger config = LoggerFactory.getLogger(CONFIG_LOGGER);
    if (!config.isInfoEnabled()) {
      return;
    }
    try {
      Configurator.setLevel(CONFIG_LOGGER, Level.WARN);
    } catch (LinkageError | RuntimeException notLog4j) {
      // Another logging backend than Log4j 2 core (no core classes, or core on the class path
      // without being the backend: a ClassCastException): only its own configuration can hold it.
    }
    if (config.isInfoEnabled()) {
      LOG.warn("Flink CDC logs the fence database's password at INFO from {}, and this logging backend could not be told"
          + " otherwise: set that logger to WARN in the log configuration (docs/deployment.md#logging)", CONFIG_LOGGER);
    } else {
      LOG.info("Held {} at WARN: Flink CDC logs the fence database's password at INFO from it (docs/deployment.md#logging)",
          CONFIG_LOGGER);
    }
  }
}
