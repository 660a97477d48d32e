// A java agent that does nothing, installed as LocalStack's ddb-local-loader-0.1.jar.
//
// Why: LocalStack starts DynamoDB Local with -javaagent:<lib>/dynamodb-local/2/ddb-local-loader-0.1.jar,
// an agent it normally downloads from GitHub to patch DynamoDB Local's limit of 20 GSIs per table.
// These machines reach only the package registries, and the JVM refuses to start when the agent
// jar is missing, so localstack.sh compiles this class into a jar of that name. Our tables have
// three GSIs; nothing depends on the patch.

import java.lang.instrument.Instrumentation;

public final class NoopAgent {
    private NoopAgent() {}

    public static void premain(String args, Instrumentation inst) {
        // Intentionally empty: see the file comment.
    }
}
