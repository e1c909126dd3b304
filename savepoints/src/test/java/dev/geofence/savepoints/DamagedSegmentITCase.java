package dev.geofence.savepoints;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.time.StayRules;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A savepoint whose bucket segment is damaged: {@code inspect} counts the segment as unreadable
 * (its fences unknown) and reads the other buckets' fences; {@code export} refuses it rather than
 * write a file without that bucket's fences.
 */
class DamagedSegmentITCase {

  @TempDir Path temp;

  @Test
  void inspectReportsADamagedSegmentAndExportRefusesTheSavepoint() throws Exception {
    FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());
    StoredFence square = StoredFence.of(3, false, reader.readWkt("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))").geometry(), "t", StayRules.NO_FENCE_DELAY, 10);
    byte[] intact = StoredFence.segment(Map.of("a", square));
    byte[] damaged = StoredFence.segment(Map.of("b", square));
    damaged[damaged.length / 2] ^= 0x01;
    List<BootstrapRow> rows = new ArrayList<>(List.of(BootstrapRow.segment(FenceBuckets.of("a"), intact),
        BootstrapRow.segment(FenceBuckets.of("b"), damaged)));
    String savepoint = temp.resolve("damaged").toString();
    SavepointBootstrap.writeRows(rows, 16, 10, 0, savepoint, 128, GeometryReadOptions.defaults(), GeometryFormat.WKB);

    SavepointInspection inspection = SavepointInspection.read(savepoint, 1);
    assertThat(inspection.segments).isEqualTo(2);
    assertThat(inspection.unreadableSegments).isEqualTo(1);
    assertThat(inspection.liveSeqs).as("the intact bucket's fence, not the damaged one's").isEqualTo(Map.of("a", 3L));
    assertThat(inspection.table(System.currentTimeMillis()))
        .contains("but 1 bucket segments this release cannot read (damaged, or of another format)");
    assertThat(new ObjectMapper().readTree(inspection.json(System.currentTimeMillis())).get("unreadable_segments").asLong())
        .isEqualTo(1);

    assertThatThrownBy(() -> SavepointExport.export(savepoint, temp.resolve("fences.arrow"), null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("1 bucket segments of the savepoint cannot be read (damaged, or of another format): their fences are unknown");
  }
}
