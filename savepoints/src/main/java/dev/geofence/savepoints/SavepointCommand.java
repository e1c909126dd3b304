package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.config.CommandLine;
import dev.geofence.connectors.config.Flag;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.config.SourceFlags;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.readiness.Lsn;
import java.io.PrintStream;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;

/**
 * The savepoint tools' command line: {@code inspect}, {@code verify}, {@code bootstrap} (from the
 * database or from an Arrow snapshot file), {@code export} (to one) and {@code in-use}. Exit 0:
 * done (verify: equal; in-use: not in use), 1: verify found differences (in-use: the savepoint is
 * still needed), 2: a bad command line or a savepoint that cannot be read.
 * Options shared with the job are the job's ({@link SourceFlags}, {@link GeofenceOptions}), and
 * {@code -Dkey=value} sets any key; the fence database password comes from {@value
 * GeofenceOptions#PASSWORD_ENV}, as for the job. Under {@code java -jar} the job's launcher starts
 * it (the jar's manifest names this class), with Flink from the {@code lib/} next to the jar.
 */
public final class SavepointCommand {

  static final CommandLine INSPECT = new CommandLine(List.of(
      Flag.number("parallelism", "N", SavepointOptions.INSPECT_PARALLELISM).defaultingTo("the savepoint's"),
      Flag.toggle("json", SavepointOptions.INSPECT_JSON)));

  static final CommandLine VERIFY = new CommandLine(withTable(
      List.of(SourceFlags.SOURCE_URL, SourceFlags.SOURCE_USER),
      List.of(Flag.number("limit", "N", SavepointOptions.VERIFY_LIMIT))));

  static final CommandLine BOOTSTRAP = new CommandLine(withTable(
      List.of(SourceFlags.SOURCE_URL.defaultingTo("none: required without --from-arrow"),
          SourceFlags.SOURCE_USER.defaultingTo("none: required without --from-arrow"),
          Flag.text("output", "DIR", SavepointOptions.BOOTSTRAP_OUTPUT).asRequired(), SourceFlags.SLOT),
      List.of(Flag.number("max-parallelism", "N", GeofenceOptions.MAX_PARALLELISM), SourceFlags.GEOMETRY_FORMAT,
          Flag.text("from-arrow", "FILE", SavepointOptions.BOOTSTRAP_FROM_ARROW))));

  static final CommandLine EXPORT = new CommandLine(List.of(
      Flag.text("to-arrow", "FILE", SavepointOptions.EXPORT_TO_ARROW).asRequired()));

  static final CommandLine IN_USE = new CommandLine(List.of(
      Flag.text("checkpoint-dir", "URI", GeofenceOptions.CHECKPOINT_DIR).asRequired(),
      Flag.text("job-id", "ID", SavepointOptions.IN_USE_JOB_ID).asRequired()));

  static final String HELP = String.join("\n",
      "Usage: java -jar geofence-savepoints.jar inspect SAVEPOINT [--parallelism N] [--json]",
      "       java -jar geofence-savepoints.jar verify SAVEPOINT --source-url URL --source-user USER [--limit N]",
      "       java -jar geofence-savepoints.jar bootstrap --source-url URL --source-user USER --output DIR [--slot NAME]",
      "                 [--max-parallelism N] [--geometry-format wkb|wkt|geojson]",
      "       java -jar geofence-savepoints.jar bootstrap --from-arrow FILE --output DIR",
      "       java -jar geofence-savepoints.jar export SAVEPOINT --to-arrow FILE",
      "       java -jar geofence-savepoints.jar in-use SAVEPOINT --checkpoint-dir URI --job-id ID",
      "",
      "inspect  what a savepoint of the geofence job holds: fences, tombstones, checksum, vertices,",
      "         memberships, stream position and its age, state format, fences per subtask",
      INSPECT.help(),
      "verify   the savepoint's fences against the fence database, as of the savepoint: buckets not",
      "         edited since must hold the same fences at the same seqs; exit 0 when equal, 1 with the",
      "         differences",
      VERIFY.help(),
      "bootstrap  a savepoint the job restores from instead of reading the table on its first start:",
      "         creates the job's slot if missing, then reads every fence in one consistent read;",
      "         --max-parallelism must be the job's. With --from-arrow, from a snapshot file instead,",
      "         without the database",
      BOOTSTRAP.help(),
      "export   a savepoint's fences, fingerprints and stream position to an Arrow IPC file",
      EXPORT.help(),
      "in-use   whether the job restored from the savepoint still needs it: under the changelog its",
      "         checkpoints name the savepoint's files for a while; exit 0 when none of the job's",
      "         checkpoints does (the savepoint may be deleted), 1 while one does or none is complete",
      IN_USE.help(),
      "",
      "The fences table and its columns (--fences-table, --id-column, ...) are the job's run options.",
      "The fence database password comes from " + GeofenceOptions.PASSWORD_ENV + ".");

