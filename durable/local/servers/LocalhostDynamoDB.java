// Starts DynamoDB Local (3.x, package software.amazon.dynamodb.services) bound to 127.0.0.1.
//
// Why this exists: DynamoDB Local has no bind-address option; its Jetty server is built with
// `new Server(port)`, whose connector listens on every interface. Tests and developers must never
// expose an unauthenticated database to the network, so this launcher builds the server exactly as
// the stock ServerRunner does, then sets the connector's host before Jetty binds the socket.
//
// Differences from ServerRunner.main, each deliberate:
//  * telemetry is never configured (Telemetry.getTelemetry() stays empty, so nothing is sent even
//    if a caller forgets -disableTelemetry), and safeStart() is used, which does not emit events;
//  * a failed bind exits non-zero (stock start() prints the error and returns, leaving callers to
//    discover the failure by timing out);
//  * "-port 0" is accepted and binds an ephemeral port, avoiding the find-a-free-port-then-bind race
//    when several test sessions start servers at once (the stock CLI rejects port 0);
//  * one machine-readable line, "LocalhostDynamoDB listening on 127.0.0.1:PORT", is printed to
//    stdout once the socket is bound, so wrappers learn the real port;
//  * SIGTERM stops Jetty and closes the database handler cleanly through a shutdown hook.
//
// Only reflection on one private field ties this to the jar's internals; if a future jar renames
// it, the launcher fails loudly instead of silently listening on all interfaces.

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class LocalhostDynamoDB {
    private static final String HOST = "127.0.0.1";
    // Any valid port: it only satisfies the CLI's 1..65535 check and is replaced before binding.
    private static final String PLACEHOLDER_PORT = "8000";

    private LocalhostDynamoDB() {}

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            System.err.println("LocalhostDynamoDB: failed to start: " + t);
            t.printStackTrace(System.err);
            System.err.flush();
            // halt, not exit: Jetty/SQLite threads may already exist and must not keep the JVM alive.
            Runtime.getRuntime().halt(1);
        }
    }

    private static void run(String[] args) throws Exception {
        for (String a : args) {
            if (a.equalsIgnoreCase("-help") || a.equalsIgnoreCase("-version")) {
                // These never start a server, so the stock entry point is safe here.
                ServerRunner.main(args);
                return;
            }
        }

        boolean ephemeral = false;
        List<String> cli = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            cli.add(args[i]);
            if (args[i].equalsIgnoreCase("-port") && i + 1 < args.length) {
                String port = args[++i];
                if (port.equals("0")) {
                    ephemeral = true;
                    port = PLACEHOLDER_PORT;
                }
                cli.add(port);
            }
        }

        final DynamoDBProxyServer proxy =
                ServerRunner.createServerFromCommandLineArgs(cli.toArray(new String[0]));

        Field f = DynamoDBProxyServer.class.getDeclaredField("server");
        f.setAccessible(true);
        Server jetty = (Server) f.get(proxy);

        Connector[] connectors = jetty.getConnectors();
        if (connectors.length == 0) {
            throw new IllegalStateException("DynamoDB Local built a Jetty server without connectors");
        }
        for (Connector c : connectors) {
            if (!(c instanceof ServerConnector)) {
                // Refuse to start rather than listen somewhere we cannot restrict.
                throw new IllegalStateException("unexpected Jetty connector type " + c.getClass().getName());
            }
            ServerConnector sc = (ServerConnector) c;
            sc.setHost(HOST);
            if (ephemeral) {
                sc.setPort(0);
            }
        }

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                proxy.stop();
            } catch (Exception e) {
                System.err.println("LocalhostDynamoDB: error while stopping: " + e);
            }
        }, "LocalhostDynamoDB-shutdown"));

        proxy.safeStart();

        ServerConnector first = (ServerConnector) connectors[0];
        System.out.println("LocalhostDynamoDB listening on " + HOST + ":" + first.getLocalPort());
        System.out.flush();

        proxy.join();
    }
}
