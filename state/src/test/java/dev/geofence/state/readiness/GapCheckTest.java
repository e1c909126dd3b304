package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class GapCheckTest {

  private static final long RESTORED = Lsn.parse("0/16B3748");

  @Test
  void coveredOnlyWhenTheSlotCanStillStreamFromTheRestoredPosition() {
    assertThat(GapCheck.check(SlotState.of("reserved", RESTORED), RESTORED).covered()).isTrue();
    assertThat(GapCheck.check(SlotState.of("extended", RESTORED - 1), RESTORED).covered()).isTrue();
    assertThat(GapCheck.check(SlotState.of("reserved", RESTORED + 1), RESTORED))
        .satisfies(r -> assertThat(r.covered()).isFalse())
        .satisfies(r -> assertThat(r.slotAhead()).isTrue())
        .satisfies(r -> assertThat(r.reason()).contains("past the restored 0/16B3748"));
    assertThat(GapCheck.check(SlotState.of("lost", RESTORED), RESTORED))
        .satisfies(r -> assertThat(r.covered() || r.slotAhead()).isFalse())
        .satisfies(r -> assertThat(r.reason()).contains("wal_status = lost"));
    assertThat(GapCheck.check(SlotState.missing(), RESTORED))
        .satisfies(r -> assertThat(r.covered() || r.slotAhead()).isFalse())
        .satisfies(r -> assertThat(r.reason()).contains("does not exist"));
  }

  @Test
  void lsnsRoundTripAndCompareAsUnsigned() {
    assertThat(Lsn.format(Lsn.parse("0/16B3748"))).isEqualTo("0/16B3748");
    assertThat(Lsn.parse("1/0")).isEqualTo(1L << 32);
    long high = Lsn.parse("FFFFFFFF/0");
    assertThat(GapCheck.check(SlotState.of("reserved", high), 5).covered()).as("a high LSN is past, not negative").isFalse();
    assertThatThrownBy(() -> Lsn.parse("16B3748")).hasMessageContaining("not an LSN");
  }
}
