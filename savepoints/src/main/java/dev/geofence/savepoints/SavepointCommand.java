package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.job.GeofenceJob;
import dev.geofence.job.cli.GeofenceCommand;
import dev.geofence.job.cli.Launcher;
import dev.geofence.job.cli.Options;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.readiness.Lsn;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Set;

/**
 * The savepoint tools' command line: {@code inspect}, {@code verify}, {@code bootstrap} (from the
 * database or from an Arrow snapshot file) and {@code export} (to one). Exit 0: done (verify: equal), 1: verify found differences, 2: a bad
 * command line or a savepoint that cannot be read. The fence database password comes from
 * {@code GEOFENCE_SOURCE_PASSWORD}, as for the job.
 */
public final class SavepointCommand {

  static final String HELP = String.join("\n",
      "Usage: java -jar geofence-savepoints.jar inspect SAVEPOINT [--parallelism N] [--json]",
      "       java -jar geofence-savepoints.jar verify SAVEPOINT --source-url URL --source-user USER [--fences-table NAME] [--limit N]",
      "       java -jar geofence-savepoints.jar bootstrap --source-url URL --source-user USER --output DIR [--slot NAME]",
      "                 [--fences-table NAME] [--max-parallelism N] [--geometry-format wkb|wkt|geojson]",
      "       java -jar geofence-savepoints.jar bootstrap --from-arrow FILE --output DIR",
      "       java -jar geofence-savepoints.jar export SAVEPOINT --to-arrow FILE",
      "",
      "inspect  what a savepoint of the geofence job holds: fences, tombstones, checksum, vertices,",
      "         memberships, stream position and its age, state format, fences per subtask at",
      "         --parallelism (default: the savepoint's)",
      "verify   the savepoint's fences against the fence database, as of the savepoint: buckets not",
      "         edited since must hold the same fences at the same seqs; exit 0 when equal, 1 with the",
      "         differences (at most --limit listed, default 50)",
      "bootstrap  a savepoint the job restores from (with run --startup slot) instead of a CDC snapshot:",
      "         creates the job's slot (--slot, default geofence) if missing, then reads every fence in one",
      "         consistent read; --max-parallelism must be the job's (default 128). With --from-arrow,",
      "         from a snapshot file instead, without the database",
      "export   a savepoint's fences, fingerprints and stream position to an Arrow IPC file",
      "The fence database password comes from " + GeofenceCommand.PASSWORD_ENV + ".");

  private SavepointCommand() {}

  private static int bootstrap(Options options, PrintStream out, PrintStream err) throws Exception {
    String arrow = options.get("from-arrow", null);
    if (arrow != null) {
      SavepointBootstrap.Result result = SavepointBootstrap.writeFromArrow(java.nio.file.Path.of(arrow), options.required("output"));
      out.printf("bootstrapped %s from %s: %,d fences and %,d tombstones at %s%n",
          options.required("output"), arrow, result.fences(), result.tombstones(), Lsn.format(result.lsn()));
      return 0;
    }
    FenceTableColumns columns = FenceTableColumns.builder().fencesTable(options.get("fences-table", "fences")).build();
    String output = options.required("output");
    int maxParallelism = options.getInt("max-parallelism", GeofenceJob.DEFAULT_MAX_PARALLELISM);
    GeometryFormat geometryFormat =
        options.getEnum("geometry-format", GeometryFormat.class, GeometryFormat.WKB);
    String password = System.getenv(GeofenceCommand.PASSWORD_ENV);
    try (Connection db = DriverManager.getConnection(options.required("source-url"), options.required("source-user"),
        password == null ? "" : password)) {
      SavepointBootstrap.Result result = SavepointBootstrap.write(db, columns, options.get("slot", "geofence"), output,
          maxParallelism, GeometryReadOptions.defaults(), geometryFormat, err);
      out.printf("bootstrapped %s: %,d fences and %,d tombstones read at %s; restore the job from it with run --startup slot%n",
          output, result.fences(), result.tombstones(), Lsn.format(result.lsn()));
      return 0;
    }
  }

  /** Under {@code java -jar}: Flink comes from the {@code lib/} directory next to the jar. */
  public static final class Jar {
    /** The tools print their own results and progress; Flink's logging stays out of them. */
    static final String LOG_CONFIG = "geofence-savepoints-log4j2.properties";

    private Jar() {}

    public static void main(String[] args) throws Exception {
      Launcher.launch(SavepointCommand.class.getName(), LOG_CONFIG, args);
    }
  }

  public static void main(String[] args) {
    System.exit(run(args, System.out, System.err));
  }

  /** Runs a command; returns its exit code. */
  public static int run(String[] args, PrintStream out, PrintStream err) {
    if (args.length == 0 || args[0].equals("--help")) {
      out.println(HELP);
      return args.length == 0 ? 2 : 0;
    }
    try {
      if (args[0].equals("bootstrap")) {
        return bootstrap(Options.parse(args, 1, Set.of(
            "source-url", "source-user", "output", "slot", "fences-table", "max-parallelism", "geometry-format", "from-arrow")), out, err);
      }
      if (args.length < 2 || args[1].startsWith("--")) {
        throw new IllegalArgumentException("the savepoint's path is required after '" + args[0] + "'");
      }
      switch (args[0]) {
        case "inspect": {
          // --json is a flag; every other option takes a value.
          boolean json = java.util.Arrays.asList(args).contains("--json");
          Options options = Options.parse(
              java.util.Arrays.stream(args).filter(a -> !a.equals("--json")).toArray(String[]::new), 2, Set.of("parallelism"));
          String format = json ? "json" : "table";
          SavepointInspection inspection = SavepointInspection.read(args[1], options.getInt("parallelism", 0), err);
          out.println(format.equals("json") ? inspection.json(System.currentTimeMillis()) : inspection.table(System.currentTimeMillis()));
          return 0;
        }
        case "verify": {
          Options options = Options.parse(args, 2, Set.of("source-url", "source-user", "fences-table", "limit"));
          FenceTableColumns columns = FenceTableColumns.builder().fencesTable(options.get("fences-table", "fences")).build();
          String password = System.getenv(GeofenceCommand.PASSWORD_ENV);
          String url = options.required("source-url");
          String user = options.required("source-user");
          int limit = options.getInt("limit", 50);
          SavepointInspection inspection = SavepointInspection.read(args[1], 0, err);
          try (Connection db = DriverManager.getConnection(url, user, password == null ? "" : password)) {
            SavepointVerification verification = SavepointVerification.verify(inspection, db, columns);
            out.print(verification.report(limit));
            return verification.equal() ? 0 : 1;
          }
        }
        case "export": {
          Options options = Options.parse(args, 2, Set.of("to-arrow"));
          java.nio.file.Path file = java.nio.file.Path.of(options.required("to-arrow"));
          long rows = SavepointExport.export(args[1], file, err);
          out.printf("exported %,d fences of %s to %s%n", rows, args[1], file);
          return 0;
        }
        default:
          throw new IllegalArgumentException("unknown command '" + args[0] + "'; the commands are inspect, verify, bootstrap and export (see --help)");
      }
    } catch (IllegalArgumentException e) {
      err.println("geofence-savepoints: " + e.getMessage());
      return 2;
    } catch (SQLException e) {
      err.println("geofence-savepoints: the fence database could not be read: " + e.getMessage());
      return 2;
    } catch (Exception e) {
      err.println("geofence-savepoints: the savepoint could not be read: " + e);
      return 2;
    }
  }
}
