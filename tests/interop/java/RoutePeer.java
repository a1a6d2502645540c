// A Java RocketMQ 4.x producer and lite pull consumer with no credentials, for
// tests/interop/test_java_namesrv_acl.py: both find their routes on the NameServer unsigned.
//
//   java -cp <rocketmq client classpath>:<dir of this class> RoutePeer NAMESRV TOPIC COUNT
//
// Sends COUNT messages (body "route-<i>"), printing "SENT <status>" for each; then assigns all of
// TOPIC's queues (routes from the NameServer), reads them from the start for 30 s at most and
// prints "GOT <n>" with the number of this run's messages seen. The classpath is the environment's:
// this file is fastmq's own test peer, not part of RocketMQ.
import java.nio.charset.StandardCharsets;
import java.util.Collection;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public final class RoutePeer {
    private RoutePeer() {
    }

    public static void main(String[] args) throws Exception {
        String ns = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String run = Long.toString(System.nanoTime());
        DefaultMQProducer p = new DefaultMQProducer("PG_JAVA_ROUTE");
        p.setNamesrvAddr(ns);
        p.start();
        try {
            for (int i = 0; i < count; i++) {
                SendResult r = p.send(new Message(topic, "route", run, ("route-" + i).getBytes(StandardCharsets.UTF_8)));
                System.out.println("SENT " + r.getSendStatus().name());
            }
        } finally {
            p.shutdown();
        }
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("CG_JAVA_ROUTE");
        c.setNamesrvAddr(ns);
        c.setAutoCommit(false);
        c.start();
        int got = 0;
        try {
            Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
            c.assign(mqs);
            for (MessageQueue mq : mqs) {
                c.seekToBegin(mq);
            }
            long deadline = System.currentTimeMillis() + 30_000;
            while (got < count && System.currentTimeMillis() < deadline) {
                for (MessageExt m : c.poll(1000)) {
                    if (run.equals(m.getKeys())) {
                        got++;
                    }
                }
            }
        } finally {
            System.out.println("GOT " + got);
            c.shutdown();
        }
    }
}
