package dev.geofence.connectors.model;

import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.UUID;

/**
 * Input the job could not use as it was, with the reason: a row of {@code geofence_dead_letters}.
 * Nothing is dropped without one. Severity {@code WARNING} marks input that was used after a
 * repair (an invalid polygon fixed under the {@code repair} policy). A Flink POJO.
 */
public class DeadLetter {

  /** The most of an input a letter keeps, in characters: enough to replay a fence or a location line. */
  public static final int PAYLOAD_LIMIT = 4096;

  /** Derived from the letter's content, so a replay upserts the same row instead of adding one. */
  public String letterId;
  /** Where it came from: {@code fence} or {@code location}. */
  public String source;
  /** The fence id or object id, when it could be read. */
  public String key;
  /** For a fence edit: its seq; 0 otherwise. */
  public long seq;
  /** {@code ERROR} (refused) or {@code WARNING} (used after repair). */
  public String severity;
  /** A stable reason code, e.g. {@code RING_NOT_CLOSED} or {@code MALFORMED_JSON}. */
  public String reason;
  /** One sentence for a person. */
  public String detail;
  /** The input as received (its first {@link #PAYLOAD_LIMIT} characters), so it can be replayed. */
  public String payload;
  /** Event time of the input (commit time of an edit, or location time), epoch millis; 0 if unknown. */
  public long eventTime;
  public long recordedAt;

  public DeadLetter() {}

  public DeadLetter(
      String source, String key, long seq, String severity, String reason, String detail,
      String payload, long eventTime, long recordedAt) {
    this.source = source;
    this.key = key;
    this.seq = seq;
    this.severity = severity;
    this.reason = reason;
    this.detail = detail;
    this.payload = payload != null && payload.length() > PAYLOAD_LIMIT ? payload.substring(0, PAYLOAD_LIMIT) : payload;
    this.eventTime = eventTime;
    this.recordedAt = recordedAt;
    // The whole payload, not the part kept: two inputs alike in their first PAYLOAD_LIMIT
    // characters are two letters, where one id kept the first and dropped the second.
    String identity = source + "|" + key + "|" + seq + "|" + reason + "|" + eventTime + "|" + payload;
    this.letterId = UUID.nameUUIDFromBytes(identity.getBytes(StandardCharsets.UTF_8)).toString();
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof DeadLetter)) {
      return false;
    }
    DeadLetter that = (DeadLetter) o;
    return seq == that.seq
        && eventTime == that.eventTime
        && Objects.equals(source, that.source)
        && Objects.equals(key, that.key)
        && Objects.equals(severity, that.severity)
        && Objects.equals(reason, that.reason)
        && Objects.equals(payload, that.payload);
  }

  @Override
  public int hashCode() {
    return Objects.hash(source, key, seq, reason);
  }

  @Override
  public String toString() {
    return severity + " " + source + " " + key + "@" + seq + " " + reason + ": " + detail;
  }
}
