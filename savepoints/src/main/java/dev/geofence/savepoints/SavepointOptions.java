package dev.geofence.savepoints;

import static org.apache.flink.configuration.ConfigOptions.key;

import dev.geofence.connectors.config.GeofenceOptions;
import org.apache.flink.configuration.ConfigOption;

/**
 * The options only the savepoint tools take, as Flink {@link ConfigOption}s; those they share with
 * the job (the fence database, its table and columns, the slot, the geometry format, the max
 * parallelism) are {@link GeofenceOptions}.
 */
final class SavepointOptions {

  static final ConfigOption<Integer> INSPECT_PARALLELISM = key("geofence.inspect.parallelism").intType().noDefaultValue()
      .withDescription("Count the fences per subtask at this parallelism.");

  static final ConfigOption<Boolean> INSPECT_JSON = key("geofence.inspect.json").booleanType().defaultValue(false)
      .withDescription("Print JSON, for scripts, with the fences per key group too.");

  static final ConfigOption<Integer> VERIFY_LIMIT = key("geofence.verify.limit").intType().defaultValue(50)
      .withDescription("List at most this many differences.");

  static final ConfigOption<String> BOOTSTRAP_OUTPUT = key("geofence.bootstrap.output").stringType().noDefaultValue()
      .withDescription("The directory to write the savepoint to.");

  static final ConfigOption<String> BOOTSTRAP_FROM_ARROW = key("geofence.bootstrap.from-arrow").stringType().noDefaultValue()
      .withDescription("Write the savepoint from this snapshot file (export --to-arrow) instead of the database.");

  static final ConfigOption<String> EXPORT_TO_ARROW = key("geofence.export.to-arrow").stringType().noDefaultValue()
      .withDescription("The Arrow IPC file to write.");

  static final ConfigOption<String> IN_USE_JOB_ID = key("geofence.in-use.job-id").stringType().noDefaultValue()
      .withDescription("The id of the job restored from the savepoint (Flink's, as its checkpoint directory names it).");

  private SavepointOptions() {}
}
