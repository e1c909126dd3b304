package dev.geofence.job.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.Filter;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.ConfigurationSource;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.config.properties.PropertiesConfigurationFactory;
import org.apache.logging.log4j.core.impl.Log4jLogEvent;
import org.apache.logging.log4j.message.ParameterizedMessage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The log configurations the project ships (the jar's, under {@code java -jar}; the Flink
 * containers' of docker compose) keep out Flink 1.20's warning of a sink committer's
 * pendingCommittables gauge, which it logs once per committer and checkpoint (FLINK-35321), and
 * let every other name collision through.
 */
class LogConfigurationTest {

  private static final String COLLISION = "Name collision: Group already contains a Metric with the name '{}'. Metric will not be reported.{}";

  @TempDir Path dir;

  @Test
  void theCommittersNameCollisionIsDeniedAndNoOtherWarning() throws Exception {
    // The containers' configuration writes Flink's log file where Flink says: here, a temporary one.
    System.setProperty("log.file", dir.resolve("flink.log").toString());
    try (InputStream jar = LogConfigurationTest.class.getResourceAsStream("/geofence-log4j2.properties");
        InputStream containers = Files.newInputStream(Path.of("../docker/flink/log4j-console.properties"))) {
      for (Configuration config : new Configuration[] {load(jar), load(containers)}) {
        assertThat(decide(config, "pendingCommittables")).as("%s", config.getName()).isEqualTo(Filter.Result.DENY);
        assertThat(decide(config, "fences_loaded")).as("%s", config.getName()).isEqualTo(Filter.Result.NEUTRAL);
        config.stop();
      }
    } finally {
      System.clearProperty("log.file");
    }
  }

  private static Configuration load(InputStream in) throws Exception {
    Configuration config = new PropertiesConfigurationFactory()
        .getConfiguration(new LoggerContext("test"), new ConfigurationSource(in));
    config.initialize();
    return config;
  }

  /** What the configuration's filter of Flink's MetricGroup logger decides for a collision of {@code metric}. */
  private static Filter.Result decide(Configuration config, String metric) {
    LoggerConfig logger = config.getLoggerConfig("org.apache.flink.metrics.MetricGroup");
    assertThat(logger.getName()).as("a logger of its own").isEqualTo("org.apache.flink.metrics.MetricGroup");
    assertThat(logger.getFilter()).as("its filter").isNotNull();
    return logger.getFilter().filter(Log4jLogEvent.newBuilder().setLoggerName(logger.getName()).setLevel(Level.WARN)
        .setMessage(new ParameterizedMessage(COLLISION, metric, "[, taskmanager, geofence, geofence_triggers: Committer, 0]"))
        .build());
  }
}
