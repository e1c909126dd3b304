package dev.geofence.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.job.cli.GeofenceCommand;
import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.util.TimeUtils;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * {@code docker/kubernetes/geofence-bluegreen.yaml} and its {@code Dockerfile}, checked without a
 * cluster: the resource is the operator's {@code FlinkBlueGreenDeployment}, its job is this job's
 * entry class and jar as the image holds them, its arguments are accepted by the job's own parser
 * and turn the slots per savepoint on (without which two colours would read one slot), the
 * savepoints and checkpoints have somewhere to go, and the deletion delay covers the handover the
 * arguments imply. Each assertion says what disagrees with what.
 */
class KubernetesExampleTest {

  /** How far ahead of the writer's clock T can lie (HandoverGate's lease). */
  private static final Duration LEASE_AHEAD = Duration.ofSeconds(10);
  /** What the example allows for the new colour's warm-up, as its comment says. */
  private static final Duration WARM_UP = Duration.ofMinutes(3);

  private static Path kubernetes;
  private static Map<String, Object> resource;
  private static Map<String, Object> spec;

  @BeforeAll
  static void load() throws IOException {
    Path docker = Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath();
    kubernetes = docker.resolve("kubernetes");
    LoaderOptions options = new LoaderOptions();
    options.setAllowDuplicateKeys(false);
    try (Reader reader = Files.newBufferedReader(kubernetes.resolve("geofence-bluegreen.yaml"))) {
      resource = map(new Yaml(new SafeConstructor(options)).load(reader), "geofence-bluegreen.yaml");
    }
    spec = map(map(map(resource.get("spec"), "spec").get("template"), "spec.template").get("spec"), "spec.template.spec");
  }

  @Test
  void itIsTheOperatorsBlueGreenResource() {
    assertThat(resource.get("apiVersion")).isEqualTo("flink.apache.org/v1beta1");
    assertThat(resource.get("kind")).isEqualTo("FlinkBlueGreenDeployment");
    String name = (String) map(resource.get("metadata"), "metadata").get("name");
    assertThat(name.length() + "-green".length()).as("the operator's limit on a colour's FlinkDeployment name").isLessThanOrEqualTo(45);
    assertThat(spec.get("flinkVersion")).isEqualTo("v1_20");
    assertThat(job().get("upgradeMode")).as("the operator takes a savepoint for a transition unless stateless").isEqualTo("savepoint");
  }

  @Test
  void theJobIsTheJarTheImageHolds() throws Exception {
    assertThat(Class.forName((String) job().get("entryClass"))).isEqualTo(GeofenceCommand.class);
    String dockerfile = Files.readString(kubernetes.resolve("Dockerfile"));
    Matcher copy = Pattern.compile("(?m)^COPY (?:--chown=\\S+ )?(\\S+) (\\S+)$").matcher(dockerfile);
    assertThat(copy.find()).as("the Dockerfile copies the job jar").isTrue();
    assertThat(copy.group(1)).isEqualTo("job/target/geofence-job.jar");
    assertThat(job().get("jarURI")).as("the jar the image holds").isEqualTo("local://" + copy.group(2));
    Matcher version = Pattern.compile("<flink\\.version>([^<]+)</flink\\.version>")
        .matcher(Files.readString(kubernetes.resolve("../../pom.xml")));
    assertThat(version.find()).isTrue();
    assertThat(dockerfile).as("the image is the project's Flink version").containsPattern("(?m)^FROM flink:" + Pattern.quote(version.group(1)) + "-");
  }

  @Test
  void theArgumentsAreTheJobsAndTurnTheSlotsPerSavepointOn() {
    Configuration options = arguments();
    assertThat(options.get(GeofenceOptions.SAVEPOINT_SLOTS)).as("--savepoint-slots: else both colours read one slot").isTrue();
    assertThat(options.get(GeofenceOptions.STANDBY)).as("the colours decide from the savepoint, not by --standby").isFalse();
    assertThat(options.getOptional(GeofenceOptions.FROM_SAVEPOINT)).as("the operator gives the savepoint").isEmpty();
    assertThat(String.join(" ", args())).as("no password on a command line").doesNotContainIgnoringCase("password");
    Map<String, String> flink = flinkConfiguration();
    assertThat(flink).containsKeys(CheckpointingOptions.SAVEPOINT_DIRECTORY.key(), CheckpointingOptions.CHECKPOINTS_DIRECTORY.key());
    assertThat(flink.get("kubernetes.operator.savepoint.format.type")).isIn(null, "NATIVE", "CANONICAL");
    assertThat(podEnv()).as("the password comes from a secret").contains(GeofenceOptions.PASSWORD_ENV);
  }

  @Test
  void theDeletionDelayCoversTheHandover() {
    Configuration options = arguments();
    Duration handover = WARM_UP.plus(LEASE_AHEAD).plus(options.get(GeofenceOptions.ALLOWED_LATENESS))
        .plus(options.get(GeofenceOptions.CHECKPOINT_INTERVAL).multipliedBy(2));
    Map<String, Object> configuration = map(map(resource.get("spec"), "spec").get("configuration"), "spec.configuration");
    Duration delay = TimeUtils.parseDuration((String) configuration.get("kubernetes.operator.bluegreen.deployment-deletion.delay"));
    assertThat(delay).as("the old colour must outlive the warm-up and its share before T").isGreaterThanOrEqualTo(handover);
  }

  private static Configuration arguments() {
    List<String> args = args();
    assertThat(args.get(0)).isEqualTo("run");
    String[] options = args.subList(1, args.size()).toArray(String[]::new);
    assertThatCode(() -> GeofenceCommand.RUN.parse(options, 0)).as("the job's parser accepts " + String.join(" ", options))
        .doesNotThrowAnyException();
    return GeofenceCommand.RUN.parse(options, 0);
  }

  @SuppressWarnings("unchecked")
  private static List<String> args() {
    return (List<String>) job().get("args");
  }

  private static Map<String, Object> job() {
    return map(spec.get("job"), "spec.template.spec.job");
  }

  @SuppressWarnings("unchecked")
  private static Map<String, String> flinkConfiguration() {
    return (Map<String, String>) spec.get("flinkConfiguration");
  }

  @SuppressWarnings("unchecked")
  private static String podEnv() {
    List<Map<String, Object>> containers = (List<Map<String, Object>>) map(map(spec.get("podTemplate"), "podTemplate").get("spec"),
        "podTemplate.spec").get("containers");
    return String.valueOf(containers.get(0).get("env"));
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object value, String what) {
    assertThat(value).as("%s must be a mapping", what).isInstanceOf(Map.class);
    return (Map<String, Object>) value;
  }
}
