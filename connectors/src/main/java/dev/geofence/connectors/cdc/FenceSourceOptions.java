package dev.geofence.connectors.cdc;

import dev.geofence.connectors.config.GeofenceOptions;
import java.io.Serializable;
import java.net.URI;
import java.time.Duration;
import java.util.Objects;
import java.util.Properties;

/**
 * Immutable options of the fence change source: where the fence database is, how to log in, the
 * replication slot and publication, the table layout, the heartbeat, and Debezium properties
 * passed through. The password is never printed.
 */
public final class FenceSourceOptions implements Serializable {

  private static final long serialVersionUID = 1L;

  private final String hostname;
  private final int port;
  private final String database;
  private final String username;
  private final String password;
  private final String slotName;
  private final String publicationName;
  private final FenceTableColumns columns;
  private final Duration heartbeatInterval;
  private final Properties debeziumProperties;

  private FenceSourceOptions(Builder b) {
    if (b.url == null) {
      throw new IllegalArgumentException("the fence database URL is required (jdbc:postgresql://host:port/database)");
    }
    URI uri = parse(b.url);
    this.hostname = uri.getHost();
    this.port = uri.getPort() < 0 ? 5432 : uri.getPort();
    this.database = uri.getPath().substring(1);
    this.username = Objects.requireNonNull(b.username, "the fence database user is required");
    this.password = b.password == null ? "" : b.password;
    this.slotName = FenceTableColumns.identifier("replication slot", b.slotName);
    this.publicationName = FenceTableColumns.identifier("publication", b.publicationName);
    this.columns = Objects.requireNonNull(b.columns);
    if (b.heartbeatInterval.isNegative() || b.heartbeatInterval.isZero()) {
      throw new IllegalArgumentException("the heartbeat interval must be positive, got " + b.heartbeatInterval);
    }
    this.heartbeatInterval = b.heartbeatInterval;
    this.debeziumProperties = new Properties();
    this.debeziumProperties.putAll(b.debeziumProperties);
  }

  private static URI parse(String url) {
    if (!url.startsWith("jdbc:postgresql://")) {
      throw new IllegalArgumentException("the fence database URL must look like jdbc:postgresql://host:port/database, got " + redact(url));
    }
    URI uri = URI.create(url.substring("jdbc:".length()));
    if (uri.getHost() == null || uri.getPath() == null || uri.getPath().length() < 2) {
      throw new IllegalArgumentException("the fence database URL must name a host and a database: " + redact(url));
    }
    return uri;
  }

  /** A URL as it may be logged: query parameters (where a password may hide) are cut. */
  public static String redact(String url) {
    int q = url.indexOf('?');
    return q < 0 ? url : url.substring(0, q) + "?...";
  }

  public static Builder builder() {
    return new Builder();
  }

  public String hostname() {
    return hostname;
  }

  public int port() {
    return port;
  }

  public String database() {
    return database;
  }

  public String username() {
    return username;
  }

  public String password() {
    return password;
  }

  public String slotName() {
    return slotName;
  }

  public String publicationName() {
    return publicationName;
  }

  public FenceTableColumns columns() {
    return columns;
  }

  public Duration heartbeatInterval() {
    return heartbeatInterval;
  }

  public Properties debeziumProperties() {
    Properties copy = new Properties();
    copy.putAll(debeziumProperties);
    return copy;
  }

  /** The JDBC URL of the fence database, without credentials. */
  public String jdbcUrl() {
    return "jdbc:postgresql://" + hostname + ":" + port + "/" + database;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof FenceSourceOptions)) {
      return false;
    }
    FenceSourceOptions that = (FenceSourceOptions) o;
    return port == that.port && hostname.equals(that.hostname) && database.equals(that.database)
        && username.equals(that.username) && password.equals(that.password) && slotName.equals(that.slotName)
        && publicationName.equals(that.publicationName) && columns.equals(that.columns)
        && heartbeatInterval.equals(that.heartbeatInterval) && debeziumProperties.equals(that.debeziumProperties);
  }

  @Override
  public int hashCode() {
    return Objects.hash(hostname, port, database, username, slotName, publicationName, columns, heartbeatInterval);
  }

  @Override
  public String toString() {
    return "FenceSourceOptions{" + jdbcUrl() + ", user=" + username + ", password=***, slot=" + slotName
        + ", publication=" + publicationName + ", " + columns + ", heartbeat=" + heartbeatInterval + "}";
  }

  /** Builder of {@link FenceSourceOptions}; {@link #build()} checks every part. */
  public static final class Builder {
    private String url;
    private String username;
    private String password;
    private String slotName = GeofenceOptions.SLOT.defaultValue();
    private String publicationName = GeofenceOptions.PUBLICATION.defaultValue();
    private FenceTableColumns columns = FenceTableColumns.defaults();
    private Duration heartbeatInterval = GeofenceOptions.HEARTBEAT_INTERVAL.defaultValue();
    private final Properties debeziumProperties = new Properties();

    private Builder() {}

    /** {@code jdbc:postgresql://host:port/database}. */
    public Builder url(String url) {
      this.url = url;
      return this;
    }

    public Builder username(String username) {
      this.username = username;
      return this;
    }

    public Builder password(String password) {
      this.password = password;
      return this;
    }

    public Builder slotName(String slotName) {
      this.slotName = slotName;
      return this;
    }

    /** Defaults to the publication the shipped migration creates. */
    public Builder publicationName(String publicationName) {
      this.publicationName = publicationName;
      return this;
    }

    public Builder columns(FenceTableColumns columns) {
      this.columns = columns;
      return this;
    }

    public Builder heartbeatInterval(Duration heartbeatInterval) {
      this.heartbeatInterval = heartbeatInterval;
      return this;
    }

    /** A Debezium property passed through as is (the {@code debezium.} prefix already removed). */
    public Builder debeziumProperty(String key, String value) {
      this.debeziumProperties.setProperty(key, value);
      return this;
    }

    public FenceSourceOptions build() {
      return new FenceSourceOptions(this);
    }
  }
}
