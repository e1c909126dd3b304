package dev.geofence.connectors.config;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ReadableConfig;

/**
 * A command's flags, and the Flink {@link Configuration} they set. {@link #parse} turns {@code
 * --flag value} into the flag's option key and passes {@code -Dkey=value} on as is, as Flink's own
 * CLI does with its dynamic properties; the options are then read, typed, through {@link #get}
 * and {@link #required}, from that configuration merged over the cluster's (the {@code config.yaml}
 * a {@code flink run} client loaded), so that every flag's key works in all three places. A bad
 * value fails with one sentence naming the flag; so does a key of this command's sections (such as
 * {@code geofence.source.}) that no flag declares, which is a typo. The help text is generated from
 * the flags and their options. Immutable.
 */
public final class CommandLine {

  private final List<Flag> flags;
  private final Map<String, Flag> byKey = new LinkedHashMap<>();

  public CommandLine(List<Flag> flags) {
    this.flags = List.copyOf(flags);
    for (Flag flag : this.flags) {
      if (byKey.put(flag.key(), flag) != null) {
        throw new IllegalArgumentException("two flags set " + flag.key());
      }
    }
  }

  public List<Flag> flags() {
    return flags;
  }

  /**
   * Parses {@code args} from {@code from} on into the configuration they set.
   *
   * @throws IllegalArgumentException in one sentence: an unknown flag or key, a missing value, an
   *     option given twice (also as a flag and as its key)
   */
  public Configuration parse(String[] args, int from) {
    Set<String> names = new TreeSet<>();
    Set<String> switches = new TreeSet<>();
    for (Flag flag : flags) {
      (flag.kind() == Flag.Kind.SWITCH ? switches : names).add(flag.name());
    }
    CommandArguments given = CommandArguments.parse(args, from, names, switches);
    Map<String, String> values = new LinkedHashMap<>();
    given.options().forEach((name, value) -> values.put(keyOf(name), value));
    given.properties().forEach((key, value) -> {
      if (values.put(key, value) != null) {
        throw new IllegalArgumentException("option " + describe(key) + " is given twice (also as -D" + key + ")");
      }
    });
    Configuration configuration = Configuration.fromMap(values);
    checkKnown(configuration);
    return configuration;
  }

  private String keyOf(String name) {
    for (Flag flag : flags) {
      if (flag.kind() == Flag.Kind.FAMILY ? name.startsWith(flag.name()) : name.equals(flag.name())) {
        return flag.kind() == Flag.Kind.FAMILY ? flag.key() + name.substring(flag.name().length()) : flag.key();
      }
    }
    throw new IllegalStateException("no flag --" + name);
  }

  /**
   * Fails on a key of one of this command's sections that no flag declares (a typo in {@code -D}
   * or in {@code config.yaml}). A section is a declared key's prefix up to its second dot, for the
   * project's own {@code geofence.} keys only: Flink's keys are Flink's to check.
   */
  public void checkKnown(ReadableConfig configuration) {
    Set<String> sections = flags.stream().map(Flag::key).filter(k -> k.startsWith("geofence."))
        .map(k -> k.substring(0, k.indexOf('.', "geofence.".length()) + 1)).collect(Collectors.toSet());
    for (String key : configuration.toMap().keySet()) {
      boolean ours = sections.stream().anyMatch(key::startsWith);
      boolean declared = byKey.containsKey(key)
          || flags.stream().anyMatch(f -> f.kind() == Flag.Kind.FAMILY && key.startsWith(f.key()) && key.length() > f.key().length());
      if (ours && !declared) {
        throw new IllegalArgumentException("unknown option " + key + " (see --help)");
      }
    }
  }

  /** The option's value, or its default (null if it has none). */
  public <T> T get(ReadableConfig configuration, ConfigOption<T> option) {
    Flag flag = byKey.get(option.key());
    T value;
    try {
      value = configuration.get(option);
    } catch (IllegalArgumentException e) {
      throw refused(flag, option.key(), configuration.toMap().get(option.key()));
    }
    // Enum options are checked by Flink's parse; a text option with choices here.
    if (flag != null && flag.kind() == Flag.Kind.CHOICE && value instanceof String && !flag.choices().contains(value)) {
      throw refused(flag, option.key(), (String) value);
    }
    return value;
  }

  private IllegalArgumentException refused(Flag flag, String key, String value) {
    return new IllegalArgumentException("option " + describe(key) + " must be " + (flag == null ? "of another form" : flag.expected())
        + ", got '" + value + "'");
  }

  /** The option's value; fails in one sentence when it is not set or blank. */
  public <T> T required(ReadableConfig configuration, ConfigOption<T> option) {
    T value = get(configuration, option);
    if (value == null || value.toString().isBlank()) {
      throw new IllegalArgumentException("option " + describe(option.key()) + " is required (see --help)");
    }
    return value;
  }

  /** The values of the keys under {@code prefix}, by the rest of their key. */
  public static Map<String, String> withPrefix(ReadableConfig configuration, String prefix) {
    Map<String, String> values = new LinkedHashMap<>();
    configuration.toMap().forEach((key, value) -> {
      if (key.startsWith(prefix) && key.length() > prefix.length()) {
        values.put(key.substring(prefix.length()), value);
      }
    });
    return values;
  }

  /**
   * How a message names an option: by its flag and its key (a value may come from either), or by
   * its key alone when this command has no flag for it.
   */
  public String describe(String key) {
    Flag flag = byKey.get(key);
    return flag == null ? key : "--" + flag.name() + " (" + key + ")";
  }

  /**
   * The help text of the flags: each flag with its argument and description, and below them its
   * key and its default (or that it is required).
   */
  public String help() {
    List<String> lines = new ArrayList<>();
    for (Flag flag : flags) {
      String where = flag.kind() == Flag.Kind.FAMILY ? flag.key() + "KEY"
          : flag.key() + (flag.required() ? ", required" : "; default " + flag.defaultValue());
      lines.addAll(CommandArguments.helpEntry(flag.usage(), flag.description(), where));
    }
    return String.join("\n", lines);
  }
}
