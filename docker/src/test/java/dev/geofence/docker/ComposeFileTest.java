package dev.geofence.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.fail;

import dev.geofence.connectors.sink.KafkaOutputs;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.job.cli.GeofenceCommand;
import java.io.IOException;
import java.io.Reader;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * {@code docker/compose.yaml}, checked without a Docker engine: it parses as Compose reads it
 * (YAML with anchors and merge keys, {@code ${VAR}} interpolation from {@code docker/.env}), every
 * image is pinned, every mounted host path exists, and the ports, hosts, topics, options and names
 * agree with the job (its option declarations and parser), with the migrations, with the Flink SQL DDL
 * and with one another. Each assertion says what disagrees with what.
 */
class ComposeFileTest {

  private static final String PROMETHEUS_FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory";
  /** The class that logs the Debezium configuration, password included, at INFO (docs/deployment.md#logging). */
  private static final String CDC_CONFIG_LOGGER = "org.apache.flink.cdc.connectors.postgres.source.fetch.PostgresSourceFetchTaskContext";
  /** The order the files' own comments require (fence-versioning.sql and geofence-role.sql say so). */
  private static final List<String> MIGRATION_ORDER = List.of(
      "source/fences-postgis.sql", "source/fence-versioning.sql", "sink/geofence-outputs.sql", "source/geofence-role.sql");
  /** Kafka's default transaction.max.timeout.ms, when the compose file does not set it. */
  private static final long KAFKA_DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000;

  private static Path docker;
  private static Map<String, String> dotEnv;
  /** The file as written (for what refers to variables) and as Compose runs it (interpolated). */
  private static Map<String, Object> raw;
  private static Map<String, Object> compose;
  private static String flinkVersion;

  @BeforeAll
  static void load() throws IOException {
    docker = Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath();
    Path file = docker.resolve("compose.yaml");
    assertThat(file).as("the compose file of the docker module").isRegularFile();
    dotEnv = readDotEnv(docker.resolve(".env"));
    LoaderOptions options = new LoaderOptions();
    options.setAllowDuplicateKeys(false);
    try (Reader reader = Files.newBufferedReader(file)) {
      Object parsed = new Yaml(new SafeConstructor(options)).load(reader);
      assertThat(parsed).as("compose.yaml must be a YAML mapping").isInstanceOf(Map.class);
      raw = map(parsed, "compose.yaml");
    }
    compose = map(interpolate(raw, "compose.yaml"), "compose.yaml");
    Matcher version = Pattern.compile("<flink\\.version>([^<]+)</flink\\.version>").matcher(Files.readString(docker.resolve("../pom.xml")));
    assertThat(version.find()).as("the parent pom.xml defines flink.version").isTrue();
    flinkVersion = version.group(1).strip();
  }

  // ---------------------------------------------------------------------------------------------
  // The file itself

  @Test
  void parsesAsACompose() {
    Set<String> topLevel = Set.of("name", "services", "volumes", "networks", "configs", "secrets", "include");
    for (String key : compose.keySet()) {
      assertThat(key.startsWith("x-") || topLevel.contains(key))
          .as("top-level key '%s' of compose.yaml is not Compose's (%s) nor an x- extension", key, topLevel).isTrue();
    }
    assertThat(services()).as("services").isNotEmpty();
    Set<String> serviceKeys = Set.of("image", "command", "entrypoint", "environment", "env_file", "volumes", "ports",
        "depends_on", "healthcheck", "restart", "profiles", "user", "stdin_open", "tty", "working_dir", "hostname",
        "networks", "container_name", "expose", "labels", "init", "ulimits", "extra_hosts", "logging", "deploy",
        "stop_grace_period", "shm_size", "mem_limit", "cpus");
    Set<String> declaredVolumes = compose.get("volumes") == null ? Set.of() : map(compose.get("volumes"), "volumes").keySet();
    for (Map.Entry<String, Map<String, Object>> service : services().entrySet()) {
      String name = service.getKey();
      for (String key : service.getValue().keySet()) {
        assertThat(serviceKeys).as("service %s has key '%s', which Compose does not know (a typo?)", name, key).contains(key);
      }
      for (Mount mount : mounts(name)) {
        if (!mount.bind()) {
          assertThat(declaredVolumes).as("service %s mounts the named volume '%s', which the top-level volumes do not declare",
              name, mount.source()).contains(mount.source());
        }
      }
      for (Map.Entry<String, String> dependency : dependsOn(name).entrySet()) {
        assertThat(services()).as("service %s depends on '%s', which is no service", name, dependency.getKey())
            .containsKey(dependency.getKey());
        assertThat(dependency.getValue()).as("condition of %s on %s", name, dependency.getKey())
            .isIn("service_started", "service_healthy", "service_completed_successfully");
        if (dependency.getValue().equals("service_healthy")) {
          assertThat(service(dependency.getKey())).as("service %s waits for %s to be healthy, which has no healthcheck",
              name, dependency.getKey()).containsKey("healthcheck");
        }
      }
      Object environment = service.getValue().get("environment");
      if (environment instanceof Map<?, ?> values) {
        // YAML reads yes, no, on, off, true and false as booleans, which Compose refuses here.
        values.forEach((key, value) -> assertThat(value).as("environment %s of service %s is a YAML boolean; quote it", key, name)
            .isNotInstanceOf(Boolean.class));
      }
    }
  }

