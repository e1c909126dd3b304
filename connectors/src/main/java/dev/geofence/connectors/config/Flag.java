package dev.geofence.connectors.config;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.description.BlockElement;
import org.apache.flink.configuration.description.TextElement;
import org.apache.flink.util.TimeUtils;

/**
 * One command-line flag and the configuration option it sets: {@code --source-url URL} sets {@link
 * GeofenceOptions#SOURCE_URL}. The option carries the key, type, default and description; the flag
 * adds how the command line writes it (name and argument), how its value is told apart from a bad
 * one, and, where the default is not a value (it derives from another option), what it is.
 *
 * @param name the flag without its dashes; for a {@link Kind#FAMILY}, the prefix ("debezium.")
 * @param option the option it sets; null for a family
 * @param key the option's key; for a family, the key prefix its suffixes are appended to
 * @param metavar what the help shows as its argument ({@code URL}, {@code D}, {@code wkb|wkt})
 * @param choices for a {@link Kind#CHOICE}, the values it takes, as written
 * @param required whether a command that reads the option fails without it
 * @param defaultText the default in words where the option has no default value, or null
 */
public record Flag(
    String name, ConfigOption<?> option, String key, Kind kind, String metavar, List<String> choices, boolean required,
    String defaultText, String description) {

  /** How a flag's value is written, and so what a bad one is told. */
  public enum Kind {
    TEXT("text"),
    NUMBER("a whole number"),
    DURATION("a duration like 500 ms, 10 s, 5 min, 1 h or 30 d"),
    CHOICE("one of the choices"),
    SWITCH("true or false"),
    FAMILY("text");

    private final String expected;

    Kind(String expected) {
      this.expected = expected;
    }
  }

  public Flag {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(key, "key");
    choices = List.copyOf(choices);
  }

  public static Flag text(String name, String metavar, ConfigOption<String> option) {
    return of(name, option, Kind.TEXT, metavar, List.of());
  }

  public static Flag number(String name, String metavar, ConfigOption<Integer> option) {
    return of(name, option, Kind.NUMBER, metavar, List.of());
  }

  public static Flag duration(String name, ConfigOption<Duration> option) {
    return of(name, option, Kind.DURATION, "D", List.of());
  }

  /** A flag whose values are an enum's constants, written in lower case (read in any case). */
  public static <E extends Enum<E>> Flag choice(String name, ConfigOption<E> option, Class<E> type) {
    List<String> values = Arrays.stream(type.getEnumConstants()).map(c -> c.name().toLowerCase(Locale.ROOT)).toList();
    return of(name, option, Kind.CHOICE, String.join("|", values), values);
  }

  /** A text flag that takes only these values. */
  public static Flag choice(String name, ConfigOption<String> option, String... values) {
    return of(name, option, Kind.CHOICE, String.join("|", values), List.of(values));
  }

  /** A flag that takes no value: given, it sets the option to true. */
  public static Flag toggle(String name, ConfigOption<Boolean> option) {
    return of(name, option, Kind.SWITCH, "", List.of());
  }

  /** {@code --PREFIXKEY VALUE} sets {@code keyPrefix + KEY}: options passed through to a library. */
  public static Flag family(String prefix, String keyPrefix, String description) {
    return new Flag(prefix, null, keyPrefix, Kind.FAMILY, "KEY VALUE", List.of(), false, null, description);
  }

  private static Flag of(String name, ConfigOption<?> option, Kind kind, String metavar, List<String> choices) {
    return new Flag(name, option, option.key(), kind, metavar, choices, false, null, text(option.description().getBlocks()));
  }

  /** This flag, which a command that reads its option cannot do without. */
  public Flag asRequired() {
    return new Flag(name, option, key, kind, metavar, choices, true, defaultText, description);
  }

  /**
   * This flag, whose option has no default value, defaulting to what {@code text} says (and so not
   * required).
   */
  public Flag defaultingTo(String text) {
    return new Flag(name, option, key, kind, metavar, choices, false, text, description);
  }

  /** The flag as written on a command line: {@code --source-url URL}. */
  public String usage() {
    return "--" + (kind == Kind.FAMILY ? name + "KEY VALUE" : name + (metavar.isEmpty() ? "" : " " + metavar));
  }

  /**
   * The default as the help and docs/configuration.md state it: the option's default value in
   * Flink's notation ({@code 10 s}, {@code wkb}), what the flag says it derives from, {@code
   * required}, or {@code none}.
   */
  public String defaultValue() {
    if (defaultText != null) {
      return defaultText;
    }
    if (option != null && option.hasDefaultValue()) {
      Object value = option.defaultValue();
      if (value instanceof Duration) {
        return TimeUtils.formatWithHighestUnit((Duration) value);
      }
      return value instanceof Enum ? ((Enum<?>) value).name().toLowerCase(Locale.ROOT) : String.valueOf(value);
    }
    return required ? "required" : "none";
  }

  /** What a valid value looks like, for the sentence that refuses a bad one. */
  String expected() {
    if (kind != Kind.CHOICE) {
      return kind.expected;
    }
    return choices.size() == 1 ? choices.get(0)
        : String.join(", ", choices.subList(0, choices.size() - 1)) + " or " + choices.get(choices.size() - 1);
  }

  /** An option's description as plain text: the project's options are described in plain sentences. */
  private static String text(List<BlockElement> blocks) {
    StringBuilder text = new StringBuilder();
    for (BlockElement block : blocks) {
      if (block instanceof TextElement) {
        text.append(text.length() == 0 ? "" : " ").append(((TextElement) block).getFormat());
      }
    }
    return text.toString();
  }
}
