package dev.geofence.connectors.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.config.CommandLine;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.config.SourceFlags;
import org.junit.jupiter.api.Test;

/** The dwell delay column as configured: its option, its flag, its default, and the check of its name. */
class FenceTableColumnsTest {

  private static final CommandLine TABLE = new CommandLine(SourceFlags.table());

  @Test
  void theDwellDelayColumnDefaultsToTheShippedTables() {
    assertThat(GeofenceOptions.DWELL_DELAY_COLUMN.key()).isEqualTo("geofence.source.dwell-delay-column");
    assertThat(FenceTableColumns.defaults().dwellDelay()).isEqualTo("dwell_delay");
    assertThat(FenceTableColumns.from(TABLE.parse(new String[0], 0)).dwellDelay()).isEqualTo("dwell_delay");
  }

  @Test
  void theFlagAndTheKeySetIt() {
    assertThat(SourceFlags.table()).contains(SourceFlags.DWELL_DELAY_COLUMN);
    assertThat(FenceTableColumns.from(TABLE.parse(new String[] {"--dwell-delay-column", "loiter_after"}, 0)).dwellDelay())
        .isEqualTo("loiter_after");
    assertThat(FenceTableColumns.from(TABLE.parse(new String[] {"-Dgeofence.source.dwell-delay-column=loiter_after"}, 0))
        .dwellDelay()).isEqualTo("loiter_after");
  }

  @Test
  void itIsPartOfTheMapping() {
    FenceTableColumns mapped = FenceTableColumns.builder().dwellDelay("loiter_after").build();
    FenceTableColumns none = FenceTableColumns.builder().dwellDelay(null).build();
    assertThat(none.dwellDelay()).isNull();
    assertThat(mapped).isNotEqualTo(FenceTableColumns.defaults()).isNotEqualTo(none)
        .isEqualTo(FenceTableColumns.builder().dwellDelay("loiter_after").build())
        .hasSameHashCodeAs(FenceTableColumns.builder().dwellDelay("loiter_after").build());
    assertThat(mapped.toString()).contains("loiter_after");
  }

  /** The name ends up in the SQL of the rebuilds' reads. */
  @Test
  void aNameThatIsNoPlainIdentifierIsRefused() {
    assertThatThrownBy(() -> FenceTableColumns.builder().dwellDelay("delay\"; DROP TABLE fences; --").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dwell delay column")
        .hasMessageContaining("not a plain SQL identifier");
    assertThatThrownBy(() -> FenceTableColumns.from(TABLE.parse(new String[] {"--dwell-delay-column", "dwell delay"}, 0)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dwell delay column 'dwell delay'");
  }
}
