package dev.geofence.savepoints;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * {@code inspect} reads a savepoint of the current release in either format Flink writes: the
 * canonical one and RocksDB's native one, which holds RocksDB's own files and is read by that
 * backend alone. The two savepoints of the release (job/src/test/resources/savepoints, written one
 * after the other from the same job) hold the same fences.
 */
class ReleaseSavepointInspectionITCase {

  private static final Path RELEASE = Path.of("../job/src/test/resources/savepoints/2026-12-05-release-0.1");

  @Test
  void aNativeRocksDbSavepointReadsAsTheCanonicalOne() throws Exception {
    assertThat(RELEASE.resolve("native")).as("the release's native savepoint").isDirectory();
    SavepointInspection canonical = SavepointInspection.read(RELEASE.resolve("canonical").toString(), 0);
    SavepointInspection nativeFormat = SavepointInspection.read(RELEASE.resolve("native").toString(), 0);

    assertThat(canonical.fences).isPositive();
    assertThat(nativeFormat.liveSeqs).isEqualTo(canonical.liveSeqs);
    assertThat(nativeFormat.tombstoneSeqs).isEqualTo(canonical.tombstoneSeqs);
    assertThat(nativeFormat.checksum).isEqualTo(canonical.checksum);
    assertThat(nativeFormat.memberships).isEqualTo(canonical.memberships).isPositive();
    assertThat(nativeFormat.unreadable).isZero();
    assertThat(Files.readString(RELEASE.resolve("native.properties"))).contains("backend=rocksdb");
  }
}
