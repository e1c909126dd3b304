package dev.geofence.job.handover;

/**
 * The names of the handover operator's metrics, for the operator that registers them and for the
 * {@code ready} probe, which reads them through Flink's REST API. Constants only, so that a reader
 * needs no Flink on its class path.
 */
public final class HandoverMetrics {

  /** Gauge: what this instance writes, an index into {@link #ROLE_WORDS}. */
  public static final String ROLE = "handover_role";
  /** Counter: the triggers left to the other instance (the old writer's from T on, the next writer's before T). */
  public static final String TRIGGERS_LEFT = "handover_triggers_left";

  /** Each role of {@link #ROLE} in words, in the order of {@code HandoverGate.Role}. */
  static final String[] ROLE_WORDS = {
    "writes the outputs",
    "hands the outputs over",
    "standby: writes nothing until handed the outputs",
    "takes the outputs over",
    "retired: another instance writes the outputs"};

  private HandoverMetrics() {}

  /** The role of gauge value {@code code} in words, or null for none. */
  public static String roleWords(int code) {
    return code >= 0 && code < ROLE_WORDS.length ? ROLE_WORDS[code] : null;
  }
}
