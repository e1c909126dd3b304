package dev.geofence.job.operator;

/**
 * The uids of the job's operators: a savepoint keeps each operator's state under its uid, so none
 * of these may ever change, and the savepoint tools find the fence index's state by its own.
 */
public final class Uids {

  public static final String FENCE_SOURCE = "fence-changes";
  public static final String LOCATION_SOURCE = "location-lines";
  public static final String PARSE_LOCATIONS = "parse-locations";
  public static final String FENCE_INDEX = "fence-index";
  public static final String TRIGGERS_SINK = "triggers-sink";
  public static final String TRIGGERS_TOPIC_SINK = "triggers-topic-sink";
  public static final String PRESENCE_SINK = "presence-sink";
  public static final String DEAD_LETTERS_SINK = "dead-letters-sink";
  public static final String HEARTBEAT_TICKS = "heartbeat-ticks";
  public static final String HEARTBEAT_SINK = "heartbeat-sink";
  public static final String HYDRATION_SINK = "hydration-history-sink";
  public static final String HANDOVER = "handover";

  private Uids() {}
}
