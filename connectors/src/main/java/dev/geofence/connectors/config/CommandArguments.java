package dev.geofence.connectors.config;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A command's arguments, split as Flink's own CLI splits them: {@code --name value} (or {@code
 * --name=value}) options, {@code --name} switches that take no value, and {@code -Dkey=value} (or
 * {@code -D key=value}) configuration properties. An unknown or repeated option, and an option
 * without its value, fail with one sentence that says what to do.
 *
 * <p>Needs no Flink, so that the job jar's {@code ready} runs in a JVM without it; {@link
 * CommandLine} turns the result into Flink's configuration.
 */
public final class CommandArguments {

  private final Map<String, String> options;
  private final Map<String, String> properties;

  private CommandArguments(Map<String, String> options, Map<String, String> properties) {
    this.options = Collections.unmodifiableMap(options);
    this.properties = Collections.unmodifiableMap(properties);
  }

  /**
   * Splits {@code args} from index {@code from} on.
   *
   * @param names the options that take a value, without the leading dashes; a name ending in '.'
   *     accepts any suffix (a family such as {@code debezium.})
   * @param switches the options that take no value; a switch given is "true"
   */
  public static CommandArguments parse(String[] args, int from, Set<String> names, Set<String> switches) {
    Map<String, String> options = new LinkedHashMap<>();
    Map<String, String> properties = new LinkedHashMap<>();
    for (int i = from; i < args.length; i++) {
      String arg = args[i];
      if (arg.startsWith("-D")) {
        String property = arg.length() > 2 ? arg.substring(2) : i + 1 < args.length ? args[++i] : "";
        int eq = property.indexOf('=');
        if (eq <= 0) {
          throw new IllegalArgumentException("-D needs KEY=VALUE, got '" + arg + (arg.length() > 2 ? "" : " " + property) + "'");
        }
        String key = property.substring(0, eq);
        if (properties.put(key, property.substring(eq + 1)) != null) {
          throw new IllegalArgumentException("-D" + key + " is given twice");
        }
        continue;
      }
      if (!arg.startsWith("--") || arg.length() == 2) {
        throw new IllegalArgumentException("unexpected argument '" + arg + "'; options look like --name value (see --help)");
      }
      String name = arg.substring(2);
      String value = null;
      int eq = name.indexOf('=');
      if (eq > 0) {
        value = name.substring(eq + 1);
        name = name.substring(0, eq);
      }
      if (switches.contains(name)) {
        value = value == null ? "true" : value;
      } else if (!isKnown(name, names)) {
        throw new IllegalArgumentException("unknown option --" + name + " (see --help)");
      } else if (value == null) {
        if (i + 1 >= args.length || args[i + 1].startsWith("--")) {
          throw new IllegalArgumentException("option --" + name + " needs a value");
        }
        value = args[++i];
      }
      if (options.put(name, value) != null) {
        throw new IllegalArgumentException("option --" + name + " is given twice");
      }
    }
    return new CommandArguments(options, properties);
  }

  private static boolean isKnown(String name, Set<String> names) {
    if (names.contains(name)) {
      return true;
    }
    for (String family : names) {
      if (family.endsWith(".") && name.startsWith(family) && name.length() > family.length()) {
        return true;
      }
    }
    return false;
  }

  /** The options given, by name without dashes, in order. */
  public Map<String, String> options() {
    return options;
  }

  /** The {@code -D} properties given, in order. */
  public Map<String, String> properties() {
    return properties;
  }

  /** Where a help entry's text starts: after the flag and its argument. */
  private static final int HELP_INDENT = 32;
  private static final int HELP_WIDTH = 100;

  /**
   * A help entry: {@code usage} (the flag as written, e.g. {@code --source-url URL}) and its {@code
   * text} beside it, wrapped to the help's width (below it when the flag is long), then {@code
   * last} (if not null) on a line of its own, unwrapped.
   */
  public static List<String> helpEntry(String usage, String text, String last) {
    List<String> wrapped = new ArrayList<>();
    StringBuilder line = new StringBuilder();
    for (String word : text.split(" ")) {
      if (line.length() > 0 && line.length() + 1 + word.length() > HELP_WIDTH - HELP_INDENT) {
        wrapped.add(line.toString());
        line.setLength(0);
      }
      line.append(line.length() == 0 ? "" : " ").append(word);
    }
    wrapped.add(line.toString());
    String indent = " ".repeat(HELP_INDENT);
    List<String> lines = new ArrayList<>();
    String first = "  " + usage;
    if (first.length() < HELP_INDENT - 1) {
      lines.add(first + " ".repeat(HELP_INDENT - first.length()) + wrapped.get(0));
    } else {
      lines.add(first);
      lines.add(indent + wrapped.get(0));
    }
    wrapped.subList(1, wrapped.size()).forEach(w -> lines.add(indent + w));
    if (last != null) {
      lines.add(indent + last);
    }
    return lines;
  }
}
