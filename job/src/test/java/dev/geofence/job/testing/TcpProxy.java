package dev.geofence.job.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP relay to a real server that a test can cut and restore: while down, new connections are
 * refused and open ones are closed, as when the network to a database fails. Always listens on the
 * same port, so clients reconnect to it once it is up again.
 */
public final class TcpProxy implements AutoCloseable {

  private final String targetHost;
  private final int targetPort;
  private final int port;
  private final List<Socket> open = new CopyOnWriteArrayList<>();
  private volatile ServerSocket server;

  public TcpProxy(String targetHost, int targetPort) throws IOException {
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    try (ServerSocket probe = new ServerSocket(0)) {
      this.port = probe.getLocalPort();
    }
    up();
  }

  public int port() {
    return port;
  }

  public synchronized void up() throws IOException {
    if (server != null) {
      return;
    }
    ServerSocket listening = new ServerSocket();
    listening.setReuseAddress(true);
    listening.bind(new InetSocketAddress("127.0.0.1", port));
    server = listening;
    Thread acceptor = new Thread(() -> accept(listening), "tcp-proxy-" + port);
    acceptor.setDaemon(true);
    acceptor.start();
  }

  public synchronized void down() throws IOException {
    if (server != null) {
      server.close();
      server = null;
    }
    for (Socket socket : open) {
      socket.close();
    }
    open.clear();
  }

  private void accept(ServerSocket listening) {
    while (!listening.isClosed()) {
      try {
        Socket client = listening.accept();
        Socket target = new Socket(targetHost, targetPort);
        open.add(client);
        open.add(target);
        pump(client, target);
        pump(target, client);
      } catch (IOException e) {
        // closed by down(), or the target refused: the client sees its connection fail
      }
    }
  }

  private static void pump(Socket from, Socket to) {
    Thread thread = new Thread(() -> {
      byte[] buffer = new byte[16384];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
          out.write(buffer, 0, n);
          out.flush();
        }
      } catch (IOException e) {
        // either side closed
      } finally {
        try {
          to.close();
        } catch (IOException e) {
          // already closed
        }
      }
    }, "tcp-proxy-pump");
    thread.setDaemon(true);
    thread.start();
  }

  @Override
  public void close() throws IOException {
    down();
  }
}
