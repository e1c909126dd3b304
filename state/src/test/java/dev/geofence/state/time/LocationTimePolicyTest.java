package dev.geofence.state.time;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class LocationTimePolicyTest {

  private final LocationTimePolicy policy = new LocationTimePolicy(Duration.ofMinutes(5), Duration.ofMinutes(1));

  @Test
  void theSkewAheadIsAdmittedAndOneMillisecondMoreIsTheFuture() {
    long now = 1_764_500_000_000L;
    assertThat(policy.isFuture(now + 60_000, now)).isFalse();
    assertThat(policy.isFuture(now + 60_001, now)).isTrue();
    assertThat(policy.isFuture(Long.MIN_VALUE, now)).as("the past is never the future").isFalse();
    assertThat(policy.isFuture(2_100_000_000_000L, now)).as("a device clock in 2036").isTrue();
  }

  @Test
  void theLatenessBehindIsAdmittedAndOneMillisecondMoreIsLate() {
    long clock = 1_764_500_000_000L;
    assertThat(policy.isLate(clock - 300_000, clock)).isFalse();
    assertThat(policy.isLate(clock - 300_001, clock)).isTrue();
    assertThat(policy.historyHorizon(clock)).isEqualTo(clock - 300_000);
    assertThat(policy.isLate(0, Long.MIN_VALUE)).as("nothing is late before the clock starts").isFalse();
    assertThat(policy.historyHorizon(Long.MIN_VALUE + 10)).isEqualTo(Long.MIN_VALUE);
  }

  @Test
  void negativeBoundsAreRefusedInOneSentence() {
    assertThatThrownBy(() -> new LocationTimePolicy(Duration.ofSeconds(-1), Duration.ZERO))
        .hasMessage("the allowed lateness must not be negative, got PT-1S");
    assertThatThrownBy(() -> new LocationTimePolicy(Duration.ZERO, Duration.ofSeconds(-1)))
        .hasMessage("the maximum clock skew must not be negative, got PT-1S");
  }
}
