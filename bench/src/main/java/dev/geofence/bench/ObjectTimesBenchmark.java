package dev.geofence.bench;

import dev.geofence.job.operator.FenceIndexUnionState;
import dev.geofence.connectors.model.Location;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.state.DefaultOperatorStateBackend;
import org.apache.flink.runtime.state.DefaultOperatorStateBackendBuilder;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.filesystem.FsCheckpointStreamFactory;
import org.apache.flink.util.concurrent.FutureUtils;

/**
 * What the objects' newest times cost a restore: the fence index operator's union state, written by
 * {@code --subtasks} subtasks for {@code --objects} objects into checkpoint files as the job writes
 * them, then read back as one restoring subtask reads them (every subtask reads every subtask's
 * share), through Flink's own operator state backend, in the packed form and in the form of earlier
 * releases (one element per object), each without and with Flink's snapshot compression
 * ({@code execution.checkpointing.snapshot-compression}), alternating, {@code --rounds} times each.
 * Prints the time a subtask takes to restore them, by the clock and in its thread's CPU time.
 *
 * <p>Flink 1.20 reads operator state through {@code CompressibleFSDataInputStream}, which reads
 * one byte at a time from what it wraps: without compression, that is the file itself.
 */
public final class ObjectTimesBenchmark {

  private ObjectTimesBenchmark() {}

  public static void main(String[] args) throws Exception {
    int objects = 200_000;
    int subtasks = 2;
    int rounds = 5;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--objects" -> objects = Integer.parseInt(args[++i]);
        case "--subtasks" -> subtasks = Integer.parseInt(args[++i]);
        case "--rounds" -> rounds = Integer.parseInt(args[++i]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]
            + "; usage: bench/run objects [--objects N] [--subtasks P] [--rounds R]");
      }
    }
    java.nio.file.Path dir = Files.createTempDirectory("geofence-bench-objects");
    System.out.printf(Locale.ROOT, "objects' newest times: %,d objects (ids like \"vehicle-123456\"), written by %d subtasks,"
        + " read by one; %d rounds, alternating%n", objects, subtasks, rounds);
    List<String> layouts = List.of("per-object (earlier releases)", "packed", "per-object, compressed", "packed, compressed");
    int variants = layouts.size();
    double[][] wall = new double[variants][rounds];
    double[][] cpu = new double[variants][rounds];
    long[] bytes = new long[variants];
    for (int round = 0; round < rounds; round++) {
      for (int layout = 0; layout < variants; layout++) {
        boolean compressed = layout >= 2;
        List<OperatorStateHandle> written = write(dir.resolve("r" + round + "-" + layout), objects, subtasks, layout % 2 == 0,
            compressed);
        bytes[layout] = written.stream().mapToLong(OperatorStateHandle::getStateSize).sum();
        System.gc();
        long cpuBefore = Measure.threadCpuNanos();
        long before = System.nanoTime();
        int read = read(written, compressed);
        wall[layout][round] = (System.nanoTime() - before) / 1e6;
        cpu[layout][round] = (Measure.threadCpuNanos() - cpuBefore) / 1e6;
        if (read != objects) {
          throw new AssertionError(layouts.get(layout) + " read " + read + " objects of " + objects);
        }
      }
    }
    for (int layout = 0; layout < variants; layout++) {
      System.out.printf(Locale.ROOT, "%-30s %,11d bytes  restore ms %s (median %.0f), CPU ms median %.0f%n", layouts.get(layout),
          bytes[layout], Arrays.toString(Arrays.stream(wall[layout]).mapToLong(Math::round).toArray()), Measure.median(wall[layout]),
          Measure.median(cpu[layout]));
    }
    for (int layout = 1; layout < variants; layout++) {
      System.out.printf(Locale.ROOT, "%s / %s, median restore: %.3f%n", layouts.get(layout), layouts.get(0),
          Measure.median(wall[layout]) / Measure.median(wall[0]));
    }
  }

  /** Each subtask's share of the objects written as the operator writes it at a checkpoint, to files under {@code dir}. */
  private static List<OperatorStateHandle> write(java.nio.file.Path dir, int objects, int subtasks, boolean perObject,
      boolean compressed) throws Exception {
    Files.createDirectories(dir);
    FsCheckpointStreamFactory files = new FsCheckpointStreamFactory(FileSystem.getLocalFileSystem(), new Path(dir.toUri()),
        new Path(dir.toUri()), 20 * 1024, 4096);
    List<OperatorStateHandle> handles = new ArrayList<>();
    for (int subtask = 0; subtask < subtasks; subtask++) {
      DefaultOperatorStateBackend backend = backend(List.of(), compressed);
      FenceIndexUnionState union = new FenceIndexUnionState(backend, perObject);
      union.write(List.of(), 0, null, each -> {
        for (int o = 0; o < objects; o++) {
          each.accept("vehicle-" + o, 1_764_900_000_000L + o);
        }
      }, subtask, subtasks, 0, new KeyGroupRange(0, 127));
      SnapshotResult<OperatorStateHandle> snapshot = FutureUtils.runIfNotDoneAndGet(
          backend.snapshot(1, 0, files, CheckpointOptions.forCheckpointWithDefaultLocation()));
      handles.add(snapshot.getJobManagerOwnedSnapshot());
      backend.dispose();
    }
    return handles;
  }

  /** Restores one subtask from every subtask's handle, as union state is, and counts the objects it is handed. */
  private static int read(List<OperatorStateHandle> handles, boolean compressed) throws Exception {
    DefaultOperatorStateBackend backend = backend(handles, compressed);
    int[] count = new int[1];
    new FenceIndexUnionState(backend, false).read(new KeyGroupRange(0, 127), new FenceIndexUnionState.Restored() {
      @Override
      public void held(Location location, int start, int end) {}

      @Override
      public void clock(long time) {}

      @Override
      public void untrusted(String reason) {}

      @Override
      public void objectNewest(String objectId, long time) {
        count[0]++;
      }

      @Override
      public void readAt(long time) {}
    });
    backend.dispose();
    return count[0];
  }

  private static DefaultOperatorStateBackend backend(List<OperatorStateHandle> handles, boolean compressed) throws Exception {
    ExecutionConfig config = new ExecutionConfig();
    config.setUseSnapshotCompression(compressed);
    return new DefaultOperatorStateBackendBuilder(ObjectTimesBenchmark.class.getClassLoader(), config, false, handles,
        new CloseableRegistry()).build();
  }
}
