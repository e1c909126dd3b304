package dev.geofence.bench;

import dev.geofence.job.operator.StoredFenceSerializer;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.readiness.BucketFingerprints;
import dev.geofence.state.segment.CoordinateArena;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.time.StayRules;
import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.CompressionType;
import org.rocksdb.Options;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksIterator;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;

/**
 * Today's layout of the fence index's keyed state (one RocksDB entry per fence, decoded into a
 * {@link StoredFence} and applied to a {@link FenceSet}) against the segment layout (one {@link
 * FenceSegment} per bucket, which the {@link FenceIndex} reads in place), on the same
 * fences in the same RocksDB settings as the job's (uncompressed, 64 KB blocks), restored by two
 * threads as two subtasks would: what issue 36 asks to measure before the layout is adopted. A
 * third layout, {@code mapped}, reads the same segments from a file per subtask without RocksDB:
 * the design beyond the state backend, measured before it is built.
 *
 * <pre>
 *   write   --dir D --fences N            both layouts of N fences x 96 vertices into D
 *   restore --dir D --fences N --layout today|segments|mapped [--points P]
 * </pre>
 *
 * A restore prints key=value lines: wall and CPU seconds from opening the database to an index
 * ready for queries, collector pauses and their count, the compilers' time, bytes allocated by the
 * restoring threads, the heap the indexes keep (after a full collection) per vertex, checks per
 * second of P random points against both subtasks' indexes, and a digest of every answer, which
 * must be equal for both layouts. Figures, not tests: {@code bench/run segments} runs both side by
 * side.
 */
public final class SegmentBenchmark {

  private static final int SUBTASKS = 2;

  public static void main(String[] args) throws Exception {
    Map<String, String> flags = new HashMap<>();
    for (int i = 1; i + 1 < args.length; i += 2) {
      flags.put(args[i], args[i + 1]);
    }
    File dir = new File(flags.get("--dir"));
    RocksDB.loadLibrary();
    switch (args[0]) {
      case "write":
        write(dir, Integer.parseInt(flags.get("--fences")));
        break;
      case "restore":
        restore(dir, flags.get("--layout"), Integer.parseInt(flags.get("--fences")),
            Integer.parseInt(flags.getOrDefault("--points", "1000000")));
        break;
      default:
        throw new IllegalArgumentException("write or restore, not " + args[0]);
    }
  }

  private static Options options() {
    BlockBasedTableConfig table = new BlockBasedTableConfig().setBlockSize(64 * 1024);
    return new Options().setCreateIfMissing(true).setCompressionType(CompressionType.NO_COMPRESSION).setTableFormatConfig(table);
  }

  // ---- write ---------------------------------------------------------------------------------------