  private SavepointCommand() {}

  private static List<Flag> withTable(List<Flag> before, List<Flag> after) {
    List<Flag> flags = new ArrayList<>(before);
    flags.addAll(SourceFlags.table());
    flags.addAll(after);
    return flags;
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
        return bootstrap(BOOTSTRAP.parse(args, 1), out, err);
      }
      if (args.length < 2 || args[1].startsWith("--")) {
        throw new IllegalArgumentException("the savepoint's path is required after '" + args[0] + "'");
      }
      switch (args[0]) {
        case "inspect": {
          Configuration options = INSPECT.parse(args, 2);
          Integer parallelism = INSPECT.get(options, SavepointOptions.INSPECT_PARALLELISM);
          SavepointInspection inspection = SavepointInspection.read(args[1], parallelism == null ? 0 : parallelism, err);
          long now = System.currentTimeMillis();
          out.println(INSPECT.get(options, SavepointOptions.INSPECT_JSON) ? inspection.json(now) : inspection.table(now));
          return 0;
        }
        case "verify": {
          Configuration options = VERIFY.parse(args, 2);
          String url = VERIFY.required(options, GeofenceOptions.SOURCE_URL);
          String user = VERIFY.required(options, GeofenceOptions.SOURCE_USER);
          int limit = VERIFY.get(options, SavepointOptions.VERIFY_LIMIT);
          FenceTableColumns columns = FenceTableColumns.from(options);
          SavepointInspection inspection = SavepointInspection.read(args[1], 0, err);
          try (Connection db = DriverManager.getConnection(url, user, password())) {
            SavepointVerification verification = SavepointVerification.verify(inspection, db, columns);
            out.print(verification.report(limit));
            return verification.equal() ? 0 : 1;
          }
        }
        case "export": {
          Path file = Path.of(EXPORT.required(EXPORT.parse(args, 2), SavepointOptions.EXPORT_TO_ARROW));
          long rows = SavepointExport.export(args[1], file, err);
          out.printf("exported %,d fences of %s to %s%n", rows, args[1], file);
          return 0;
        }
        case "in-use": {
          Configuration options = IN_USE.parse(args, 2);
          SavepointUse use = SavepointUse.find(args[1], IN_USE.required(options, GeofenceOptions.CHECKPOINT_DIR),
              IN_USE.required(options, SavepointOptions.IN_USE_JOB_ID));
          out.print(use.report());
          return use.inUse() ? 1 : 0;
        }
        default:
          throw new IllegalArgumentException("unknown command '" + args[0] + "'; the commands are inspect, verify, bootstrap,"
              + " export and in-use (see --help)");
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

  private static int bootstrap(Configuration options, PrintStream out, PrintStream err) throws Exception {
    String output = BOOTSTRAP.required(options, SavepointOptions.BOOTSTRAP_OUTPUT);
    String arrow = BOOTSTRAP.get(options, SavepointOptions.BOOTSTRAP_FROM_ARROW);
    if (arrow != null) {
      SavepointBootstrap.Result result = SavepointBootstrap.writeFromArrow(Path.of(arrow), output);
      out.printf("bootstrapped %s from %s: %,d fences and %,d tombstones at %s%n",
          output, arrow, result.fences(), result.tombstones(), Lsn.format(result.lsn()));
      return 0;
    }
    int maxParallelism = BOOTSTRAP.get(options, GeofenceOptions.MAX_PARALLELISM);
    GeometryFormat geometryFormat = BOOTSTRAP.get(options, GeofenceOptions.GEOMETRY_FORMAT);
    FenceTableColumns columns = FenceTableColumns.from(options);
    String url = BOOTSTRAP.required(options, GeofenceOptions.SOURCE_URL);
    try (Connection db = DriverManager.getConnection(url, BOOTSTRAP.required(options, GeofenceOptions.SOURCE_USER), password())) {
      SavepointBootstrap.Result result = SavepointBootstrap.write(db, columns, BOOTSTRAP.get(options, GeofenceOptions.SLOT), output,
          maxParallelism, GeometryReadOptions.defaults(), geometryFormat, err);
      out.printf("bootstrapped %s: %,d fences and %,d tombstones read at %s; restore the job from it with run --from-savepoint%n",
          output, result.fences(), result.tombstones(), Lsn.format(result.lsn()));
      return 0;
    }
  }

  private static String password() {
    String password = System.getenv(GeofenceOptions.PASSWORD_ENV);
    return password == null ? "" : password;
  }
}
