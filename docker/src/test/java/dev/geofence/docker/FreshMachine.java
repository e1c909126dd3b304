package dev.geofence.docker;

import java.io.IOException;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/** What the tests that run the documented commands as a new user share: free ports, and a query's rows. */
final class FreshMachine {

  private FreshMachine() {}

  /** A port nothing listens on now, so that the outcome does not depend on what else runs here. */
  static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }

  /** The first column of every row {@code sql} returns, as text. */
  static List<String> strings(Connection db, String sql) throws Exception {
    List<String> rows = new ArrayList<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(sql)) {
      while (r.next()) {
        rows.add(r.getString(1));
      }
    }
    return rows;
  }
}