  private static void write(File dir, int fences) throws Exception {
    double side = BenchFences.side(fences);
    List<Map<String, StoredFence>> buckets = new ArrayList<>();
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      buckets.add(new HashMap<>());
    }
    for (int i = 0; i < fences; i++) {
      String id = BenchFences.id(i);
      FenceGeometry geometry = FenceGeometry.fromArrays(BenchFences.ring(i, 1, side), new int[] {0, BenchFences.VERTICES + 1},
          new int[] {0, 1});
      buckets.get(FenceBuckets.of(id)).put(id, new StoredFence(1, false, geometry, null, StayRules.NO_FENCE_DELAY, 0, 0));
    }
    StoredFenceSerializer serializer = (StoredFenceSerializer) StoredFenceSerializer.INSTANCE.duplicate();
    DataOutputSerializer out = new DataOutputSerializer(4096);
    long segmentNanos = 0;
    long todayBytes = 0;
    long segmentBytes = 0;
    DataOutputStream[] mapped = new DataOutputStream[SUBTASKS];
    for (int s = 0; s < SUBTASKS; s++) {
      mapped[s] = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(mappedFile(dir, s)), 1 << 20));
    }
    try (Options options = options();
        RocksDB today = RocksDB.open(options, new File(dir, "today").getPath());
        RocksDB segments = RocksDB.open(options, new File(dir, "segments").getPath());
        WriteOptions writeOptions = new WriteOptions().setDisableWAL(true)) {
      for (int b = 0; b < FenceBuckets.COUNT; b++) {
        try (WriteBatch batch = new WriteBatch()) {
          for (Map.Entry<String, StoredFence> fence : buckets.get(b).entrySet()) {
            out.clear();
            serializer.serialize(fence.getValue(), out);
            byte[] id = fence.getKey().getBytes(StandardCharsets.UTF_8);
            byte[] key = new byte[2 + id.length];
            key[0] = (byte) (b >>> 8);
            key[1] = (byte) b;
            System.arraycopy(id, 0, key, 2, id.length);
            batch.put(key, out.getCopyOfBuffer());
            todayBytes += key.length + out.length();
          }
          today.write(writeOptions, batch);
        }
        long start = System.nanoTime();
        byte[] segment = StoredFence.segment(buckets.get(b));
        segmentNanos += System.nanoTime() - start;
        segmentBytes += segment.length;
        segments.put(writeOptions, bucketKey(b), segment);
        mapped[b % SUBTASKS].writeInt(segment.length);
        mapped[b % SUBTASKS].write(segment);
      }
      for (DataOutputStream file : mapped) {
        file.close();
      }
      today.compactRange();
      segments.compactRange();
    }
    System.out.println("fences=" + fences);
    System.out.println("today_bytes=" + todayBytes);
    System.out.println("segment_bytes=" + segmentBytes);
    System.out.printf("segment_write_ms_per_bucket=%.2f%n", segmentNanos / 1e6 / FenceBuckets.COUNT);
  }

  /** A subtask's segments as one file, each its length then its bytes, in the subtask's bucket order. */
  private static File mappedFile(File dir, int subtask) {
    return new File(dir, "mapped-" + subtask);
  }

  private static byte[] bucketKey(int bucket) {
    return new byte[] {(byte) (bucket >>> 8), (byte) bucket};
  }

  // ---- restore -------------------------------------------------------------------------------------

  /** One subtask's restored index, whichever the layout, and the vertices it holds. */
  private record Restored(FenceIndex index, long vertices) {}

  private static void restore(File dir, String layout, int fences, int points) throws Exception {
    long heapBefore = Measure.usedHeap();
    long cpu0 = Measure.processCpuNanos();
    long gc0 = pauseMillis();
    long gcCount0 = pauseCount();
    long jit0 = ManagementFactory.getCompilationMXBean().getTotalCompilationTime();
    long start = System.nanoTime();
    ExecutorService threads = Executors.newFixedThreadPool(SUBTASKS);
    List<Future<Restored>> futures = new ArrayList<>();
    long[] allocated = new long[SUBTASKS];
    try (Options options = options();
        RocksDB db = RocksDB.openReadOnly(options, new File(dir, layout.equals("mapped") ? "segments" : layout).getPath())) {
      for (int s = 0; s < SUBTASKS; s++) {
        int subtask = s;
        Callable<Restored> read = () -> {
          com.sun.management.ThreadMXBean bean = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
          long a0 = bean.getCurrentThreadAllocatedBytes();
          Restored restored = switch (layout) {
            case "today" -> today(db, subtask);
            case "segments" -> segments(db, subtask);
            case "mapped" -> mapped(dir, subtask);
            default -> throw new IllegalArgumentException("layout today, segments or mapped, not " + layout);
          };
          allocated[subtask] = bean.getCurrentThreadAllocatedBytes() - a0;
          return restored;
        };
        futures.add(threads.submit(read));
      }
      List<Restored> subtasks = new ArrayList<>();
      for (Future<Restored> f : futures) {
        subtasks.add(f.get());
      }
      long ready = System.nanoTime();
      System.out.printf("ready_s=%.3f%n", (ready - start) / 1e9);
      System.out.printf("cpu_s=%.2f%n", (Measure.processCpuNanos() - cpu0) / 1e9);
      System.out.printf("gc_pause_s=%.3f%n", (pauseMillis() - gc0) / 1e3);
      System.out.println("gc_pauses=" + (pauseCount() - gcCount0));
      System.out.printf("jit_s=%.2f%n", (ManagementFactory.getCompilationMXBean().getTotalCompilationTime() - jit0) / 1e3);
      System.out.printf("allocated_mb=%.0f%n", (allocated[0] + allocated[1]) / 1e6);
      long vertices = subtasks.stream().mapToLong(Restored::vertices).sum();
      long kept = Measure.usedHeap() - heapBefore;
      System.out.printf("heap_mb=%.0f%n", kept / 1e6);
      System.out.printf("heap_bytes_per_vertex=%.1f%n", (double) kept / vertices);
      query(subtasks, BenchFences.side(fences), points, threads);
    } finally {
      threads.shutdown();
    }
  }

  /** Today's restore: every fence an entry, decoded, applied as a snapshot edit, counted in its bucket's fingerprint. */
  private static Restored today(RocksDB db, int subtask) {
    StoredFenceSerializer serializer = (StoredFenceSerializer) StoredFenceSerializer.INSTANCE.duplicate();
    FenceSet fences = new FenceSet(new FenceIndex());
    BucketFingerprints fingerprints = new BucketFingerprints(FenceBuckets.COUNT, 0, FenceBuckets.COUNT - 1);
    DataInputDeserializer in = new DataInputDeserializer();
    long[] vertices = new long[1];
    try (ReadOptions read = new ReadOptions(); RocksIterator it = db.newIterator(read)) {
      for (int b = subtask; b < FenceBuckets.COUNT; b += SUBTASKS) {
        byte[] prefix = bucketKey(b);
        for (it.seek(prefix); it.isValid(); it.next()) {
          byte[] key = it.key();
          if (key[0] != prefix[0] || key[1] != prefix[1]) {
            break;
          }
          String id = new String(key, 2, key.length - 2, StandardCharsets.UTF_8);
          in.setBuffer(it.value());
          StoredFence stored = serializer.deserialize(in);
          fences.apply(stored.asSnapshotEdit(id));
          if (!stored.deleted()) {
            fingerprints.add(b, id, stored.seq());
            vertices[0] += stored.geometry() == null ? 0 : stored.geometry().vertexCount();
          }
        }
      }
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
    fences.index().prepareForQuery();
    return new Restored(fences.index(), vertices[0]);
  }

  /** The segment layout's restore: a value per bucket, read in place, counted in its bucket's fingerprint whole. */
  private static Restored segments(RocksDB db, int subtask) throws Exception {
    FenceSet fences = new FenceSet(new FenceIndex());
    BucketFingerprints fingerprints = new BucketFingerprints(FenceBuckets.COUNT, 0, FenceBuckets.COUNT - 1);
    CoordinateArena arena = new CoordinateArena();
    long vertices = 0;
    long getNanos = 0;
    long readNanos = 0;
    long t0 = System.nanoTime();
    for (int b = subtask; b < FenceBuckets.COUNT; b += SUBTASKS) {
      long t = System.nanoTime();
      byte[] value = db.get(bucketKey(b));
      getNanos += System.nanoTime() - t;
      if (value != null) {
        t = System.nanoTime();
        FenceSegment segment = FenceSegment.read(value, arena);
        readNanos += System.nanoTime() - t;
        fingerprints.add(b, segment.liveCount(), segment.checksum());
        vertices += segment.vertexCount();
        fences.load(b, segment);
      }
    }
    long t1 = System.nanoTime();
    fences.index().prepareForQuery();
    System.out.printf("subtask%d_get_s=%.2f%nsubtask%d_decode_s=%.2f%nsubtask%d_load_s=%.2f%nsubtask%d_pack_s=%.2f%n",
        subtask, getNanos / 1e9, subtask, readNanos / 1e9, subtask, (t1 - t0 - getNanos - readNanos) / 1e9, subtask,
        (System.nanoTime() - t1) / 1e9);
    return new Restored(fences.index(), vertices);
  }

  /**
   * The design a restore in seconds would take (design.md, "The snapshot as the index"): the
   * subtask's segments in a file of its own that the restore maps, read where they lie, with no
   * state backend between (no block read, no JNI array, no deserializer's copy); the coordinates
   * still copied once, into the arena. A prototype of the restore's reading alone: the file is
   * read where it was written (the job would first fetch it from the checkpoint's storage).
   */
  private static Restored mapped(File dir, int subtask) throws java.io.IOException {
    FenceSet fences = new FenceSet(new FenceIndex());
    BucketFingerprints fingerprints = new BucketFingerprints(FenceBuckets.COUNT, 0, FenceBuckets.COUNT - 1);
    CoordinateArena arena = new CoordinateArena();
    long vertices = 0;
    long t0 = System.nanoTime();
    try (FileChannel channel = FileChannel.open(mappedFile(dir, subtask).toPath(), StandardOpenOption.READ)) {
      MappedByteBuffer file = channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size());
      for (int b = subtask; b < FenceBuckets.COUNT; b += SUBTASKS) {
        int length = file.getInt();
        FenceSegment segment = FenceSegment.read(file.slice(file.position(), length), arena);
        file.position(file.position() + length);
        fingerprints.add(b, segment.liveCount(), segment.checksum());
        vertices += segment.vertexCount();
        fences.load(b, segment);
      }
    }
    long t1 = System.nanoTime();
    fences.index().prepareForQuery();
    System.out.printf("subtask%d_read_s=%.2f%nsubtask%d_pack_s=%.2f%n", subtask, (t1 - t0) / 1e9, subtask, (System.nanoTime() - t1) / 1e9);
    return new Restored(fences.index(), vertices);
  }

  /** Every point against both subtasks' indexes, a thread each, as broadcast locations are. */
  private static void query(List<Restored> subtasks, double extent, int points, ExecutorService threads) throws Exception {
    SplittableRandom random = new SplittableRandom(42);
    double[] xs = new double[points];
    double[] ys = new double[points];
    for (int p = 0; p < points; p++) {
      xs[p] = random.nextDouble() * extent;
      ys[p] = random.nextDouble() * extent;
    }
    for (int round = 0; round < 2; round++) {
      long start = System.nanoTime();
      List<Future<long[]>> answers = new ArrayList<>();
      for (Restored subtask : subtasks) {
        answers.add(threads.submit(() -> {
          long[] digest = new long[2];
          for (int p = 0; p < points; p++) {
            long point = p;
            subtask.index().forEachCovering(xs[p], ys[p], null, id -> {
              digest[0] += point * 31 + id.hashCode();
              digest[1]++;
            });
          }
          return digest;
        }));
      }
      long digest = 0;
      long hits = 0;
      for (Future<long[]> a : answers) {
        digest += a.get()[0];
        hits += a.get()[1];
      }
      if (round == 1) {
        System.out.printf("checks_per_s=%.0f%n", points / ((System.nanoTime() - start) / 1e9));
        System.out.println("hits=" + hits);
        System.out.println("answer_digest=" + digest);
      }
    }
  }

  private static long pauseMillis() {
    return Measure.pauses(GarbageCollectorMXBean::getCollectionTime);
  }

  private static long pauseCount() {
    return Measure.pauses(GarbageCollectorMXBean::getCollectionCount);
  }
}