  @Test
  void everyImageIsPinned() {
    Map<String, Pattern> tags = Map.of(
        // The project's Flink, on Java 17, in every Flink container.
        "flink", Pattern.compile(Pattern.quote(flinkVersion + "-scala_2.12-java17")),
        // PostgreSQL 15 (what .ci/postgis.sh runs) with PostGIS 3.x; the image has no finer tag.
        "postgis/postgis", Pattern.compile("15-3\\.\\d+"),
        // A Kafka 3.x release (KRaft); the job's kafka-clients speak to any of them.
        "apache/kafka", Pattern.compile("3\\.\\d+\\.\\d+"));
    for (String name : services().keySet()) {
      Object image = service(name).get("image");
      assertThat(image).as("service %s has no image (a build: would not be pinned)", name).isInstanceOf(String.class);
      String reference = (String) image;
      assertThat(reference).as("image of service %s is pinned by tag, not digest", name).doesNotContain("@");
      int colon = reference.lastIndexOf(':');
      assertThat(colon > reference.lastIndexOf('/')).as("image '%s' of service %s has no tag (that is :latest)", reference, name)
          .isTrue();
      String repository = reference.substring(0, colon).replaceFirst("^(docker\\.io/)?(library/)?", "");
      String tag = reference.substring(colon + 1);
      assertThat(tag).as("image '%s' of service %s", reference, name).isNotEqualTo("latest");
      assertThat(tags).as("image '%s' of service %s has no pinning rule in this test; add one", reference, name)
          .containsKey(repository);
      assertThat(tag).as("tag of image '%s' of service %s (flink.version of the parent pom is %s)", reference, name, flinkVersion)
          .matches(tags.get(repository));
    }
  }

  @Test
  void everyMountedHostPathExists() {
    for (String name : services().keySet()) {
      for (Mount mount : mounts(name)) {
        if (mount.bind()) {
          Path host = docker.resolve(mount.source()).normalize();
          assertThat(Files.exists(host)).as("service %s mounts %s (%s) at %s, which does not exist%s", name, mount.source(), host,
              mount.target(), hint(mount.source())).isTrue();
        }
      }
    }
  }

