package dev.geofence.savepoints;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The savepoint tools read and write the fence index's state through its layout package alone
 * (docs/ARCHITECTURE.md): a change to the operator cannot change what the tools write unless it
 * changes the layout, which savepoints of earlier releases are tested against.
 */
class LayoutDependencyTest {

  private static final Pattern JOB_IMPORT = Pattern.compile("^import (static )?(dev\\.geofence\\.job\\.[\\w.]+);", Pattern.MULTILINE);

  @Test
  void theToolsImportOnlyTheStateLayoutOfTheJob() throws IOException {
    List<String> imports;
    try (Stream<Path> sources = Files.walk(Path.of("src/main/java"))) {
      imports = sources.filter(p -> p.toString().endsWith(".java")).flatMap(LayoutDependencyTest::jobImports).toList();
    }
    assertThat(imports).as("classes of the job the savepoint tools import").isNotEmpty()
        .allMatch(name -> name.startsWith("dev.geofence.job.operator."));
  }

  private static Stream<String> jobImports(Path source) {
    try {
      Matcher m = JOB_IMPORT.matcher(Files.readString(source));
      Stream.Builder<String> found = Stream.builder();
      while (m.find()) {
        found.add(m.group(2));
      }
      return found.build();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }
}
