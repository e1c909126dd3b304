package dev.geofence.job.cli;

import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The parsed {@code --name value} options of a command. Unknown or repeated options, and a name
 * without a value, fail with one sentence that says what to do.
 */
public final class Options {

  private final Map<String, String> values;

  private Options(Map<String, String> values) {
    this.values = values;
  }

  /**
   * @param known option names without the leading dashes; names ending in '.' accept any suffix
   *     (pass-through families such as {@code debezium.})
   */
  public static Options parse(String[] args, int from, Set<String> known) {
    Map<String, String> values = new LinkedHashMap<>();
    for (int i = from; i < args.length; i++) {
      String arg = args[i];
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
      if (!isKnown(name, known)) {
        throw new IllegalArgumentException("unknown option --" + name + " (see --help)");
      }
      if (value == null) {
        if (i + 1 >= args.length || args[i + 1].startsWith("--")) {
          throw new IllegalArgumentException("option --" + name + " needs a value");
        }
        value = args[++i];
      }
      if (values.put(name, value) != null) {
        throw new IllegalArgumentException("option --" + name + " is given twice");
      }
    }
    return new Options(values);
  }

  private static boolean isKnown(String name, Set<String> known) {
    if (known.contains(name)) {
      return true;
    }
    for (String k : known) {
      if (k.endsWith(".") && name.startsWith(k) && name.length() > k.length()) {
        return true;
      }
    }
    return false;
  }

  public String required(String name) {
    String value = values.get(name);
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException("option --" + name + " is required (see --help)");
    }
    return value;
  }

  public String get(String name, String fallback) {
    return values.getOrDefault(name, fallback);
  }

  public int getInt(String name, int fallback) {
    String value = values.get(name);
    if (value == null) {
      return fallback;
    }
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("option --" + name + " must be a whole number, got '" + value + "'");
    }
  }

  /**
   * One of an enum's constants, named in any case.
   *
   * @throws IllegalArgumentException naming the option, the constants and the value given
   */
  public <E extends Enum<E>> E getEnum(String name, Class<E> type, E fallback) {
    String value = values.get(name);
    if (value == null) {
      return fallback;
    }
    try {
      return Enum.valueOf(type, value.toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      String[] names = Arrays.stream(type.getEnumConstants()).map(c -> c.name().toLowerCase(Locale.ROOT)).toArray(String[]::new);
      String choices = String.join(", ", Arrays.copyOf(names, names.length - 1)) + " or " + names[names.length - 1];
      throw new IllegalArgumentException("option --" + name + " must be " + choices + ", got '" + value + "'");
    }
  }

  /** Durations as {@code 500ms}, {@code 10s}, {@code 5m}, {@code 1h} or {@code 30d}. */
  public Duration getDuration(String name, Duration fallback) {
    String value = values.get(name);
    if (value == null) {
      return fallback;
    }
    try {
      if (value.endsWith("ms")) {
        return Duration.ofMillis(Long.parseLong(value.substring(0, value.length() - 2)));
      }
      long n = Long.parseLong(value.substring(0, value.length() - 1));
      switch (value.charAt(value.length() - 1)) {
        case 's':
          return Duration.ofSeconds(n);
        case 'm':
          return Duration.ofMinutes(n);
        case 'h':
          return Duration.ofHours(n);
        case 'd':
          return Duration.ofDays(n);
        default:
          break;
      }
    } catch (NumberFormatException | StringIndexOutOfBoundsException e) {
      // falls through to the message below
    }
    throw new IllegalArgumentException("option --" + name + " must be a duration like 500ms, 10s, 5m, 1h or 30d, got '" + value + "'");
  }

  /** Options whose names start with {@code prefix}, the prefix removed. */
  Map<String, String> withPrefix(String prefix) {
    Map<String, String> result = new LinkedHashMap<>();
    values.forEach((k, v) -> {
      if (k.startsWith(prefix)) {
        result.put(k.substring(prefix.length()), v);
      }
    });
    return result;
  }
}