  @Test
  void hostPortsAreNotPublishedTwice() {
    Map<String, String> published = new HashMap<>();
    for (String name : services().keySet()) {
      for (Port port : ports(name)) {
        if (port.host() != null) {
          String previous = published.put(port.hostIp() + ":" + port.host(), name);
          assertThat(previous).as("host port %s:%s is published by both %s and %s", port.hostIp(), port.host(), previous, name)
              .isNull();
        }
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Flink

  @Test
  void restPortAgreesWithTheJobAndFlink() {
    int restPort = flinkConfig("jobmanager").get(RestOptions.PORT);
    assertThat(restPort).as("rest.port of the jobmanager's FLINK_PROPERTIES vs the job's --rest-port default")
        .isEqualTo(GeofenceOptions.REST_PORT.defaultValue());
    assertThat(restPort).as("rest.port of the jobmanager vs Flink's default rest.port").isEqualTo(RestOptions.PORT.defaultValue());
    assertThat(containerPorts("jobmanager")).as("container ports the jobmanager publishes (its REST port is %d)", restPort)
        .contains(restPort);
    assertThat(String.join(" ", healthcheck("jobmanager"))).as("the jobmanager's healthcheck asks its REST port %d", restPort)
        .contains(":" + restPort + "/");
    for (String name : List.of("jobmanager", "taskmanager")) {
      assertThat(flinkConfig(name).get(JobManagerOptions.ADDRESS)).as("jobmanager.rpc.address of the %s", name)
          .isEqualTo("jobmanager");
    }
    assertThat(submitArgs().flinkOption("-m")).as("flink run -m of the submit service vs the jobmanager's REST endpoint")
        .isEqualTo("jobmanager:" + restPort);
    Configuration sql = flinkConfig("sql-client");
    assertThat(sql.get(RestOptions.ADDRESS)).as("rest.address of the sql-client").isEqualTo("jobmanager");
    assertThat(sql.get(RestOptions.PORT)).as("rest.port of the sql-client vs the jobmanager's").isEqualTo(restPort);
  }

  @Test
  void flinkPropertiesSurviveTheEntrypoint() {
    // The image's entrypoint strips every blank of a FLINK_PROPERTIES line, splits it at the first
    // colon and runs envsubst over the value: a value with blanks or a $ would silently change.
    for (String name : services().keySet()) {
      String properties = environment(name).get("FLINK_PROPERTIES");
      if (properties == null) {
        continue;
      }
      for (String line : properties.split("\n")) {
        String stripped = line.strip();
        if (stripped.isEmpty()) {
          continue;
        }
        assertThat(stripped).as("FLINK_PROPERTIES line of %s is key: value, no blank or $ in the value", name)
            .matches("[\\w.\\-]+:\\s*[^\\s$]+");
      }
    }
  }

  @Test
  void checkpointsAndSavepointsAreOnVolumesBothFlinkProcessesShare() {
    JobArgs job = submitArgs();
    Map<String, String> directories = new LinkedHashMap<>();
    for (String name : List.of("jobmanager", "taskmanager")) {
      Configuration config = flinkConfig(name);
      directories.put("execution.checkpointing.dir of the " + name, config.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY));
      directories.put("execution.checkpointing.savepoint-dir of the " + name, config.get(CheckpointingOptions.SAVEPOINT_DIRECTORY));
    }
    directories.put("--checkpoint-dir of the submitted job", job.options().get(GeofenceOptions.CHECKPOINT_DIR));
    directories.put("--savepoint-dir of the submitted job", job.options().get(GeofenceOptions.SAVEPOINT_DIR));
    directories.forEach((what, uri) -> {
      assertThat(uri).as(what).isNotNull().startsWith("file:///");
      String path = URI.create(uri).getPath();
      Mount jobManager = mountFor("jobmanager", path);
      assertThat(jobManager).as("%s is %s, on no volume of the jobmanager", what, uri).isNotNull();
      assertThat(jobManager.bind()).as("%s is %s, on a named volume", what, uri).isFalse();
      assertThat(mountFor("taskmanager", path)).as("%s is %s: the taskmanager must have the jobmanager's volume there", what, uri)
          .isEqualTo(jobManager);
    });
    // New volumes belong to root; the one-shot flink-volumes service hands them to the user flink.
    List<String> chown = command(service("flink-volumes").get("entrypoint"));
    for (Mount mount : mounts("jobmanager")) {
      if (!mount.bind()) {
        assertThat(chown).as("flink-volumes's chown covers %s", mount.target()).contains(mount.target());
        assertThat(mounts("flink-volumes")).as("flink-volumes mounts the volume at %s", mount.target()).contains(mount);
      }
    }
    for (String name : List.of("jobmanager", "taskmanager")) {
      assertThat(dependsOn(name)).as("%s starts after flink-volumes has chowned them", name)
          .containsEntry("flink-volumes", "service_completed_successfully");
    }
  }

  @Test
  void prometheusReporterIsOnAndPublished() {
    for (String name : List.of("jobmanager", "taskmanager")) {
      Map<String, String> config = flinkConfig(name).toMap();
      String reporter = config.entrySet().stream()
          .filter(e -> e.getKey().matches("metrics\\.reporter\\.[^.]+\\.factory\\.class") && e.getValue().equals(PROMETHEUS_FACTORY))
          .map(e -> e.getKey().split("\\.")[2]).findFirst().orElse(null);
      assertThat(reporter).as("%s has a metrics.reporter.NAME.factory.class: %s", name, PROMETHEUS_FACTORY).isNotNull();
      String port = config.getOrDefault("metrics.reporter." + reporter + ".port", "9249");
      assertThat(port).as("metrics.reporter.%s.port of %s is one port (publishable)", reporter, name).matches("\\d+");
      assertThat(containerPorts(name)).as("%s publishes its Prometheus port %s", name, port).contains(Integer.parseInt(port));
    }
  }

  @Test
  void theReadyProbeIsAsFreshAsOnTheEmbeddedCluster() {
    // The REST API serves metrics as they were at its last fetch: ready lags the index by as much.
    assertThat(flinkConfig("jobmanager").get(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL))
        .as("metrics.fetcher.update-interval of the jobmanager").isLessThanOrEqualTo(GeofenceCommand.READY_FRESHNESS);
  }

  @Test
  void flinkLogsNeverCarryThePassword() throws IOException {
    for (String name : List.of("jobmanager", "taskmanager")) {
      Path file = hostPath(name, "/opt/flink/conf/log4j-console.properties");
      assertThat(file).as("%s mounts its own conf/log4j-console.properties", name).isNotNull().isRegularFile();
      Properties log4j = new Properties();
      try (Reader reader = Files.newBufferedReader(file)) {
        log4j.load(reader);
      }
      String level = log4j.stringPropertyNames().stream()
          .filter(key -> key.matches("logger\\.[^.]+\\.name") && log4j.getProperty(key).strip().equals(CDC_CONFIG_LOGGER))
          .map(key -> log4j.getProperty(key.replaceFirst("\\.name$", ".level"), "").strip().toUpperCase())
          .findFirst().orElse(null);
      assertThat(level).as("%s sets the level of %s, which logs the database password at INFO", file, CDC_CONFIG_LOGGER)
          .isIn("WARN", "ERROR", "FATAL", "OFF");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The job

  @Test
  void theSubmittedOptionsAreTheJobs() {
    JobArgs job = submitArgs();
    assertThat(job.jar()).as("the job jar the submit service runs is mounted from ../job/target/geofence-job.jar")
        .isEqualTo(docker.resolve("../job/target/geofence-job.jar").normalize());
    assertThat(job.options().get(GeofenceOptions.FROM_SAVEPOINT))
        .as("--from-savepoint is for java -jar; a restore on the cluster is flink run -s (GEOFENCE_RESTORE_FROM)").isNull();
    int parallelism = job.options().getOptional(GeofenceOptions.PARALLELISM).orElse(1);
    Configuration tm = flinkConfig("taskmanager");
    assertThat(tm.get(TaskManagerOptions.NUM_TASK_SLOTS)).as("slots of the one taskmanager vs the job's --parallelism")
        .isGreaterThanOrEqualTo(parallelism);
    List<String> sh = command(service("submit").get("command"));
    assertThat(sh.subList(0, 2)).as("the submit service runs submit.sh").containsExactly("bash", "/opt/geofence/submit.sh");
    assertThat(hostPath("submit", "/opt/geofence/submit.sh")).as("submit.sh is mounted").isRegularFile();
  }

  @Test
  void theDatabaseAgreesWithTheJobAndTheMigrations() throws IOException {
    JobArgs job = submitArgs();
    Map<String, String> postgres = environment("postgres");
    Jdbc source = Jdbc.parse(job.options().get(GeofenceOptions.SOURCE_URL), "--source-url");
    assertThat(source.host()).as("host of --source-url vs the database service").isEqualTo("postgres");
    assertThat(source.port()).as("port of --source-url vs the postgres server's port").isEqualTo(postgresPort());
    assertThat(source.database()).as("database of --source-url vs POSTGRES_DB").isEqualTo(postgres.get("POSTGRES_DB"));
    String sinkUrl = job.options().get(GeofenceOptions.SINK_URL);
    if (sinkUrl != null) {
      assertThat(Jdbc.parse(sinkUrl, "--sink-url")).as("--sink-url vs --source-url").isEqualTo(source);
    }
    assertThat(job.options().get(GeofenceOptions.SOURCE_USER)).as("--source-user vs the job's role in geofence-role.sql")
        .isEqualTo(jobRole());

    Map<String, String> server = new HashMap<>();
    List<String> command = command(service("postgres").get("command"));
    for (int i = 0; i + 1 < command.size(); i++) {
      if (command.get(i).equals("-c")) {
        String[] setting = command.get(i + 1).split("=", 2);
        server.put(setting[0], setting[1]);
      }
    }
    assertThat(server.get("wal_level")).as("wal_level of the postgres command (Flink CDC needs logical decoding)").isEqualTo("logical");
    assertThat(Integer.parseInt(server.getOrDefault("max_replication_slots", "10"))).as("max_replication_slots").isPositive();
    assertThat(Integer.parseInt(server.getOrDefault("max_wal_senders", "10"))).as("max_wal_senders").isPositive();

    String versioning = Files.readString(docker.resolve("sql/source/fence-versioning.sql"));
    assertThat(job.options().get(GeofenceOptions.PUBLICATION))
        .as("the job's publication (--publication, or its default) vs the one fence-versioning.sql creates")
        .isEqualTo(firstGroup("publication name DEFAULT '(\\w+)'", versioning, "the publication geofence_versioning creates by default"));
    assertThat(job.options().get(GeofenceOptions.SLOT))
        .as("the job's replication slot (--slot, or its default) must be a PostgreSQL slot name").matches("[a-z0-9_]{1,63}");
  }

  @Test
  void theInitScriptAppliesTheMigrationsInOrderAndSetsThePasswords() throws IOException {
    Mount init = mounts("postgres").stream().filter(m -> m.target().startsWith("/docker-entrypoint-initdb.d/"))
        .findFirst().orElse(null);
    assertThat(init).as("postgres mounts an init script into /docker-entrypoint-initdb.d").isNotNull();
    assertThat(init.target()).as("the init script's name sorts after the image's 10_postgis.sh").matches(".*/[2-9]\\d[-_][^/]*\\.sh");
    Path script = docker.resolve(init.source()).normalize();
    String text = Files.readString(script);
    String sqlDir = firstGroup("(?m)^sql=(\\S+)$", text, "the init script's sql= directory");
    List<String> applied = new ArrayList<>();
    Matcher files = Pattern.compile("-f \"\\$sql/([^\"]+)\"").matcher(text);
    while (files.find()) {
      applied.add(files.group(1));
      Path host = hostPath("postgres", sqlDir + "/" + files.group(1));
      assertThat(host).as("the init script applies %s/%s, which postgres does not mount from an existing file", sqlDir,
          files.group(1)).isNotNull().isRegularFile();
    }
    assertThat(applied).as("migrations the init script applies, in order (the files' comments require this order)")
        .isEqualTo(MIGRATION_ORDER);
    Map<String, String> passwords = Map.of(jobRole(), GeofenceOptions.PASSWORD_ENV, readerRole(), "GEOFENCE_READER_PASSWORD");
    Map<String, String> postgres = rawEnvironment("postgres");
    passwords.forEach((role, variable) -> {
      Matcher getenv = Pattern.compile("\\\\getenv (\\w+) " + variable + "\\b").matcher(text);
      assertThat(getenv.find()).as("the init script reads %s with psql's \\getenv", variable).isTrue();
      assertThat(text).as("the init script sets the password of %s from %s", role, variable)
          .contains("ALTER ROLE " + role + " PASSWORD :'" + getenv.group(1) + "'");
      assertThat(postgres.get(variable)).as("postgres gets %s from the variable of that name (.env or environment)", variable)
          .matches("\\$\\{" + variable + "(:?[?\\-][^}]*)?}");
    });
    assertThat(Files.isExecutable(script)).as("%s is executable (else the image sources it into its own shell)", script).isTrue();
  }

  @Test
  void kafkaAgreesWithTheJobAndFitsExactlyOnce() {
    JobArgs job = submitArgs();
    String bootstrap = internalBootstrap();
    Set<String> topics = createdTopics();
    String locations = job.options().get(GeofenceOptions.LOCATIONS);
    assertThat(locations).as("--locations reads Kafka").startsWith("kafka:");
    String[] spec = splitTopic(locations.substring("kafka:".length()), "--locations");
    assertThat(spec[0]).as("bootstrap of --locations vs kafka's internal advertised listener").isEqualTo(bootstrap);
    assertThat(topics).as("topics kafka-topics creates (auto-creation is off) vs --locations").contains(spec[1]);

    String triggers = job.options().get(GeofenceOptions.TRIGGERS_TOPIC);
    assertThat(triggers).as("the job writes its triggers to Kafka too (--triggers-topic)").isNotNull();
    spec = splitTopic(triggers, "--triggers-topic");
    assertThat(spec[0]).as("bootstrap of --triggers-topic vs kafka's internal advertised listener").isEqualTo(bootstrap);
    assertThat(topics).as("topics kafka-topics creates vs --triggers-topic").contains(spec[1]);

    // A single broker: the internal topics must do with one replica, or transactions (the
    // exactly-once sink) and consumer groups never start.
    Map<String, String> kafka = environment("kafka");
    for (String key : List.of("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR")) {
      assertThat(kafka.get(key)).as("%s of the single kafka broker (Kafka's default needs 3 brokers)", key).isEqualTo("1");
    }
    long maxTimeout = Long.parseLong(kafka.getOrDefault("KAFKA_TRANSACTION_MAX_TIMEOUT_MS", "" + KAFKA_DEFAULT_TRANSACTION_MAX_TIMEOUT_MS));
    assertThat(maxTimeout).as("the broker's transaction.max.timeout.ms vs the job's Kafka transaction timeout")
        .isGreaterThanOrEqualTo(KafkaOutputs.DEFAULT_TRANSACTION_TIMEOUT.toMillis());
    String controller = kafka.get("KAFKA_CONTROLLER_LISTENER_NAMES");
    String voters = kafka.get("KAFKA_CONTROLLER_QUORUM_VOTERS");
    assertThat(voters).as("KAFKA_CONTROLLER_QUORUM_VOTERS names this node and its controller listener")
        .isEqualTo(kafka.get("KAFKA_NODE_ID") + "@kafka:" + listeners(kafka.get("KAFKA_LISTENERS")).get(controller).split(":")[1]);
    assertThat(dependsOn("submit")).as("submit waits for the topics")
        .containsEntry("kafka-topics", "service_completed_successfully");
  }

  @Test
  void theSqlClientHasItsConnectorsAndTheDdlAgrees() throws IOException {
    List<String> command = command(service("sql-client").get("command"));
    int library = command.indexOf("-l");
    int init = command.indexOf("-i");
    assertThat(library).as("the sql-client gets its connector jars with -l DIR (shipped with each query's job)").isPositive();
    assertThat(init).as("the sql-client initialises its session with -i DDL").isPositive();
    Path lib = hostPath("sql-client", command.get(library + 1));
    assertThat(lib).as("the sql-client's -l %s is mounted from the host", command.get(library + 1)).isNotNull().isDirectory();
    List<String> jars;
    try (var files = Files.list(lib)) {
      jars = files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".jar")).toList();
    }
    for (String jar : List.of("flink-connector-kafka-", "kafka-clients-", "flink-connector-jdbc-", "postgresql-")) {
      assertThat(jars).as("jars in %s (mvn package copies them there)", lib).anyMatch(n -> n.startsWith(jar));
    }
    Path ddl = hostPath("sql-client", command.get(init + 1));
    assertThat(ddl).as("the sql-client's -i %s is mounted from an existing file", command.get(init + 1)).isNotNull().isRegularFile();

    JobArgs job = submitArgs();
    Jdbc database = Jdbc.parse(job.options().get(GeofenceOptions.SOURCE_URL), "--source-url");
    String bootstrap = internalBootstrap();
    Set<String> topics = createdTopics();
    String triggersTopic = splitTopic(job.options().get(GeofenceOptions.TRIGGERS_TOPIC), "--triggers-topic")[1];
    String readerPassword = dotEnv.get("GEOFENCE_READER_PASSWORD");
    Map<String, Map<String, String>> tables = ddlTables(Files.readString(ddl));
    assertThat(tables).as("CREATE TABLE statements of %s", ddl).isNotEmpty();
    for (Map.Entry<String, Map<String, String>> table : tables.entrySet()) {
      Map<String, String> with = table.getValue();
      String name = table.getKey();
      switch (with.getOrDefault("connector", "")) {
        case "jdbc" -> {
          assertThat(Jdbc.parse(with.get("url"), "'url' of " + name)).as("'url' of DDL table %s vs the job's database", name)
              .isEqualTo(database);
          assertThat(with.get("username")).as("'username' of DDL table %s vs the read-only role of geofence-role.sql", name)
              .isEqualTo(readerRole());
          assertThat(with.get("password")).as("'password' of DDL table %s vs GEOFENCE_READER_PASSWORD of docker/.env, which the "
              + "init script gives %s", name, readerRole()).isEqualTo(readerPassword);
        }
        case "kafka" -> {
          assertThat(with.get("properties.bootstrap.servers")).as("'properties.bootstrap.servers' of DDL table %s vs kafka's "
              + "internal advertised listener", name).isEqualTo(bootstrap);
          assertThat(topics).as("topics kafka-topics creates vs 'topic' of DDL table %s", name).contains(with.get("topic"));
          if (with.get("topic").equals(triggersTopic)) {
            assertThat(with.get("properties.isolation.level")).as("DDL table %s reads the exactly-once triggers topic; only "
                + "read_committed sees each trigger once", name).isEqualTo("read_committed");
          }
        }
        default -> fail("DDL table %s has connector '%s', which the sql-client has no jar for", name, with.get("connector"));
      }
    }
  }

  @Test
  void passwordsStayOffCommandLines() throws IOException {
    Map<String, String> passwords = new LinkedHashMap<>();
    dotEnv.forEach((key, value) -> {
      if (key.contains("PASSWORD")) {
        passwords.put(key, value);
      }
    });
    assertThat(passwords).as("passwords in docker/.env").containsKeys("POSTGRES_PASSWORD", GeofenceOptions.PASSWORD_ENV,
        "GEOFENCE_READER_PASSWORD");
    passwords.forEach((key, value) -> assertThat(value).as("%s in docker/.env is an obvious development default", key)
        .contains("dev-only"));

    for (String name : services().keySet()) {
      Map<String, Object> rawService = map(map(raw.get("services"), "services").get(name), name);
      List<String> lines = new ArrayList<>();
      lines.addAll(command(rawService.get("command")));
      lines.addAll(command(rawService.get("entrypoint")));
      if (rawService.get("healthcheck") != null) {
        lines.addAll(command(map(rawService.get("healthcheck"), name).get("test")));
      }
      // The image's entrypoint passes FLINK_PROPERTIES as -D arguments.
      String properties = rawEnvironment(name).get("FLINK_PROPERTIES");
      if (properties != null) {
        lines.add(properties);
      }
      for (String line : lines) {
        assertThat(line).as("a command line of service %s names a password", name).doesNotContainIgnoringCase("password");
        String interpolated = (String) interpolate(line, name);
        passwords.forEach((key, value) -> assertThat(interpolated).as("a command line of service %s holds the value of %s", name, key)
            .doesNotContain(value));
      }
    }
    // The job reads its password from the environment, from the variable the database's role got.
    assertThat(rawEnvironment("submit").get(GeofenceOptions.PASSWORD_ENV))
        .as("%s of the submit service comes from the variable of that name", GeofenceOptions.PASSWORD_ENV)
        .matches("\\$\\{" + GeofenceOptions.PASSWORD_ENV + "(:?[?\\-][^}]*)?}");
    // Scripts the containers run expand a password only in shell builtins, never in a command's arguments.
    for (String[] script : List.of(new String[] {"submit", "/opt/geofence/submit.sh"},
        new String[] {"postgres", mounts("postgres").stream().map(Mount::target)
            .filter(t -> t.startsWith("/docker-entrypoint-initdb.d/")).findFirst().orElseThrow()})) {
      Path file = hostPath(script[0], script[1]);
      for (String line : Files.readAllLines(file)) {
        String code = line.strip();
        // $PASSWORD_VARIABLE, ${..PASSWORD..}, or an indirect ${!name}
        if (code.startsWith("#") || !Pattern.compile("\\$\\{?(!\\w+|\\w*PASSWORD)").matcher(code).find()) {
          continue;
        }
        assertThat(code).as("%s expands a password outside a shell builtin: %s", file, code).matches("(if )?\\[ .*");
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // What the services say, read as Compose and the images read it

  private static Map<String, Map<String, Object>> services() {
    Map<String, Map<String, Object>> services = new LinkedHashMap<>();
    map(compose.get("services"), "services").forEach((name, service) -> services.put(name, map(service, "service " + name)));
    return services;
  }

  private static Map<String, Object> service(String name) {
    Map<String, Map<String, Object>> services = services();
    assertThat(services).as("services of compose.yaml").containsKey(name);
    return services.get(name);
  }

  /** The job's command line of the submit service: flink options before the jar, the job's after "run". */
  private static JobArgs submitArgs() {
    List<String> command = command(service("submit").get("command"));
    int jar = -1;
    for (int i = 0; i < command.size(); i++) {
      if (command.get(i).endsWith(".jar")) {
        jar = i;
        break;
      }
    }
    assertThat(jar).as("the submit command names the job jar").isNotNegative();
    assertThat(command.get(jar + 1)).as("the job's command after the jar").isEqualTo("run");
    String[] jobArgs = command.subList(jar + 2, command.size()).toArray(String[]::new);
    assertThatCode(() -> GeofenceCommand.RUN.parse(jobArgs, 0)).as("the job's own option parser accepts the submit service's options "
        + String.join(" ", jobArgs)).doesNotThrowAnyException();
    Path host = hostPath("submit", command.get(jar));
    assertThat(host).as("the submit service mounts the jar %s", command.get(jar)).isNotNull();
    return new JobArgs(command.subList(0, jar), host, GeofenceCommand.RUN.parse(jobArgs, 0));
  }

  /** The submit service's command: Flink's options, the jar, and what the job's options set. */
  private record JobArgs(List<String> flinkArgs, Path jar, Configuration options) {
    String flinkOption(String option) {
      int i = flinkArgs.indexOf(option);
      return i < 0 || i + 1 >= flinkArgs.size() ? null : flinkArgs.get(i + 1);
    }
  }

  private record Jdbc(String host, int port, String database) {
    static Jdbc parse(String url, String what) {
      Matcher m = Pattern.compile("jdbc:postgresql://([^:/]+)(?::(\\d+))?/([^?]+)(\\?.*)?").matcher(url == null ? "" : url);
      assertThat(m.matches()).as("%s is jdbc:postgresql://host[:port]/database, got %s", what, url).isTrue();
      return new Jdbc(m.group(1), m.group(2) == null ? 5432 : Integer.parseInt(m.group(2)), m.group(3));
    }
  }

  private static int postgresPort() {
    List<String> command = command(service("postgres").get("command"));
    for (int i = 0; i + 1 < command.size(); i++) {
      if (command.get(i).equals("-c") && command.get(i + 1).startsWith("port=")) {
        return Integer.parseInt(command.get(i + 1).substring(5));
      }
    }
    return 5432;
  }

  /** host:port of the listener the brokers (and so the containers) use, as kafka advertises it. */
  private static String internalBootstrap() {
    Map<String, String> kafka = environment("kafka");
    String name = kafka.getOrDefault("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT");
    String advertised = listeners(kafka.get("KAFKA_ADVERTISED_LISTENERS")).get(name);
    assertThat(advertised).as("KAFKA_ADVERTISED_LISTENERS has the inter-broker listener %s", name).isNotNull();
    assertThat(advertised).as("the advertised internal listener's host is the kafka service").startsWith("kafka:");
    String bound = listeners(kafka.get("KAFKA_LISTENERS")).get(name);
    assertThat(bound).as("KAFKA_LISTENERS binds the listener %s", name).isNotNull();
    assertThat(bound.substring(bound.lastIndexOf(':'))).as("port kafka binds %s to vs the port it advertises", name)
        .isEqualTo(advertised.substring(advertised.lastIndexOf(':')));
    return advertised;
  }

  private static Map<String, String> listeners(String spec) {
    Map<String, String> listeners = new LinkedHashMap<>();
    if (spec != null) {
      for (String listener : spec.split(",")) {
        String[] parts = listener.strip().split("://", 2);
        listeners.put(parts[0], parts[1]);
      }
    }
    return listeners;
  }

  /** The topics the kafka-topics service creates, each against the internal listener. */
  private static Set<String> createdTopics() {
    String script = String.join("\n", command(service("kafka-topics").get("command")));
    Set<String> topics = new LinkedHashSet<>();
    for (String line : script.split("\n")) {
      if (line.contains("--create")) {
        topics.add(firstGroup("--topic (\\S+)", line, "the topic of " + line));
        assertThat(firstGroup("--bootstrap-server (\\S+)", line, "the bootstrap of " + line))
            .as("kafka-topics creates %s through the internal listener", line).isEqualTo(internalBootstrap());
        assertThat(Integer.parseInt(firstGroup("--replication-factor (\\d+)", line, "the replication factor of " + line)))
            .as("replication factor of a topic on one broker: %s", line).isEqualTo(1);
      }
    }
    assertThat(environment("kafka").get("KAFKA_AUTO_CREATE_TOPICS_ENABLE")).as("kafka creates no topic by itself").isEqualTo("false");
    return topics;
  }

  private static String[] splitTopic(String spec, String what) {
    int slash = spec.indexOf('/');
    assertThat(slash > 0 && slash < spec.length() - 1).as("%s is BOOTSTRAP/TOPIC, got %s", what, spec).isTrue();
    return new String[] {spec.substring(0, slash), spec.substring(slash + 1)};
  }

  /** Each CREATE TABLE of a DDL file with its WITH options. */
  private static Map<String, Map<String, String>> ddlTables(String ddl) {
    String code = ddl.replaceAll("(?m)--.*$", "");
    Map<String, Map<String, String>> tables = new LinkedHashMap<>();
    for (String statement : code.split(";")) {
      Matcher create = Pattern.compile("(?is)^\\s*CREATE\\s+(?:TEMPORARY\\s+)?TABLE\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?`?([\\w.]+)`?")
          .matcher(statement);
      if (!create.find()) {
        continue;
      }
      Matcher with = Pattern.compile("(?is)\\)\\s*WITH\\s*\\((.*)\\)\\s*$").matcher(statement);
      assertThat(with.find()).as("CREATE TABLE %s has WITH (...) options", create.group(1)).isTrue();
      Map<String, String> options = new LinkedHashMap<>();
      Matcher option = Pattern.compile("'([^']+)'\\s*=\\s*'((?:[^']|'')*)'").matcher(with.group(1));
      while (option.find()) {
        options.put(option.group(1), option.group(2).replace("''", "'"));
      }
      tables.put(create.group(1), options);
    }
    return tables;
  }

  /** The Flink configuration a service's FLINK_PROPERTIES makes, parsed as the image's entrypoint does. */
  private static Configuration flinkConfig(String name) {
    String properties = environment(name).get("FLINK_PROPERTIES");
    assertThat(properties).as("FLINK_PROPERTIES of service %s", name).isNotNull();
    Map<String, String> values = new LinkedHashMap<>();
    for (String line : properties.split("\n")) {
      String stripped = line.replaceAll("\\s", "");
      if (!stripped.isEmpty()) {
        int colon = stripped.indexOf(':');
        values.put(stripped.substring(0, colon), stripped.substring(colon + 1));
      }
    }
    return Configuration.fromMap(values);
  }

  private static Map<String, String> environment(String name) {
    return environmentOf(service(name), name);
  }

  private static Map<String, String> rawEnvironment(String name) {
    return environmentOf(map(map(raw.get("services"), "services").get(name), name), name);
  }

  private static Map<String, String> environmentOf(Map<String, Object> service, String name) {
    Map<String, String> environment = new LinkedHashMap<>();
    Object value = service.get("environment");
    if (value instanceof Map<?, ?> values) {
      values.forEach((k, v) -> environment.put(String.valueOf(k), v == null ? null : String.valueOf(v)));
    } else if (value instanceof List<?> entries) {
      for (Object entry : entries) {
        String[] kv = String.valueOf(entry).split("=", 2);
        environment.put(kv[0], kv.length > 1 ? kv[1] : null);
      }
    } else if (value != null) {
      fail("environment of service %s is neither a mapping nor a list", name);
    }
    return environment;
  }

  private static Map<String, String> dependsOn(String name) {
    Map<String, String> dependencies = new LinkedHashMap<>();
    Object value = service(name).get("depends_on");
    if (value instanceof List<?> list) {
      list.forEach(d -> dependencies.put(String.valueOf(d), "service_started"));
    } else if (value instanceof Map<?, ?> values) {
      values.forEach((d, spec) -> dependencies.put(String.valueOf(d),
          spec instanceof Map<?, ?> m && m.get("condition") != null ? String.valueOf(m.get("condition")) : "service_started"));
    }
    return dependencies;
  }

  private static List<String> healthcheck(String name) {
    return command(map(service(name).get("healthcheck"), "healthcheck of " + name).get("test"));
  }

  /** A command, entrypoint or healthcheck test as a list of arguments. */
  private static List<String> command(Object value) {
    if (value == null) {
      return List.of();
    }
    if (value instanceof List<?> list) {
      return list.stream().map(String::valueOf).toList();
    }
    return List.of(String.valueOf(value).strip().split("\\s+"));
  }

  private record Mount(String source, String target, boolean bind) {}

  private static List<Mount> mounts(String name) {
    List<Mount> mounts = new ArrayList<>();
    Object value = service(name).get("volumes");
    if (value == null) {
      return mounts;
    }
    for (Object entry : (List<?>) value) {
      if (entry instanceof Map<?, ?> spec) {
        String source = String.valueOf(spec.get("source"));
        mounts.add(new Mount(source, String.valueOf(spec.get("target")), "bind".equals(spec.get("type"))));
      } else {
        String[] parts = String.valueOf(entry).split(":");
        assertThat(parts.length).as("volume '%s' of service %s is SOURCE:TARGET[:MODE]", entry, name).isBetween(2, 3);
        boolean bind = parts[0].startsWith(".") || parts[0].startsWith("/") || parts[0].startsWith("~");
        mounts.add(new Mount(parts[0], parts[1], bind));
      }
    }
    return mounts;
  }

  /** The mount of a service that holds a container path (the longest target that is a prefix). */
  private static Mount mountFor(String name, String containerPath) {
    Mount best = null;
    for (Mount mount : mounts(name)) {
      String target = mount.target().endsWith("/") ? mount.target() : mount.target() + "/";
      if ((containerPath.equals(mount.target()) || containerPath.startsWith(target))
          && (best == null || mount.target().length() > best.target().length())) {
        best = mount;
      }
    }
    return best;
  }

  /** Where a container path of a service comes from on this machine, or null if not bind-mounted. */
  private static Path hostPath(String name, String containerPath) {
    Mount mount = mountFor(name, containerPath);
    if (mount == null || !mount.bind()) {
      return null;
    }
    String rest = containerPath.substring(mount.target().length()).replaceFirst("^/", "");
    Path source = docker.resolve(mount.source()).normalize();
    return rest.isEmpty() ? source : source.resolve(rest);
  }

  private record Port(String hostIp, Integer host, int container) {}

  private static List<Port> ports(String name) {
    List<Port> ports = new ArrayList<>();
    Object value = service(name).get("ports");
    if (value == null) {
      return ports;
    }
    for (Object entry : (List<?>) value) {
      if (entry instanceof Map<?, ?> spec) {
        Object published = spec.get("published");
        ports.add(new Port(spec.get("host_ip") == null ? "0.0.0.0" : String.valueOf(spec.get("host_ip")),
            published == null ? null : Integer.valueOf(String.valueOf(published)), Integer.parseInt(String.valueOf(spec.get("target")))));
        continue;
      }
      assertThat(entry).as("port '%s' of service %s is a quoted string (YAML 1.1 reads 80:80 as a number)", entry, name)
          .isInstanceOf(String.class);
      String[] parts = ((String) entry).replaceFirst("/(tcp|udp)$", "").split(":");
      int container = Integer.parseInt(parts[parts.length - 1]);
      Integer host = parts.length >= 2 ? Integer.valueOf(parts[parts.length - 2]) : null;
      ports.add(new Port(parts.length == 3 ? parts[0] : "0.0.0.0", host, container));
    }
    return ports;
  }

  private static List<Integer> containerPorts(String name) {
    return ports(name).stream().map(Port::container).toList();
  }

  // ---------------------------------------------------------------------------------------------
  // The job's own definitions, from the job module on the class path

  /** The role geofence-role.sql makes for the job, and the one for the readers of the outputs. */
  private static String jobRole() {
    return firstGroup("CREATE ROLE (\\w+) LOGIN REPLICATION;", roleSql(), "the job's role in geofence-role.sql");
  }

  private static String readerRole() {
    return firstGroup("CREATE ROLE (\\w+) LOGIN;", roleSql(), "the read-only role in geofence-role.sql");
  }

  private static String roleSql() {
    try {
      return Files.readString(docker.resolve("sql/source/geofence-role.sql"));
    } catch (IOException e) {
      throw new AssertionError("cannot read sql/source/geofence-role.sql", e);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Compose's interpolation and .env

  private static Map<String, String> readDotEnv(Path file) throws IOException {
    assertThat(file).as("docker/.env with the development defaults").isRegularFile();
    Map<String, String> values = new LinkedHashMap<>();
    for (String line : Files.readAllLines(file)) {
      String stripped = line.strip();
      if (stripped.isEmpty() || stripped.startsWith("#")) {
        continue;
      }
      int eq = stripped.indexOf('=');
      assertThat(eq).as("line of docker/.env is NAME=VALUE: %s", line).isPositive();
      String value = stripped.substring(eq + 1);
      if (value.length() >= 2 && (value.startsWith("\"") && value.endsWith("\"") || value.startsWith("'") && value.endsWith("'"))) {
        value = value.substring(1, value.length() - 1);
      }
      values.put(stripped.substring(0, eq), value);
    }
    return values;
  }

  private static final Pattern VARIABLE = Pattern.compile("\\$(?:\\$|\\{(\\w+)(?:(:?[-?+])([^}]*))?}|(\\w+))");

  /** Compose's ${VAR}, ${VAR:-default}, ${VAR:?error}, ${VAR:+alt}, $VAR and $$, from docker/.env only. */
  private static Object interpolate(Object value, String where) {
    if (value instanceof Map<?, ?> values) {
      Map<String, Object> result = new LinkedHashMap<>();
      values.forEach((k, v) -> result.put(String.valueOf(k), interpolate(v, where + "." + k)));
      return result;
    }
    if (value instanceof List<?> list) {
      List<Object> result = new ArrayList<>();
      list.forEach(v -> result.add(interpolate(v, where)));
      return result;
    }
    if (!(value instanceof String text)) {
      return value;
    }
    Matcher m = VARIABLE.matcher(text);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String replacement;
      if (m.group().equals("$$")) {
        replacement = "$";
      } else {
        String name = m.group(1) != null ? m.group(1) : m.group(4);
        String set = dotEnv.get(name);
        String operator = m.group(2) == null ? "" : m.group(2);
        boolean present = operator.startsWith(":") ? set != null && !set.isEmpty() : set != null;
        switch (operator) {
          case ":-", "-" -> replacement = present ? set : m.group(3);
          case ":?", "?" -> {
            assertThat(present).as("%s needs %s: %s (not in docker/.env)", where, name, m.group(3)).isTrue();
            replacement = set;
          }
          case ":+", "+" -> replacement = present ? m.group(3) : "";
          default -> replacement = set == null ? "" : set;
        }
      }
      m.appendReplacement(out, Matcher.quoteReplacement(replacement));
    }
    m.appendTail(out);
    return out.toString();
  }

  // ---------------------------------------------------------------------------------------------

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object value, String what) {
    assertThat(value).as("%s is a mapping", what).isInstanceOf(Map.class);
    return (Map<String, Object>) value;
  }

  private static String firstGroup(String regex, String text, String what) {
    Matcher m = Pattern.compile(regex).matcher(text);
    assertThat(m.find()).as("%s (pattern %s)", what, regex).isTrue();
    return m.group(1);
  }

  private static String hint(String source) {
    if (source.contains("job/target")) {
      return "; build the job first: mvn -B -DskipTests package";
    }
    if (source.contains("target/sql-client-lib")) {
      return "; the docker module's build copies the connector jars there (mvn -B -DskipTests package)";
    }
    return "";
  }
}
