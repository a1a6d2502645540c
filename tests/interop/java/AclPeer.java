// Drives the Apache RocketMQ Java client (4.x) with AclClientRPCHook, for
// tests/interop/test_java_acl_client.py.
//
//   java -cp <rocketmq client + acl classpath>:<dir of this class> AclPeer NAMESRV TOPIC ACCESS_KEY SECRET_KEY COUNT
//
// Sends COUNT messages (body "acl-<i>") with a DefaultMQProducer whose requests the hook signs,
// one retry at most; prints "SENT {json}" per message: {"ok": true, "status": ...} or
// {"ok": false, "error": <the exception and its cause>}. The classpath is the environment's:
// this file is fastmq's own test peer, not part of RocketMQ.
import java.nio.charset.StandardCharsets;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

public final class AclPeer {
    private AclPeer() {
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    public static void main(String[] args) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("PG_JAVA_ACL",
            new AclClientRPCHook(new SessionCredentials(args[2], args[3])));
        p.setNamesrvAddr(args[0]);
        p.setRetryTimesWhenSendFailed(1);
        p.start();
        try {
            int count = Integer.parseInt(args[4]);
            for (int i = 0; i < count; i++) {
                Message m = new Message(args[1], ("acl-" + i).getBytes(StandardCharsets.UTF_8));
                try {
                    SendResult r = p.send(m);
                    System.out.println("SENT {\"ok\": true, \"status\": " + quote(r.getSendStatus().name()) + "}");
                } catch (Exception e) {
                    String text = e.toString() + (e.getCause() != null ? " CAUSE " + e.getCause() : "");
                    System.out.println("SENT {\"ok\": false, \"error\": " + quote(text) + "}");
                }
            }
        } finally {
            p.shutdown();
        }
    }
}
